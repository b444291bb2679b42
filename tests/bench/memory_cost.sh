#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/job/agent_memory.c (its cost: a memory look every second while ranks run), on the GPU
# What looking at each rank's GPU memory costs a job (issue 68): two gsrun
# builds side by side in one run, on the GPU, each with its own warm shared
# servers (a TMPDIR of its own); each round runs the same job with each
# build, in an order rotated each round:
#   - a warm short job: 2 ranks of examples/mps_probe;
#   - a 64-rank job: mps_probe with 2000 kernels a rank and 3 s of sleep,
#     so that the new build looks at memory a few times while it runs.
#
#   tests/bench/memory_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]
#
# Prints each build's median wall time of each job and new / base.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
base=${1:?usage: memory_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]}
new=${2:?usage: memory_cost.sh BASE_BUILD NEW_BUILD [ROUNDS]}
rounds=${3:-10}
. "$top/tests/gpu/procs.sh"
gpu_ready "$top" "$new"
export OMPI_MCA_rmaps_base_oversubscribe=1 # 64 ranks on 16 cores
T=$(mktemp -d /tmp/gsmemcost.XXXXXX)
mkdir -p "$T/base" "$T/new"
one() { # one NAME BUILD NP ARGS...: wall ms of one job
    local name=$1 b=$2 np=$3 t0 t1
    shift 3
    t0=$(date +%s%N)
    TMPDIR=$T/$name "$b/launcher/gsrun" --mps-linger=60 -np "$np" "$new/examples/mps_probe" \
        --expect-mps "$@" >/dev/null 2>"$T/$name.err" ||
        echo "# $name failed: $(tail -1 "$T/$name.err")" >&2
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
pair() { # pair LABEL ROUNDS NP ARGS...
    local label=$1 n=$2 np=$3 r b m
    shift 3
    : >"$T/times"
    for r in $(seq "$n"); do
        if [ $((r % 2)) = 0 ]; then
            echo "base $(one base "$base" "$np" "$@")"; echo "new $(one new "$new" "$np" "$@")"
        else
            echo "new $(one new "$new" "$np" "$@")"; echo "base $(one base "$base" "$np" "$@")"
        fi
    done >>"$T/times"
    b=$(awk '$1 == "base" {print $2}' "$T/times" | median)
    m=$(awk '$1 == "new" {print $2}' "$T/times" | median)
    echo "$label, $n rounds: base median $b ms, new median $m ms, new/base $(awk -v n="$m" -v b="$b" 'BEGIN {printf "%.3f", n / b}')"
    echo "  base: $(awk '$1 == "base" {printf "%s ", $2}' "$T/times")"
    echo "  new:  $(awk '$1 == "new" {printf "%s ", $2}' "$T/times")"
}
one base "$base" 2 >/dev/null # each warm from here on
one new "$new" 2 >/dev/null
pair "warm 2-rank job" "$rounds" 2
pair "64-rank job (2000 kernels, 3 s held)" "$(((rounds + 1) / 2))" 64 --iters 2000 --sleep 3000
for d in base new; do TMPDIR=$T/$d "$new/launcher/gsrun" stop >/dev/null 2>&1; done
for _ in $(seq 100); do [ -z "$(live_procs 'nvidia-cuda-mps*')" ] && break; sleep 0.1; done
rm -rf "$T"
