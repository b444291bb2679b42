#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the simulated-cluster suites (multinode.sh, launchers.sh and the Slurm
# tests srun.sh, gres.sh and cgroup.sh: all, or those named by --only, e.g.
# --only launchers) many
# times in a row, optionally while a compile keeps every core busy: a timing
# bound or a race in them shows up here, not on CI.
#
#   tests/cluster/repeat.sh [--build DIR] [--runs N] [--load] [--only NAME]...
#
# --load: an out-of-tree build of this tree runs again and again (make -j of
# the machine's cores) for as long as the runs last. Each run's TAP output is
# kept in DIR/repeat/run-K.log; a failing run's failed checks are printed.
# Ends with "N passed, N failed" (a run is one test), status 0 only if every
# run passed. Needs root, as the suites do.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$top/_build runs=20 load=0 only=""
while [ $# -gt 0 ]; do
    case $1 in
    --build) B=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --load) load=1; shift ;;
    --only) only="$only $2"; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--runs N] [--load] [--only multinode|launchers|srun|gres|cgroup]..." >&2; exit 2 ;;
    esac
done
suites=""
for name in ${only:-multinode launchers srun gres cgroup}; do
    case $name in
    multinode | launchers) suites="$suites $top/tests/cluster/$name.sh" ;;
    srun | gres | cgroup) suites="$suites $top/tests/slurm/$name.sh" ;;
    *) echo "$0: --only: no suite '$name' (multinode, launchers, srun, gres, cgroup)" >&2; exit 2 ;;
    esac
done
case "$runs" in ''|*[!0-9]*) echo "$0: --runs takes a number, not '$runs'" >&2; exit 2 ;; esac
[ -x "$B/launcher/gsrun" ] || { echo "$0: no build in $B (run tests/run-all.sh or make first)" >&2; exit 2; }
make -s -C "$B" check TESTS= >/dev/null 2>&1 || { echo "$0: cannot build the test programs in $B" >&2; exit 2; }
export GS_TOP_BUILDDIR=$B GS_TOP_SRCDIR=$top
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
logs=$B/repeat
mkdir -p "$logs"
loadpid=""
stop_load() {
    [ -n "$loadpid" ] || return 0
    kill -- -"$loadpid" 2>/dev/null
    wait "$loadpid" 2>/dev/null
    rm -rf "$logs/load"
    loadpid=""
}
trap stop_load EXIT
trap 'exit 1' INT TERM HUP
if [ $load = 1 ]; then
    # Its own process group, so that stop_load ends the compilers too.
    setsid bash -c "while :; do rm -rf '$logs/load'; mkdir -p '$logs/load' && cd '$logs/load' &&
        '$top/configure' -q >/dev/null 2>&1 && make -s -j$(nproc) >/dev/null 2>&1; done" &
    loadpid=$!
fi
pass=0 fail=0
for k in $(seq "$runs"); do
    t0=$(date +%s)
    for suite in $suites; do bash "$suite"; done >"$logs/run-$k.log" 2>&1
    bad=$(grep -E "^(not ok|Bail out)" "$logs/run-$k.log")
    n=$(grep -cE "^ok " "$logs/run-$k.log")
    if [ -z "$bad" ] && [ "$n" -gt 0 ]; then
        pass=$((pass + 1))
        echo "run $k: $n checks passed ($(($(date +%s) - t0)) s)"
    else
        fail=$((fail + 1))
        echo "run $k: FAILED ($(($(date +%s) - t0)) s, log $logs/run-$k.log)"
        echo "$bad" | sed 's/^/    /'
    fi
done
stop_load
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
