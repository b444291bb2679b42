#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# gsrun's unit and integration tests against Open MPI 5 (PRRTE), PMIx 5 and
# hwloc of Debian 13, and its simulated-cluster tests (make check-cluster:
# Slurm 24.11's slurmctld and slurmd, the SPANK plugin built against its
# headers), in a Debian 13 root made here with debootstrap from the
# machine's own Debian archive. Nothing is installed on the machine itself
# (but debootstrap) and the root is removed at the end, also when the test
# is interrupted.
#
#   tests/ompi5/check.sh [--keep DIR]
#
# --keep DIR reuses (or makes and keeps) the root in DIR, for development.
# Needs root and the archive; otherwise says why and exits 77. Ends with
# "N passed, N failed" (the counts of `make check` in the root).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
keep=""
[ "${1:-}" = --keep ] && keep=${2:?--keep needs a directory}
suite=trixie
pkgs=build-essential,autoconf,automake,pkg-config,libopenmpi-dev,openmpi-bin,libpmix-dev,libhwloc-dev,libcmocka-dev,procps,iproute2,util-linux,slurmctld,slurmd,slurm-client,libslurm-dev

skip() { echo "1..0 # SKIP Debian 13 suite: $*"; echo "0 passed, 0 failed, 1 skipped"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || skip "needs debootstrap (apt-get install debootstrap)"
# The archive this machine already uses (a local mirror if it has one).
. "$(dirname "$0")/../debian_archive.sh"
mirror=${mirror:-$(debian_archive)}
[ -n "$mirror" ] || skip "$DEBIAN_ARCHIVE_NONE"

root=${keep:-$(mktemp -d /var/tmp/gsrun-ompi5.XXXXXX)}
mkdir -p "$root" && chmod 755 "$root" # the root's "/": tests run commands as other users there
cleanup() { [ -n "$keep" ] || rm -rf --one-file-system "$root"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

t0=$(date +%s)
if [ ! -x "$root/usr/bin/mpirun" ] || [ ! -x "$root/usr/sbin/slurmd" ]; then
    if ! debootstrap --variant=minbase --include="$pkgs" "$suite" "$root" "$mirror" \
        >"$root.debootstrap.log" 2>&1; then
        if grep -q "Failed getting release file" "$root.debootstrap.log"; then
            rm -f "$root.debootstrap.log"
            skip "the Debian archive $mirror cannot be reached (an offline machine)"
        fi
        tail -20 "$root.debootstrap.log"
        rm -f "$root.debootstrap.log"
        echo "Bail out! debootstrap of Debian 13 ($suite) from $mirror failed"
        echo "0 passed, 1 failed"
        exit 1
    fi
    rm -f "$root.debootstrap.log"
fi
# debootstrap makes no /etc/hosts; the cluster tests bind each host's own
# onto it.
[ -e "$root/etc/hosts" ] || echo "127.0.0.1 localhost" >"$root/etc/hosts"
echo "# Debian 13 root from $mirror in $(($(date +%s) - t0)) s: $(chroot "$root" mpirun --version | head -1), $(chroot "$root" /usr/sbin/slurmd -V)"

# In a mount and PID namespace of its own: the source read through a bind
# mount, a private /tmp, /proc, /sys and /dev for the tests; all of it goes
# with the namespace.
mkdir -p "$root/src"
unshare --mount --pid --fork --mount-proc="$root/proc" /bin/bash -c '
    set -e
    # The root a mount point of its own: unshare --mount (the cluster
    # tests make their hosts with it) cannot make a chroot whose "/" is no
    # mount point private. /proc again on top of it.
    mount --bind "$2" "$2"
    mount -t proc proc "$2/proc"
    mount --bind "$1" "$2/src"
    mount -t tmpfs tmpfs "$2/tmp"
    mount --rbind /dev "$2/dev"
    mount -t sysfs sysfs "$2/sys"
    mount --rbind /sys/fs/cgroup "$2/sys/fs/cgroup"
    exec chroot "$2" /bin/bash -c "
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        # The root is made for the test: exec_prefix.sh may put the rank
        # prefix in the site parameter file of PRRTE (and takes it out again).
        export GSRUN_TEST_SITE_PARAMS=/etc/openmpi/prte-mca-params.conf
        # The Prometheus tools are not in the root: status_prom.sh checks them
        # on the host (Debian 12), and skips those two checks here.
        export GS_ALLOW_MISSING_PROM=1
        rm -rf /build && mkdir /build && cd /build &&
        /src/configure -q >configure.out 2>&1 || { cat configure.out; exit 1; }
        sed -n \"/^gsrun .* configuration/,/cmocka/p\" config.log | sed \"s/^/# /\"
        make -s -j\$(nproc) >make.out 2>&1 || { tail -30 make.out; exit 1; }
        make -s -j\$(nproc) check >check.out 2>&1
        rc=\$?
        # The simulated cluster (Slurm 24.11 there), alone: its timing checks
        # do not share the cores with the other tests.
        make -s check-cluster >>check.out 2>&1 || rc=1
        grep -E \"^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS):\" check.out
        for t in \$(grep -E \"^(FAIL|ERROR|XPASS):\" check.out | awk \"{print \\\$2}\" | sort -u); do
            echo \"=== \${t%.sh}.log\"; tail -40 \"\${t%.sh}.log\"
        done
        exit \$rc"
' gsrun-ompi5 "$top" "$root" >"${TMPDIR:-/tmp}/gsrun-ompi5.$$.out" 2>&1
rc=$?
out="${TMPDIR:-/tmp}/gsrun-ompi5.$$.out"
cat "$out"
pass=$(grep -c "^PASS:" "$out")
fail=$(grep -cE "^(FAIL|ERROR|XPASS):" "$out")
rm -f "$out"
[ $rc -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "# Debian 13 suite (Open MPI 5, Slurm 24.11): $(($(date +%s) - t0)) s in all"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
