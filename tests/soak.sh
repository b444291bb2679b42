#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Soak: many gsrun jobs back to back, then count what leaked.
#
#   tests/soak.sh [--build DIR] [--jobs N]    (default 200 jobs, 8 ranks each)
#
# Uses the fake MPS daemon and NVML. Every 5th job fails on purpose (a rank
# exits 3), every 7th has a rank SIGKILLed. Afterwards counts leaked
# processes, run directories, files added in /dev/shm and open descriptors of
# this script: all must be zero. Ends with "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
B=$top/_build jobs=200
while [ $# -gt 0 ]; do
    case $1 in
    --build) B=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--jobs N]" >&2; exit 2 ;;
    esac
done
GS_TOP_BUILDDIR=$B GS_TOP_SRCDIR=$top
. "$top/tests/integration/lib.sh"
# What jobs leave in /dev/shm is counted.
unset OMPI_MCA_btl_vader_backing_directory OMPI_MCA_btl_sm_backing_directory
# This shell's open descriptors, listed by a glob in the shell itself into
# $fds (count, then the numbers): anything in a command substitution races
# the shell's closing of the pipe's write end after the fork, and now and then
# counts one more.
fds_now() { local f=(/proc/$$/fd/*); fds="${#f[@]} (${f[*]##*/})"; }
shm_before=$(ls /dev/shm | wc -l)
fds_now
fds_before=$fds
bad_status=0
t0=$(date +%s)
for i in $(seq 1 "$jobs"); do
    args="" want=0
    if [ $((i % 5)) -eq 0 ]; then args="--exit 2 3" want=3
    elif [ $((i % 7)) -eq 0 ]; then args="--kill 1" want=nonzero
    fi
    # shellcheck disable=SC2086
    gsrun_fake 1 -np 8 "$PROG" $args >"$OUT" 2>"$ERR"
    rc=$?
    if { [ "$want" = nonzero ] && [ $rc -eq 0 ]; } || { [ "$want" != nonzero ] && [ $rc -ne "$want" ]; }; then
        bad_status=$((bad_status + 1))
        echo "# job $i: status $rc, expected $want"
    fi
done
echo "# $jobs jobs in $(($(date +%s) - t0)) s"
for _ in $(seq 50); do [ -z "$(leftover_procs)" ] && break; sleep 0.1; done
check "$jobs jobs: every exit status as expected ($bad_status wrong)" [ $bad_status -eq 0 ]
left=$(leftover_procs | tr '\n' ' ')
check "$jobs jobs: no leaked process ($(wc -w <<<"$left"))" [ -z "$left" ] || echo "# left: $left"
left=$(run_files | tr '\n' ' ')
check "$jobs jobs: no run directory left ($(wc -w <<<"$left"))" [ -z "$left" ] || echo "# left: $left"
shm_after=$(ls /dev/shm | wc -l)
check "$jobs jobs: no file added in /dev/shm ($shm_before before, $shm_after after)" [ "$shm_after" -le "$shm_before" ]
fds_now
fds_after=$fds
check "$jobs jobs: no descriptor leaked by the test (${fds_before%% *} before, ${fds_after%% *} after)" \
    [ "${fds_after%% *}" -le "${fds_before%% *}" ] || echo "# descriptors before: $fds_before; after: $fds_after"
n=$T_N f=$T_FAIL
rm -rf "$TEST_TMP"
echo "1..$n"
echo "$((n - f)) passed, $f failed"
[ "$f" -eq 0 ]
