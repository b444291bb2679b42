#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: what ranks sharing a GPU meet in CUDA IPC and NCCL (measurement, GPU machine)
# What two ranks on one GPU meet in the libraries they use (not run by CI):
#
#   tests/gpu/share_libs.sh BUILD_DIR
#
# CUDA IPC (tests/gpu/ipc_pair.c: a handle passed over MPI, each side reads
# the other's bytes) without MPS, as two clients of one MPS server, and as
# clients of two servers of the same GPU (--mps-clients-per-server=1); NCCL
# (tests/gpu/nccl_pair.c, if nccl.h is found) without and with MPS. Prints one
# line per case: "case=... exit=N" and what the programs said.
set -u
. "$(dirname "$0")/procs.sh"
pin_one_gpu
build=$(cd "$1" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d /tmp/gsshare.XXXXXX)
trap 'rm -rf "$work"' EXIT
G=$build/launcher/gsrun
mpicc -O2 -o "$work/ipc_pair" "$here/ipc_pair.c" -I"$cuda/include" -L"$cuda/lib64" -lcudart \
    -Wl,-rpath,"$cuda/lib64" || exit 1

show() { # show CASE CMD...: runs it, prints its verdict lines
    local name=$1
    shift
    "$@" >"$work/out" 2>&1
    local rc=$?
    echo "case=$name exit=$rc"
    grep -E "ipc=|nccl=|Duplicate|WARN|error" "$work/out" | sort -u | head -6 | sed 's/^/  /'
}
show ipc-no-mps mpirun -np 2 "$work/ipc_pair"
show ipc-one-server "$G" --mps=on -np 2 "$work/ipc_pair"
show ipc-two-servers "$G" --mps=on --mps-clients-per-server=1 -np 2 "$work/ipc_pair"

nccl_inc=""
for d in "$cuda/include" /usr/include /usr/local/include; do
    [ -f "$d/nccl.h" ] && nccl_inc=$d && break
done
if [ -z "$nccl_inc" ]; then
    echo "case=nccl skipped: no nccl.h in $cuda/include, /usr/include or /usr/local/include"
    exit 0
fi
mpicc -O2 -o "$work/nccl_pair" "$here/nccl_pair.c" -I"$cuda/include" -I"$nccl_inc" \
    -L"$cuda/lib64" -lcudart -lnccl -Wl,-rpath,"$cuda/lib64" || exit 1
export NCCL_DEBUG=WARN
show nccl-no-mps mpirun -np 2 -x NCCL_DEBUG "$work/nccl_pair"
show nccl-one-server "$G" --mps=on -np 2 -x NCCL_DEBUG "$work/nccl_pair"
exit 0
