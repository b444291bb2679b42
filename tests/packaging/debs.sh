#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the Debian packages from the release tarball (dpkg-buildpackage -b in
# the unpacked tarball, as a site or a distribution would) and runs lintian.
#   tests/packaging/debs.sh WORKDIR TARBALL   (the .debs land in WORKDIR/deb)
. "$(dirname "$0")/lib.sh"
W=$1 tarball=$2
V=$(tarball_version "$tarball")
arch=$(dpkg --print-architecture)
if ! command -v dpkg-buildpackage >/dev/null || ! dpkg-query -W debhelper >/dev/null 2>&1; then
    skip "Debian packages" "needs dpkg-dev and debhelper (apt-get install dpkg-dev debhelper)"
    exit 0
fi
mkdir -p "$W/deb"
cp "$tarball" "$W/deb/gsrun_$V.orig.tar.gz"
tar -C "$W/deb" -xzf "$tarball"
src=$W/deb/gsrun-$V
check "the release tarball carries debian/ (make dist)" test -x "$src/debian/rules" || exit 0
t0=$(date +%s)
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$W/deb/build.log" 2>&1
rc=$?
check "dpkg-buildpackage -us -uc -b builds from the tarball ($(($(date +%s) - t0)) s)" test $rc = 0 ||
    { tail -40 "$W/deb/build.log" | diag; exit 0; }
units=$(units_passed "$W/deb/build.log")
check "the build ran the unit tests (make check-unit: $units passed)" test $? = 0
for p in gsrun gsrun-openmpi gsrun-slurm; do
    check "$p: ${p}_$V-1_$arch.deb" test -f "$W/deb/${p}_$V-1_$arch.deb"
done
cd "$W/deb" || exit 1
deb() { echo "$W/deb/${1}_$V-1_$arch.deb"; }
# What each package holds, and that the Slurm and Open MPI parts depend on the
# exact releases whose ABI they were built for.
dpkg-deb -c "$(deb gsrun)" >gsrun.list
check "gsrun holds gsrun, its shim, agent and task prolog, the man page, the Lmod module" \
    eval 'for f in ./usr/bin/gsrun ./usr/libexec/gsrun/gsrun-shim ./usr/libexec/gsrun/gsrun-agent \
        ./usr/libexec/gsrun/gsrun-srun-task ./usr/share/man/man1/gsrun.1.gz \
        ./usr/share/gsrun/modulefiles/gsrun/$V.lua ./usr/share/doc/gsrun/copyright; do
        grep -q " $f\$" gsrun.list || { echo "# $f missing"; exit 1; }; done'
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
check "gsrun-slurm: the plugin in Slurm's plugin dir, the plugstack snippet a conffile" \
    eval 'dpkg-deb -c "$(deb gsrun-slurm)" | grep " ./usr/lib/$ma/slurm-wlm/gsrun_spank.so$" >/dev/null &&
          dpkg-deb -I "$(deb gsrun-slurm)" conffiles | grep -x /etc/slurm/plugstack.conf.d/gsrun.conf >/dev/null'
check "gsrun-openmpi: the component outside Open MPI's own dir (not loaded until enabled), its snippet" \
    eval 'dpkg-deb -c "$(deb gsrun-openmpi)" >openmpi.list &&
          grep -q " ./usr/lib/$ma/gsrun/openmpi/mca_rtc_gsrun.so$" openmpi.list &&
          grep -q " ./usr/share/gsrun/gsrun-mca-params.conf$" openmpi.list'
sv=$(deb_upstream libslurm-dev)
smm=$(echo "$sv" | cut -d. -f1,2)
sdep=$(dpkg-deb -f "$(deb gsrun-slurm)" Depends)
echo "# gsrun-slurm Depends: $sdep"
check "gsrun-slurm depends on Slurm $smm exactly (the plugin's ABI)" \
    eval 'echo "$sdep" | grep -qF "slurm-wlm-basic-plugins (>= $smm)" &&
          echo "$sdep" | grep -qE "slurm-wlm-basic-plugins \(<< [0-9.]+~\)"'
ov=$(deb_upstream libopenmpi-dev)
odep=$(dpkg-deb -f "$(deb gsrun-openmpi)" Depends)
echo "# gsrun-openmpi Depends: $odep"
check "gsrun-openmpi depends on Open MPI $ov exactly (ORTE's ABI)" \
    eval 'echo "$odep" | grep -qE "libopenmpi[0-9]+ \(>= $ov\), libopenmpi[0-9]+ \(<< [0-9.]+~\)"'
check "gsrun-openmpi and gsrun-slurm depend on gsrun of the same build" \
    eval 'dpkg-deb -f "$(deb gsrun-slurm)" Depends | grep -qF "gsrun (= $V-1)" &&
          dpkg-deb -f "$(deb gsrun-openmpi)" Depends | grep -qF "gsrun (= $V-1)"'
if command -v lintian >/dev/null; then
    lintian --fail-on error --tag-display-limit 0 "$W/deb/gsrun_$V-1_$arch.changes" >lintian.log 2>&1
    lrc=$?
    diag lintian.log
    check "lintian: no error ($(grep -c '^E:' lintian.log) errors, $(grep -c '^W:' lintian.log) warnings)" \
        eval '[ $lrc = 0 ] && ! grep -q "^E:" lintian.log'
else
    skip "lintian" "needs lintian (apt-get install lintian)"
fi
