#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: the bound on MPS's answers (GS_MPS_ANSWER_MS, runtime/gpu/mps_probe.h), on the GPU
# How long a healthy MPS control daemon takes to answer get_server_list (the
# probe gsrun sends before a warm server is handed out, and while ranks
# wait on one), on an NVIDIA GPU machine:
#
#   tests/bench/mps_answer.sh [BUILD_DIR] [CLIENTS]
#
# A daemon started by hand on GPU 0 (its own pipe dir); the command is
# timed idle (30 times), then every 20 ms while CLIENTS (default 48, one
# full server) MPI ranks of examples/mps_probe start their contexts on it
# at once, and while a second daemon's new server sets up its context
# (start_server). Prints min / median / max ms of each and the slowest
# against the bound. Not run by CI.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
n=${2:-48}
. "$top/tests/gpu/procs.sh"
gpu_ready "$top" "$build"
export OMPI_MCA_rmaps_base_oversubscribe=1
CTL=$(command -v nvidia-cuda-mps-control)
T=$(mktemp -d /tmp/gsanswer.XXXXXX)
mkdir -p "$T/pipe" "$T/log"
export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=$T/pipe CUDA_MPS_LOG_DIRECTORY=$T/log
bound=$(sed -n 's/^#define GS_MPS_ANSWER_MS \([0-9]*\).*/\1/p' "$top/runtime/gpu/mps_probe.h")

ask() { # ms of one get_server_list
    local t0 t1
    t0=$(date +%s%N)
    echo get_server_list | timeout 10 "$CTL" >/dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}
stats() { sort -n | awk '{v[NR] = $1} END {printf "min %d, median %d, max %d ms (%d asks)", v[1], v[int((NR + 1) / 2)], v[NR], NR}'; }

"$CTL" -d
for _ in $(seq 50); do [ -S "$T/pipe/control" ] && break; sleep 0.05; done
echo "start_server -uid $(id -u)" | "$CTL" >/dev/null
sleep 1
for _ in $(seq 30); do ask; done >"$T/idle"
echo "idle: $(stats <"$T/idle")"

mpirun -np "$n" "$build/examples/mps_probe" --sleep 3000 >"$T/job.out" 2>&1 &
job=$!
while kill -0 $job 2>/dev/null; do ask; sleep 0.02; done >"$T/busy"
wait $job
echo "while $n clients start and run: $(stats <"$T/busy") (job status $?)"
echo quit | "$CTL"
for _ in $(seq 100); do [ -z "$(live_procs 'nvidia-cuda-mps*')" ] && break; sleep 0.1; done

# A new server's setup: the daemon answers nothing meanwhile.
rm -rf "$T/pipe"/* && "$CTL" -d
for _ in $(seq 50); do [ -S "$T/pipe/control" ] && break; sleep 0.05; done
(echo "start_server -uid $(id -u)" | "$CTL" >/dev/null) &
for _ in $(seq 15); do ask; sleep 0.01; done >"$T/setup"
wait
echo "while its new server sets up: $(stats <"$T/setup")"
echo quit | "$CTL"
for _ in $(seq 100); do [ -z "$(live_procs 'nvidia-cuda-mps*')" ] && break; sleep 0.1; done
slowest=$(cat "$T/idle" "$T/busy" "$T/setup" | sort -n | tail -1)
echo "slowest answer ${slowest} ms; gsrun's bound ${bound} ms ($(awk -v s="$slowest" -v b="$bound" 'BEGIN {printf "%.1f", b / (s > 0 ? s : 1)}')x)"
rm -rf "$T"
