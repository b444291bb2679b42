#!/bin/bash
# Launch overhead of gsrun, measured side by side with plain mpirun.
#
#   tests/bench/launch_overhead.sh [--build DIR] [--np N] [--pairs K]
#
# Runs a CPU-only MPI program (examples/hello_ranks, N ranks, default 16)
# K times (default 15) in each of three ways, interleaved so that drift on
# the machine hits all three alike:
#   plain   mpirun -np N hello_ranks
#   off     gsrun --mps=off -np N hello_ranks
#   on      gsrun --mps=on  -np N hello_ranks   (fake MPS daemon and NVML)
# and prints the median wall time of each and the median of the paired
# differences against plain mpirun. The target for `on` is at most 20 ms.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/_build np=16 pairs=15
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--np N] [--pairs K]" >&2; exit 2 ;;
    esac
done
prog=$build/examples/hello_ranks
gsrun=$build/launcher/gsrun
for f in "$prog" "$gsrun" "$build/tests/fake/nvidia-cuda-mps-control" "$build/tests/fake/libnvidia-ml.so.1"; do
    [ -e "$f" ] || { echo "$0: $f is missing; build with 'make check' first" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
res=$(mktemp)
trap 'rm -f "$res"' EXIT

ms() { # ms label command...: runs it, appends "label ms" to $res
    local label=$1 t0 t1
    shift
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "$0: $label run failed: $*" >&2; exit 1; }
    t1=$(date +%s%N)
    echo "$label $(((t1 - t0) / 1000)) $i" >>"$res"
}
for i in $(seq 1 "$pairs"); do
    # Rotate the order each round.
    case $((i % 3)) in
    0) order="plain off on" ;; 1) order="off on plain" ;; *) order="on plain off" ;;
    esac
    for how in $order; do
        case $how in
        plain) ms plain mpirun -np "$np" "$prog" ;;
        off) ms off "$gsrun" --mps=off -np "$np" "$prog" ;;
        on) ms on env LD_LIBRARY_PATH="$build/tests/fake" "$gsrun" --mps=on \
            --mps-control="$build/tests/fake/nvidia-cuda-mps-control" -np "$np" "$prog" ;;
        esac
    done
done
echo "launch overhead: $np ranks, $pairs paired runs, $(nproc) cores, $(mpirun --version 2>&1 | head -1)"
awk '
function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ t[$1, $3] = $2 / 1000.0; runs[$3] = 1 }
END {
    n = 0
    for (r in runs) { n++; p[n] = t["plain", r]; o[n] = t["off", r]; g[n] = t["on", r]; d1[n] = o[n] - p[n]; d2[n] = g[n] - p[n] }
    printf "median wall time: plain mpirun %.1f ms, gsrun --mps=off %.1f ms, gsrun --mps=on (fake MPS) %.1f ms\n", median(p, n), median(o, n), median(g, n)
    mo = median(d1, n); mg = median(d2, n)
    printf "median overhead (paired): --mps=off %+.1f ms, --mps=on %+.1f ms (target: at most 20 ms)\n", mo, mg
    printf "ratio to plain mpirun: --mps=off %.3f, --mps=on %.3f\n", median(o, n) / median(p, n), median(g, n) / median(p, n)
}' "$res"
