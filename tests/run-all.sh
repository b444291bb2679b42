#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Sets everything up and runs the whole test suite:
#   installs the build dependencies (Debian/Ubuntu), generates the build
#   system, configures in _build/, runs `make check` (unit and integration
#   tests), `make check-cluster` (multi-node tests on a simulated cluster of
#   namespaces, with Slurm 22.05), the same tests (both) against Open MPI 5 and
#   Slurm 24.11 in a Debian 13 root (tests/ompi5/check.sh), the packaging suite (tests/packaging/check.sh: .debs,
#   RPMs, Spack recipe, Lmod module, the .debs in a Debian 12 root) and `make
#   distcheck` (the tarball, with the unit tests and two integration tests
#   run from it), and prints "N passed, N failed".
# GSRUN_SKIP_OMPI5=1, GSRUN_SKIP_PACKAGING=1 or GSRUN_SKIP_DISTCHECK=1 leave
# those steps out.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
sh tests/install-deps.sh || exit 1
./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; exit 1; }
mkdir -p _build && cd _build || exit 1
../configure -q || exit 1
make -s -j"$(nproc)" || exit 1
# mpirun runs as root only with its explicit opt-in (CI runs as root).
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
make -s -j"$(nproc)" check >check.out 2>&1
rc=$?
# The simulated multi-host cluster (needs root; skipped otherwise), alone.
make -s check-cluster >>check.out 2>&1 || rc=1
# Open MPI 5 (PRRTE), PMIx 5, Slurm 24.11: in a Debian 13 root made for the
# run (root and the Debian archive needed; skipped otherwise).
if [ "${GSRUN_SKIP_OMPI5:-0}" != 1 ]; then
    bash "$top/tests/ompi5/check.sh" >ompi5.out 2>&1
    case $? in
    0) echo "Debian 13 suite (Open MPI 5, Slurm 24.11): $(tail -1 ompi5.out)" ;;
    77) echo "Debian 13 suite (Open MPI 5, Slurm 24.11): skipped: $(sed -n 's/.*# SKIP //p' ompi5.out)" ;;
    *) cat ompi5.out; echo "Debian 13 suite (Open MPI 5, Slurm 24.11): FAILED"; rc=1 ;;
    esac
fi
# The packages a site installs (.debs, RPMs, Spack recipe, Lmod module), and
# the .debs installed, used and purged in a Debian 12 root (tests/packaging).
if [ "${GSRUN_SKIP_PACKAGING:-0}" != 1 ]; then
    bash "$top/tests/packaging/check.sh" . >packaging.out 2>&1
    if [ $? -eq 0 ]; then
        echo "Packaging suite: $(tail -2 packaging.out | head -1)"
    else
        grep -vE "^ok |^# (PASS|checking)" packaging.out | tail -60
        echo "Packaging suite: FAILED"
        rc=1
    fi
fi
grep -E "^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS):" check.out || true
if [ $rc -ne 0 ]; then
    # Show the log of every test that did not pass.
    for t in $(grep -E "^(FAIL|ERROR|XPASS):" check.out | awk '{print $2}'); do
        echo "=== ${t%.sh}.log"
        cat "${t%.sh}.log" 2>/dev/null | tail -60
    done
    tail -20 check.out
fi
# make distcheck: the release tarball builds in a tree of its own, installs
# and uninstalls cleanly, and its tests run from it: the unit tests and two
# integration tests (they need the fakes, lib.sh and the helpers shipped),
# not the whole suite a third time (it ran above, on Open MPI 4 and 5); that
# kept the whole of this under an hour on 2 cores.
if [ $rc -eq 0 ] && [ "${GSRUN_SKIP_DISTCHECK:-0}" != 1 ]; then
    if ! make -s distcheck TESTS='$(UNIT_TESTS) tests/spdx.sh tests/layers.sh tests/integration/options.sh tests/integration/mps_fake.sh' \
        >distcheck.out 2>&1; then
        tail -40 distcheck.out
        # distcheck leaves its tree behind on failure: show what failed there.
        for l in gsrun-*/_build/sub/test-suite.log; do
            [ -f "$l" ] && echo "=== $l" && tail -150 "$l"
        done
        echo "make distcheck failed"
        rc=1
    fi
    [ $rc -eq 0 ] && echo "make distcheck: passed"
fi
# The failures once more, last: a CI that keeps only the end of this output
# still names them.
{
    grep -hE "^(FAIL|ERROR|XPASS):" check.out ompi5.out 2>/dev/null
    grep -hE "^not ok" packaging.out 2>/dev/null
} | tail -40 | sed 's/^/failed: /'
sh "$top/tests/summary.sh" .
s=$?
[ $rc -eq 0 ] && [ $s -eq 0 ]
