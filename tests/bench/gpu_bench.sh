#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# GPU benchmark: gsrun against plain mpirun and hand-run MPS, side by side.
#
#   tests/bench/gpu_bench.sh --build DIR [--program small_kernels|jacobi] [--np "1 2 4 ..."]
#                            [--reps N] [--configs "..."] [--csv FILE] [--timeout S]
#   tests/bench/gpu_bench.sh --summarize FILE.csv
#
# For each program, np and configuration it runs the job --reps times
# (default 3), rotating the order of the configurations each round, and
# appends one CSV row per run. Configurations:
#   plain        mpirun, no MPS (the GPU time-sliced)
#   hand         MPS started by hand as NVIDIA documents it: nvidia-cuda-mps-control -d
#                (private pipe/log dirs), mpirun, echo quit | nvidia-cuda-mps-control,
#                wait for the daemon to go; percentage unset
#   gsrun        gsrun --mps=on (default policy, 200/n)
#   gsrun-100    gsrun --mps=on --mps-percentage=off (100 %)
#   gsrun-equal  gsrun --mps=on --mps-percentage=<100/n> (the equal split)
#   gsrun-floor  gsrun --mps=on --mps-percentage=<max(25, 200/n)> (200/n with a floor)
#   gsrun-pP     gsrun --mps=on --mps-percentage=P (a fixed share, e.g. gsrun-p37.5)
#   pre          mpirun on an MPS daemon started (and its server) before the timer
#                and quit after it: the physical limit of what gsrun can reach
# Columns: program,np,config,rep,wall_s,tts_s,first_kernel_s,init_s,gpu_mem_mib,ok,result
#   wall_s: launch to exit of the whole command (hand: daemon start to daemon gone)
#   tts_s: time to solution (jacobi) or the timed kernel loop (small_kernels), slowest rank
#   first_kernel_s: from launch until every rank had finished its first kernel
#   gpu_mem_mib: peak GPU memory in use during the run, above the idle level (nvidia-smi)
# --summarize prints medians, spread, speedups and ratios from a CSV.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/gpu/procs.sh"
pin_one_gpu

summarize() {
    awk -F, '
    function med(key,   n, i, j, t, a) {
        n = split(vals[key], a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        lo[key] = a[1]; hi[key] = a[n]
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR == 1 { next }
    $10 != 1 { bad[$1 "," $2 "," $3]++; next }
    {
        k = $1 "," $2 "," $3
        vals[k ",tts"] = vals[k ",tts"] " " $6; vals[k ",wall"] = vals[k ",wall"] " " $5
        vals[k ",first"] = vals[k ",first"] " " $7; vals[k ",mem"] = vals[k ",mem"] " " $9
        seen[k] = 1; progs[$1] = 1; nps[$1 "," $2] = $2; cfgs[$3] = 1
    }
    END {
        no = split("plain hand pre gsrun gsrun-100 gsrun-equal gsrun-floor", order, " ")
        for (c in cfgs) if (c ~ /^gsrun-p/) order[++no] = c # fixed shares, after the named ones
        for (p in progs) {
            printf "\n%s (medians of the runs; spread = (max-min)/median of tts)\n", p
            printf "%4s %-12s %9s %7s %9s %8s %8s %9s %9s %8s\n", "np", "config", "tts_s", "spread", "speedup", "vs_hand", "vs_ideal", "first_s", "wall_s", "mem_MiB"
            ideal = ""
            for (n = 1; n <= 64; n++) {
                if (!((p "," n) in nps)) continue
                base = med(p "," n ",plain,tts"); hand = ((p "," n ",hand") in seen) ? med(p "," n ",hand,tts") : ""
                if (ideal == "" && ((p ",1,plain") in seen)) ideal = med(p ",1,plain,tts")
                for (c = 1; c <= no; c++) {
                    k = p "," n "," order[c]
                    if (!(k in seen)) { if (k in bad) printf "%4d %-12s failed in %d run(s)\n", n, order[c], bad[k]; continue }
                    t = med(k ",tts"); sp = (hi[k ",tts"] - lo[k ",tts"]) / t * 100
                    printf "%4d %-12s %9.4f %6.1f%% %8.2fx %8s %8.2f %9.3f %9.3f %8d\n", n, order[c], t, sp,
                        base / t, hand != "" ? sprintf("%.3f", hand / t) : "-", ideal / t,
                        med(k ",first"), med(k ",wall"), med(k ",mem")
                    if (k in bad) printf "     (%s also failed in %d run(s))\n", order[c], bad[k]
                }
            }
        }
    }' "$1"
}

build="" program=small_kernels nps="1 2 4 8 16 32 48" reps=3 configs="plain hand gsrun gsrun-100 gsrun-equal"
csv="" timeout_s=180
while [ $# -gt 0 ]; do
    case $1 in
    --summarize) summarize "$2"; exit $? ;;
    --build) build=$2; shift 2 ;;
    --program) program=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    *) echo "usage: see the head of $0" >&2; exit 2 ;;
    esac
done
[ -n "$build" ] || { echo "$0: --build DIR is required" >&2; exit 2; }
prog=$build/examples/$program
gsrun=$build/launcher/gsrun
nvidia-smi -L >/dev/null 2>&1 || { echo "$0: no NVIDIA GPU here" >&2; exit 77; }
[ -x "$prog" ] || { echo "$0: $prog is not built (needs nvcc)" >&2; exit 1; }
csv=${csv:-$PWD/bench.csv}
[ -s "$csv" ] || echo "program,np,config,rep,wall_s,tts_s,first_kernel_s,init_s,gpu_mem_mib,ok,result" >"$csv"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
control=$(command -v nvidia-cuda-mps-control)
case $program in
jacobi) args=${JACOBI_ARGS:---nx 2048 --ny 2048 --iters 300} ;;
*) args=${SMALL_ARGS:-} ;;
esac
now() { date +%s.%N; }
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
idle_mem=$(mem_used)

. "$top/tests/bench/mps_by_hand.sh"

run_one() { # run_one config np rep
    local cfg=$1 n=$2 rep=$3 out t0 t1 rc pct d pid mon
    out=$(mktemp)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$out.mem" 2>/dev/null &
    mon=$!
    if [ "$cfg" = pre ]; then
        d=$(mktemp -d /tmp/gsb.XXXXXX)
        mps_hand_up "$d"
        echo "start_server -uid $(id -u)" | CUDA_MPS_PIPE_DIRECTORY=$d/p "$control" >/dev/null
        sleep 1 # the server's own start-up is not what this configuration measures
    fi
    t0=$(now)
    case $cfg in
    pre)
        CUDA_MPS_PIPE_DIRECTORY=$d/p CUDA_MPS_LOG_DIRECTORY=$d/l timeout "$timeout_s" \
            mpirun -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -np "$n" "$prog" $args >"$out" 2>&1
        rc=$?
        ;;
    plain) timeout "$timeout_s" mpirun -np "$n" "$prog" $args >"$out" 2>&1; rc=$? ;;
    hand)
        d=$(mktemp -d /tmp/gsb.XXXXXX)
        mkdir "$d/p" "$d/l"
        CUDA_MPS_PIPE_DIRECTORY=$d/p CUDA_MPS_LOG_DIRECTORY=$d/l "$control" -d
        CUDA_MPS_PIPE_DIRECTORY=$d/p CUDA_MPS_LOG_DIRECTORY=$d/l timeout "$timeout_s" \
            mpirun -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -np "$n" "$prog" $args >"$out" 2>&1
        rc=$?
        mps_hand_down "$d"
        ;;
    gsrun) timeout "$timeout_s" "$gsrun" --mps=on -np "$n" "$prog" $args >"$out" 2>&1; rc=$? ;;
    gsrun-100) timeout "$timeout_s" "$gsrun" --mps=on --mps-percentage=off -np "$n" "$prog" $args >"$out" 2>&1; rc=$? ;;
    gsrun-floor)
        pct=$(awk -v n="$n" 'BEGIN { p = 200 / n; if (p < 25) p = 25; if (p > 100) p = 100; printf "%.4f", p }')
        timeout "$timeout_s" "$gsrun" --mps=on --mps-percentage="$pct" -np "$n" "$prog" $args >"$out" 2>&1
        rc=$?
        ;;
    gsrun-p*)
        timeout "$timeout_s" "$gsrun" --mps=on --mps-percentage="${cfg#gsrun-p}" -np "$n" "$prog" $args >"$out" 2>&1
        rc=$?
        ;;
    gsrun-equal)
        pct=$(awk -v n="$n" 'BEGIN { p = 100 / n; if (p < 1) p = 1; printf "%.4f", p }')
        timeout "$timeout_s" "$gsrun" --mps=on --mps-percentage="$pct" -np "$n" "$prog" $args >"$out" 2>&1
        rc=$?
        ;;
    esac
    t1=$(now)
    [ "$cfg" = pre ] && mps_hand_down "$d"
    kill "$mon" 2>/dev/null
    wait "$mon" 2>/dev/null
    local peak line tts init first ok result
    peak=$(sort -n "$out.mem" | tail -1)
    line=$(grep -m1 "^$program: " "$out")
    tts=$(echo "$line" | sed -n 's/.* \(tts\|loop\)=\([0-9.]*\).*/\2/p')
    init=$(echo "$line" | sed -n 's/.* init=\([0-9.]*\).*/\1/p')
    first=$(echo "$line" | sed -n 's/.* first_kernel=\([0-9.]*\).*/\1/p')
    result=$(echo "$line" | sed -n 's/.* \(checksum\|ok\)=\([^ ]*\).*/\2/p')
    ok=0
    [ $rc -eq 0 ] && [ -n "$tts" ] && ok=1
    [ "$program" = small_kernels ] && [ "$result" != 1 ] && ok=0
    [ $ok = 1 ] || { echo "# $program np=$n $cfg rep=$rep failed (status $rc):"; tail -5 "$out" | sed 's/^/#   /'; }
    echo "$program,$n,$cfg,$rep,$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}'),${tts:-0},$(awk -v a="$t0" -v f="${first:-0}" 'BEGIN { printf "%.4f", (f > 0 ? f - a : 0) }'),${init:-0},$(( ${peak:-0} - idle_mem )),$ok,${result:-}" >>"$csv"
    rm -f "$out" "$out.mem"
}

echo "# gpu_bench: $program, np: $nps, reps: $reps, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%FT%TZ)"
for n in $nps; do
    for rep in $(seq 1 "$reps"); do
        # Rotate the configurations each round so drift hits all alike.
        read -r -a cfgs <<<"$configs"
        for ((j = 0; j < ${#cfgs[@]}; j++)); do
            run_one "${cfgs[$(((j + rep - 1) % ${#cfgs[@]}))]}" "$n" "$rep"
        done
    done
    echo "# np=$n done ($(date -u +%T))"
done
