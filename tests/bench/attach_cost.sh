#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# What watching the ranks' MPS state costs (issue 57, item 5): two gsrun
# builds side by side in one run, on the GPU machine.
#
#   tests/bench/attach_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]
#
# BASE_BUILD is a build of the tree before the watch (6764082), NEW_BUILD
# this one. Each round (default 7) runs, in an order rotated each round so
# that drift on the machine hits both alike:
#   start  gsrun -np 16 examples/hello_ranks (CPU only: the job's start and
#          end, what a rank's start pays)
#   run    gsrun -np 16 examples/mps_probe --iters 2000 (16 MPS clients; the
#          new build's agent follows their log lines)
# with each build, and prints each one's median wall time and the ratio
# new / base of the medians. No GPU: says so and exits 77.
set -u
base=${1:?usage: attach_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]}
new=${2:?usage: attach_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]}
rounds=${3:-7}
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "# SKIP no NVIDIA GPU here"
    exit 77
fi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GSRUN_MPS_LINGER=0 # every job starts and ends its own MPS (the default's cold start)
T=$(mktemp -d /tmp/gscost.XXXXXX)

one() { # one BUILD KIND: wall ms of one job
    local b=$1 t0 t1 rc
    t0=$(date +%s%N)
    if [ "$2" = start ]; then
        "$b/launcher/gsrun" -np 16 "$b/examples/hello_ranks" >/dev/null 2>"$T/err"
    else
        "$b/launcher/gsrun" -np 16 "$b/examples/mps_probe" --iters 2000 >/dev/null 2>"$T/err"
    fi
    rc=$?
    t1=$(date +%s%N)
    [ $rc = 0 ] || { echo "# $b $2 failed ($rc):"; sed 's/^/#   /' "$T/err"; }
    echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for kind in start run; do
    one "$new" $kind >/dev/null # warm both builds' files and the driver
    one "$base" $kind >/dev/null
done
for ((r = 0; r < rounds; r++)); do
    for kind in start run; do
        if [ $((r % 2)) = 0 ]; then order="base new"; else order="new base"; fi
        for w in $order; do
            b=$base
            [ $w = new ] && b=$new
            one "$b" $kind >>"$T/$w.$kind"
        done
    done
done
echo "# 16 ranks, $rounds rounds, $(nvidia-smi -L | grep -c '^GPU ') GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
for kind in start run; do
    mb=$(median <"$T/base.$kind")
    mn=$(median <"$T/new.$kind")
    echo "$kind: base median $mb ms ($(sort -n "$T/base.$kind" | tr '\n' ' ')), new median $mn ms ($(sort -n "$T/new.$kind" | tr '\n' ' ')), new/base $(awk -v a="$mn" -v b="$mb" 'BEGIN {printf "%.3f", a / b}')"
done
rm -rf "$T"
