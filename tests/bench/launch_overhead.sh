#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Launch and teardown cost of gsrun, measured side by side with plain mpirun.
#
#   tests/bench/launch_overhead.sh [--build DIR] [--np N] [--pairs K] [--real]
#                                  [--program PATH] [--configs "plain off on ..."]
#                                  [--stamps] [--timelines] [--raw FILE]
#
# Runs an MPI program (default examples/hello_ranks, CPU only; N ranks,
# default 16) K times (default 15) in each configuration, rotating the order
# each round so that drift on the machine hits all alike:
#   plain   mpirun -np N prog
#   off     gsrun --mps=off -np N prog
#   on      gsrun --mps=on -np N prog (fake MPS daemon and NVML; with --real
#           the machine's NVML and nvidia-cuda-mps-control)
#   exec    mpirun -np N gsrun exec --mps=on -- prog: the rank prefix, no wrapper
#   component  plain mpirun -np N prog with the Open MPI 4 component
#           (mca_rtc_gsrun, rtc_gsrun_mps=on; the build's, by its path)
#   hand    (--real) MPS by hand around mpirun: nvidia-cuda-mps-control -d,
#           mpirun, echo quit, wait until the daemon is gone
#   pre     (--real) mpirun on an MPS daemon started before the timer (the
#           physical limit: MPS already up when the first rank starts)
# Prints each configuration's median wall time, the median of the paired
# differences against plain mpirun and against pre (and, for exec and
# component, against on: the wrapper).
# --stamps: the program is tests/progs/rank_report --stamp, and each
# configuration's medians of when (ms after the command started) the first
# and the last rank entered main, the last left MPI_Init, and the command
# exited are printed too: where a configuration's extra time goes.
# --raw FILE: each run's "CONFIG MICROSECONDS ROUND" lines kept in FILE.
# --timelines (or --real): afterwards one run of each gsrun configuration
# (on, exec, component) with -vv, its node agent's timeline printed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/_build np=16 pairs=15 real=0 prog="" configs="" stamps=0 timelines=0 raw=""
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --real) real=1; shift ;;
    --program) prog=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --stamps) stamps=1; shift ;;
    --timelines) timelines=1; shift ;;
    --raw) raw=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--np N] [--pairs K] [--real] [--program PATH] [--configs LIST] [--stamps] [--timelines] [--raw FILE]" >&2; exit 2 ;;
    esac
done
prog=${prog:-$build/examples/hello_ranks}
args=()
if [ $stamps = 1 ]; then
    prog=$build/tests/progs/rank_report args=(--stamp)
fi
gsrun=$build/launcher/gsrun
if [ $real = 1 ]; then
    configs=${configs:-plain on hand pre}
    control=$(command -v nvidia-cuda-mps-control) || { echo "$0: --real: no nvidia-cuda-mps-control" >&2; exit 1; }
    fake_env=()
else
    configs=${configs:-plain off on}
    control=$build/tests/fake/nvidia-cuda-mps-control
    fake_env=(env LD_LIBRARY_PATH="$build/tests/fake")
fi
case " $configs " in *" component "*)
    [ -f "$build/ompi/mca/mca_rtc_gsrun.so" ] ||
        { echo "$0: component: $build/ompi/mca/mca_rtc_gsrun.so was not built (no Open MPI 4 headers)" >&2; exit 1; } ;;
esac
for f in "$prog" "$gsrun" "$control"; do
    [ -e "$f" ] || { echo "$0: $f is missing; build first ('make check' builds the fakes)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
res=$(mktemp) out=$(mktemp) stamp_res=$(mktemp)
trap 'rm -f "$res" "$out" "$stamp_res"' EXIT

. "$top/tests/bench/mps_by_hand.sh"
# launch CONFIG DIR [v]: one job of CONFIG (DIR for hand-run MPS); v: with
# the node agent's -vv report (gsrun's configurations).
launch() {
    local v=() mca_v=()
    [ "${3:-}" = v ] && v=(-vv) mca_v=(--mca rtc_gsrun_verbose 2)
    case $1 in
    plain) mpirun -np "$np" "$prog" "${args[@]}" ;;
    off) "$gsrun" "${v[@]}" --mps=off -np "$np" "$prog" "${args[@]}" ;;
    on) "${fake_env[@]}" "$gsrun" "${v[@]}" --mps=on --mps-control="$control" -np "$np" "$prog" "${args[@]}" ;;
    exec) "${fake_env[@]}" mpirun -np "$np" "$gsrun" exec "${v[@]}" --mps=on --mps-control="$control" -- \
        "$prog" "${args[@]}" ;;
    component) "${fake_env[@]}" mpirun --mca mca_base_component_path "SYS_DEFAULT:$build/ompi/mca" \
        --mca rtc_gsrun_agent "$build/launcher/gsrun-agent" --mca rtc_gsrun_mps on "${mca_v[@]}" \
        --mca rtc_gsrun_mps_control "$control" -np "$np" "$prog" "${args[@]}" ;;
    hand)
        mps_hand_up "$2"
        local rc=0
        CUDA_MPS_PIPE_DIRECTORY=$2/p CUDA_MPS_LOG_DIRECTORY=$2/l mpirun -x CUDA_MPS_PIPE_DIRECTORY \
            -x CUDA_MPS_LOG_DIRECTORY -np "$np" "$prog" "${args[@]}" || rc=$?
        mps_hand_down "$2"
        return $rc
        ;;
    pre)
        CUDA_MPS_PIPE_DIRECTORY=$2/p CUDA_MPS_LOG_DIRECTORY=$2/l mpirun -x CUDA_MPS_PIPE_DIRECTORY \
            -x CUDA_MPS_LOG_DIRECTORY -np "$np" "$prog" "${args[@]}"
        ;;
    *) echo "$0: unknown configuration $1" >&2; exit 2 ;;
    esac
}
run() { # run CONFIG
    local t0 t1 d rc=0
    d=$(mktemp -d /tmp/gsl.XXXXXX)
    [ "$1" = pre ] && mps_hand_up "$d"
    t0=$(date +%s%N)
    launch "$1" "$d" >"$out" 2>&1 || rc=$?
    t1=$(date +%s%N)
    [ "$1" = pre ] && mps_hand_down "$d"
    rm -rf "$d"
    [ $rc -eq 0 ] || { echo "$0: $1 run failed (status $rc)" >&2; exit 1; }
    echo "$1 $(((t1 - t0) / 1000)) $i" >>"$res"
    if [ $stamps = 1 ]; then
        # first main, last main, last MPI_Init return: ms after t0
        sed -n 's/.*stamp=\([0-9]*\),\([0-9]*\).*/\1 \2/p' "$out" |
            awk -v c="$1" -v t0=$((t0 / 1000)) -v t1=$((t1 / 1000)) -v i="$i" -v np="$np" '
            NR == 1 || $1 < f { f = $1 } $1 > l { l = $1 } $2 > n { n = $2 }
            END { if (NR != np) { print "stamps: " NR " of " np > "/dev/stderr"; exit 1 }
                  printf "%s %.1f %.1f %.1f %.1f %s\n", c, (f - t0) / 1000, (l - t0) / 1000, (n - t0) / 1000, (t1 - t0) / 1000, i }' \
            >>"$stamp_res" || { echo "$0: $1: not every rank printed its stamp" >&2; exit 1; }
    fi
}
awk_median='function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
'
read -r -a cfg <<<"$configs"
for i in $(seq 1 "$pairs"); do
    for ((j = 0; j < ${#cfg[@]}; j++)); do
        run "${cfg[$(((j + i) % ${#cfg[@]}))]}"
    done
done
echo "launch overhead: $(basename "$prog"), $np ranks, $pairs paired runs, $(nproc) cores, $(mpirun --version 2>&1 | head -1)$([ $real = 1 ] && echo ", real MPS") "
awk -v list="$configs" "$awk_median"'
{ t[$1, $3] = $2 / 1000.0; runs[$3] = 1 }
END {
    nc = split(list, c, " ")
    for (k = 1; k <= nc; k++) { has_pre += c[k] == "pre"; has_on += c[k] == "on" }
    for (k = 1; k <= nc; k++) {
        n = 0
        for (r in runs) { n++; v[n] = t[c[k], r]; dp[n] = t[c[k], r] - t["plain", r]; dq[n] = t[c[k], r] - t["pre", r]; do_[n] = t[c[k], r] - t["on", r] }
        printf "%-6s median %8.1f ms", c[k], median(v, n)
        if (c[k] != "plain") printf ", vs plain %+7.1f ms (paired median)", median(dp, n)
        if (has_pre && c[k] != "pre") printf ", vs pre %+7.1f ms", median(dq, n)
        if (has_on && (c[k] == "exec" || c[k] == "component")) printf ", vs on %+7.1f ms", median(do_, n)
        printf "\n"
    }
}' "$res"
[ -n "$raw" ] && cp "$res" "$raw"
if [ $stamps = 1 ]; then
    echo "when (ms after the command started; medians): first rank in main, last rank in main, last rank out of MPI_Init, command exited"
    awk -v list="$configs" "$awk_median"'
    { for (k = 2; k <= 5; k++) v[$1, k, ++n[$1, k]] = $k }
    END {
        nc = split(list, c, " ")
        for (q = 1; q <= nc; q++) {
            printf "%-9s", c[q]
            for (k = 2; k <= 5; k++) {
                m = n[c[q], k]; for (r = 1; r <= m; r++) a[r] = v[c[q], k, r]
                printf " %8.1f", median(a, m)
            }
            printf "\n"
        }
    }' "$stamp_res"
fi
if [ $real = 1 ] || [ $timelines = 1 ]; then
    for c in $configs; do
        case $c in on | exec | component) ;; *) continue ;; esac
        launch "$c" "" v 2>&1 >/dev/null | grep "timeline\|ready\|shut down" | sed "s/^/# $c: /"
    done
fi
