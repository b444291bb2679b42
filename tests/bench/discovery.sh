#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# How the shim finds a rank's place on its node, and what it costs: the same
# gsrun job (stand-in MPS daemon and NVML from the build, one GPU) with
# discovery forced through PMIx and through Open MPI's variables,
# alternated, medians of wall times.
#
#   tests/bench/discovery.sh [--build DIR] [--np N] [--pairs N]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$top/_build np=16 pairs=7
while [ $# -gt 0 ]; do
    case $1 in
    --build) B=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--np N] [--pairs N]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_btl_vader_single_copy_mechanism=none
export LD_LIBRARY_PATH=$B/tests/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1
prog=$B/tests/progs/rank_report
job() { GSRUN_DISCOVERY=$1 timeout 60 "$B/launcher/gsrun" -v --mps-control="$B/tests/fake/nvidia-cuda-mps-control" \
    -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -np "$np" "$prog"; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "# $(mpirun --version 2>&1 | head -1); PMIx $(pkg-config --modversion pmix 2>/dev/null || echo '?'); $np ranks"
for way in pmix env; do
    out=$(job $way 2>&1)
    rc=$?
    n=$(echo "$out" | grep -c "^rank=.* local=[0-9]*/$np mps=1 ")
    src=$(echo "$out" | sed -n 's/.*(local ranks from \([a-z]*\)).*/\1/p' | head -1)
    echo "# discovery=$way: status $rc, $n of $np ranks under MPS with their local rank (found by: $src)"
    [ "$n" -eq "$np" ] || echo "$out" | grep -v "^rank=" | head -5 | sed 's/^/#   /'
done
: >/tmp/gs_disc.$$
for _ in $(seq "$pairs"); do
    for way in pmix env; do
        t0=$(date +%s%N)
        job $way >/dev/null 2>&1 || echo "# discovery=$way: a job failed or hung (status $?)"
        echo "$way $(ms "$t0")" >>/tmp/gs_disc.$$
    done
done
p=$(awk '$1 == "pmix" { print $2 }' /tmp/gs_disc.$$ | median)
e=$(awk '$1 == "env" { print $2 }' /tmp/gs_disc.$$ | median)
rm -f /tmp/gs_disc.$$
echo "job wall time, median of $pairs: discovery through PMIx $p ms, through Open MPI's variables $e ms (PMIx - env: $((p - e)) ms)"
