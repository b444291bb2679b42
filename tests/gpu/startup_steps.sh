#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/gpu.c, runtime/gpu/mps.c step costs (GPU machine)
# The cost of each step of a node agent's start on a GPU machine (not run by
# CI): the NVML calls of gsrun's GPU discovery and one MPS daemon's start
# (tests/gpu/startup_steps.c), RUNS times (default 3).
#
#   tests/gpu/startup_steps.sh [RUNS]
set -u
runs=${1:-3}
case $runs in
'' | *[!0-9]* | 0)
    echo "startup_steps.sh: '$runs': RUNS is a count from 1 (the script builds its own program from tests/gpu/startup_steps.c; it takes no build directory)" >&2
    exit 2
    ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp /tmp/gs-startup-steps.XXXXXX)
trap 'rm -f "$bin"' EXIT
cc -O2 -Wall -o "$bin" "$here/startup_steps.c" -ldl || exit 1
control=$(command -v nvidia-cuda-mps-control) || { echo "$0: no nvidia-cuda-mps-control" >&2; exit 1; }
rc=0
for i in $(seq 1 "$runs"); do
    echo "# run $i"
    timeout 60 "$bin" "$control" || rc=1
done
exit $rc
