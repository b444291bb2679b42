#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: the MPS client limit of one server (measurement, GPU machine)
# Measures how many MPS clients one GPU accepts (not run by CI).
#
#   tests/gpu/client_limit.sh BUILD_DIR [N ...]   (default N: 40 48 56 60 64)
#
# Starts one MPS control daemon by hand in a private directory, runs N ranks
# of mps_probe with plain mpirun as its clients (each creates a context and
# runs one kernel), reports for each N how many ranks succeeded, and quits
# the daemon. gsrun's pre-flight limit (GS_MPS_MAX_CLIENTS) must not exceed
# the largest N that fully succeeds.
set -u
. "$(dirname "$0")/procs.sh"
pin_one_gpu
build=$1; shift
sizes=${*:-40 48 56 60 64}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/gslimit.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control; sleep 1; rm -rf "$dir"' EXIT
for n in $sizes; do
    out=$(mpirun --oversubscribe -np "$n" -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY \
        "$build/examples/mps_probe" --expect-mps --iters 1 --n 1024 2>&1)
    rc=$?
    good=$(echo "$out" | grep -c "mps=1 .*result=ok")
    err=$(echo "$out" | grep -m1 -i "error\|failed" | cut -c1-160)
    echo "clients=$n exit=$rc ranks_ok=$good ${err:+first_error=\"$err\"}"
done
grep -i -m5 "error\|limit\|fail" "$CUDA_MPS_LOG_DIRECTORY/control.log" "$CUDA_MPS_LOG_DIRECTORY/server.log" 2>/dev/null | cut -c1-200
