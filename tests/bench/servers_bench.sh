#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Past one MPS server's client limit (GPU machine, not CI): plain mpirun,
# gsrun and the same servers started by hand, side by side, in one run.
#
#   tests/bench/servers_bench.sh --build DIR [--src DIR] [--copies "60 96"] [--coupled 64]
#                                [--reps N] [--configs "..."] [--csv FILE]
#
# Independent copies: NVIDIA's single-GPU Jacobi (multi-gpu-programming-
# models, single_gpu/jacobi.cu from --src, built here with nvcc for the
# GPU's architecture), 1024 x 1024, 1000 iterations, N copies under one
# mpirun; the result is the slowest copy's solve time. Coupled: the
# project's examples/jacobi (one 4096 x 4096 grid split over the ranks,
# halos through MPI every sweep) with --coupled ranks; its tts. Configs:
#   plain      mpirun, no MPS (the GPU time-sliced)
#   gsrun      gsrun --mps=on, the default share (200 / the ranks of the rank's server)
#   gpushare   gsrun --mps=on --mps-percentage=200/N (200 / the ranks of the whole GPU)
#   off        gsrun --mps=on --mps-percentage=off (100 %)
#   hand       ceil(N / 48) control daemons started by hand (nvidia-cuda-mps-control
#              -d, private dirs, server started), ranks dealt round-robin over them by
#              their local rank, percentage unset (100 %); quit afterwards
# Each row: program,np,config,rep,wall_s,result_s. The summary gives each
# configuration's median and its ratio to plain and to hand.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/gpu/procs.sh"
pin_one_gpu
build=$top/_build src=$top/.thirdparty/mgpm copies="60 96" coupled=64 reps=1
configs="plain gsrun gpushare off hand" csv=""
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    --copies) copies=$2; shift 2 ;;
    --coupled) coupled=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    *) echo "usage: see the head of $0" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
control=${GSRUN_BENCH_CONTROL:-nvidia-cuda-mps-control}
. "$top/tests/bench/mps_by_hand.sh"
work=$(mktemp -d /tmp/gsbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
csv=${csv:-$work/servers.csv}
single=$work/jacobi_single
if [ -n "$copies" ]; then
    [ -f "$src/single_gpu/jacobi.cu" ] || { echo "no $src/single_gpu/jacobi.cu (--src)" >&2; exit 2; }
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
    nvcc -O3 -std=c++17 -arch=sm_"$cap" -DHAVE_CUB -Xcompiler -fopenmp -lgomp \
        -o "$single" "$src/single_gpu/jacobi.cu" || exit 1
fi

run() { # run PROGRAM NP CONFIG: prints "wall_s result_s"
    local prog=$1 np=$2 config=$3 s=$(((np + 47) / 48)) out=$work/out t0 t1 i pct
    local args=(-nx 1024 -ny 1024 -niter 1000 -csv) exe=$single
    if [ "$prog" = coupled ]; then
        args=(--nx 4096 --ny 4096 --iters 1000)
        exe=$build/examples/jacobi
    fi
    t0=$(date +%s.%N)
    case $config in
    plain) mpirun -np "$np" --oversubscribe "$exe" "${args[@]}" >"$out" 2>&1 ;;
    gsrun) "$build/launcher/gsrun" --mps=on -np "$np" --oversubscribe "$exe" "${args[@]}" >"$out" 2>&1 ;;
    gpushare)
        pct=$(awk -v n="$np" 'BEGIN { p = 200 / n; printf "%.4f", (p > 100 ? 100 : p) }')
        "$build/launcher/gsrun" --mps=on --mps-percentage="$pct" -np "$np" --oversubscribe \
            "$exe" "${args[@]}" >"$out" 2>&1
        ;;
    off) "$build/launcher/gsrun" --mps=on --mps-percentage=off -np "$np" --oversubscribe \
        "$exe" "${args[@]}" >"$out" 2>&1 ;;
    hand)
        for i in $(seq 0 $((s - 1))); do
            mps_hand_up "$work/mps$i"
            echo "start_server -uid $(id -u)" | CUDA_MPS_PIPE_DIRECTORY=$work/mps$i/p "$control" >/dev/null
        done
        mpirun -np "$np" --oversubscribe sh -c 'export CUDA_MPS_PIPE_DIRECTORY='"$work"'/mps$((OMPI_COMM_WORLD_LOCAL_RANK % '"$s"'))/p
            CUDA_MPS_LOG_DIRECTORY='"$work"'/mps$((OMPI_COMM_WORLD_LOCAL_RANK % '"$s"'))/l; exec "$0" "$@"' \
            "$exe" "${args[@]}" >"$out" 2>&1
        for i in $(seq 0 $((s - 1))); do mps_hand_down "$work/mps$i"; done
        ;;
    esac
    local rc=$?
    t1=$(date +%s.%N)
    local res
    if [ "$prog" = coupled ]; then
        res=$(sed -n 's/^jacobi: .* tts=\([0-9.]*\) .*/\1/p' "$out" | head -1)
    else
        res=$(awk -F', ' '/^single_gpu, / { n++; if ($6 > m) m = $6 } END { if (n == '"$np"') print m }' "$out")
    fi
    [ $rc -eq 0 ] && [ -n "$res" ] || { res=NA; grep -m3 -i "error\|fail" "$out" | sed 's/^/# /' >&2; }
    awk -v a="$t0" -v b="$t1" -v r="$res" 'BEGIN { printf "%.2f %s\n", b - a, r }'
}

echo "program,np,config,rep,wall_s,result_s" >"$csv"
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | sed 's/^/# GPU: /'
for rep in $(seq 1 "$reps"); do
    for job in $(for n in $copies; do echo "copies:$n"; done) ${coupled:+coupled:$coupled}; do
        prog=${job%%:*} np=${job#*:}
        # The order of the configurations turns each round.
        set -- $configs
        for _ in $(seq 2 "$rep"); do set -- "${@:2}" "$1"; done
        for config in "$@"; do
            read -r wall res < <(run "$prog" "$np" "$config")
            echo "$prog,$np,$config,$rep,$wall,$res" | tee -a "$csv"
        done
    done
done
echo "# summary (median result_s; ratio to plain and to hand):"
awk -F, 'NR > 1 && $6 != "NA" { k = $1 "," $2; v[k "," $3] = v[k "," $3] " " $6; keys[k] = 1; cfg[$3] = 1 }
function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
END { for (k in keys) { p = (k ",plain" in v) ? med(v[k ",plain"]) : 0; h = (k ",hand" in v) ? med(v[k ",hand"]) : 0
        for (c in cfg) if ((k "," c) in v) { m = med(v[k "," c])
            printf "%s,%s: %.3f s%s%s\n", k, c, m, p ? sprintf(", plain/this %.1fx", p / m) : "", h ? sprintf(", this/hand %.2fx", m / h) : "" } } }' "$csv" | sort
[ -n "${OUT:-}" ] && cp "$csv" "$OUT/" 2>/dev/null
exit 0
