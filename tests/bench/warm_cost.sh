#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/service/agent_share_wedge.c, runtime/job/agent_stuck.c (their cost on the healthy path), on the GPU
# What probing MPS costs a healthy warm job (issue 66): two gsrun builds
# side by side in one run, on the GPU. Each keeps its own warm shared
# servers (a TMPDIR of its own); each round runs one short 2-rank job
# (examples/mps_probe) with each build, in an order rotated each round.
#
#   tests/bench/warm_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]
#
# Prints each build's median wall time of its warm jobs and new / base.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
base=${1:?usage: warm_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]}
new=${2:?usage: warm_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]}
rounds=${3:-15}
. "$top/tests/gpu/procs.sh"
gpu_ready "$top" "$new"
T=$(mktemp -d /tmp/gswarm.XXXXXX)
mkdir -p "$T/base" "$T/new"
one() { # one NAME BUILD: wall ms of one warm job
    local t0 t1
    t0=$(date +%s%N)
    TMPDIR=$T/$1 "$2/launcher/gsrun" --mps-linger=30 -np 2 "$new/examples/mps_probe" --expect-mps \
        >/dev/null 2>"$T/$1.err" || echo "# $1 failed: $(tail -1 "$T/$1.err")" >&2
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
one base "$base" >/dev/null # each warm from here on
one new "$new" >/dev/null
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 0 ]; then
        echo "base $(one base "$base")"; echo "new $(one new "$new")"
    else
        echo "new $(one new "$new")"; echo "base $(one base "$base")"
    fi
done >"$T/times"
b=$(awk '$1 == "base" {print $2}' "$T/times" | median)
n=$(awk '$1 == "new" {print $2}' "$T/times" | median)
echo "warm 2-rank job, $rounds rounds: base median $b ms, new median $n ms, new/base $(awk -v n="$n" -v b="$b" 'BEGIN {printf "%.3f", n / b}')"
echo "base: $(tr '\n' ' ' <"$T/times" | grep -o 'base [0-9]*' | awk '{printf "%s ", $2}')"
echo "new:  $(tr '\n' ' ' <"$T/times" | grep -o 'new [0-9]*' | awk '{printf "%s ", $2}')"
for d in base new; do TMPDIR=$T/$d "$new/launcher/gsrun" stop >/dev/null 2>&1; done
for _ in $(seq 100); do [ -z "$(live_procs 'nvidia-cuda-mps*')" ] && break; sleep 0.1; done
rm -rf "$T"
