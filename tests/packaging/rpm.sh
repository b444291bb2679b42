#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the RPMs of packaging/rpm/gsrun.spec from the release tarball with
# rpmbuild -bb. On Debian the spec's BuildRequires name RPM packages this
# machine does not have: --nodeps, and the Slurm and Open MPI releases the
# spec would read from slurm-devel / openmpi-devel come from dpkg, and the
# Open MPI prefix (rpm's %configure searches only its own pkg-config dirs).
#   tests/packaging/rpm.sh WORKDIR TARBALL   (the RPMs land in WORKDIR/rpm/RPMS)
. "$(dirname "$0")/lib.sh"
W=$1 tarball=$2
V=$(tarball_version "$tarball")
if ! command -v rpmbuild >/dev/null; then
    skip "RPMs" "needs rpmbuild (apt-get install rpm)"
    exit 0
fi
R=$W/rpm
mkdir -p "$R/SOURCES" "$R/BUILD" "$R/RPMS" "$R/SRPMS" "$R/SPECS" "$R/tmp"
cp "$tarball" "$R/SOURCES/"
tar -xzOf "$tarball" "gsrun-$V/packaging/rpm/gsrun.spec" >"$R/SPECS/gsrun.spec"
check "the release tarball carries the spec" test -s "$R/SPECS/gsrun.spec" || exit 0
check "the spec's version is the tarball's ($V)" grep -qE "^Version: +$V\$" "$R/SPECS/gsrun.spec"
t0=$(date +%s)
rpmbuild -bb --nodeps --define "_topdir $R" --define "_tmppath $R/tmp" \
    --define "slurm_version $(deb_upstream libslurm-dev)" \
    --define "ompi_version $(deb_upstream libopenmpi-dev)" \
    --define "ompi_prefix $(pkg-config --variable=libdir ompi 2>/dev/null | sed 's|/lib$||')" \
    "$R/SPECS/gsrun.spec" >"$R/build.log" 2>&1
rc=$?
check "rpmbuild -bb builds the spec from the tarball ($(($(date +%s) - t0)) s)" test $rc = 0 ||
    { tail -40 "$R/build.log" | diag; exit 0; }
units=$(units_passed "$R/build.log")
check "%check ran the unit tests ($units passed)" test $? = 0
for p in gsrun gsrun-openmpi gsrun-slurm; do
    f=$(ls "$R"/RPMS/*/"$p-$V"-1*.rpm 2>/dev/null | head -1)
    check "$p: $(basename "${f:-$p-$V-1.<arch>.rpm (missing)}")" test -n "$f"
done
f=$(ls "$R"/RPMS/*/gsrun-slurm-"$V"-1*.rpm 2>/dev/null | head -1)
if [ -n "$f" ]; then
    req=$(rpm -qp --requires "$f" 2>/dev/null | tr '\n' ' ')
    echo "# gsrun-slurm Requires: $req"
    smm=$(deb_upstream libslurm-dev | cut -d. -f1,2)
    check "gsrun-slurm requires Slurm $smm exactly, and gsrun of the same build" \
        eval 'echo "$req" | grep -qE "slurm(\(x86-64\))? >= $smm" &&
              echo "$req" | grep -qE "gsrun(\(x86-64\))? = $V-1"'
    check "gsrun-slurm's plugstack snippet is %config(noreplace)" \
        eval 'rpm -qp --configfiles "$f" | grep -qx /etc/slurm/plugstack.conf.d/gsrun.conf'
fi
f=$(ls "$R"/RPMS/*/gsrun-"$V"-1*.rpm 2>/dev/null | head -1)
[ -n "$f" ] && check "the gsrun RPM names its license (BSD-3-Clause)" \
    eval '[ "$(rpm -qp --qf "%{LICENSE}" "$f")" = BSD-3-Clause ]'
