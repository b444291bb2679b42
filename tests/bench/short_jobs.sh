#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/service/agent_share.c, runtime/job/agent_lease.c, runtime/core/config.c (short jobs' start), on the GPU
#
#   tests/bench/short_jobs.sh [BUILD_DIR]
#
# Short one-rank jobs (issue 53), side by side in one run, on every GPU of
# the machine: examples/solo_jacobi (2048^2, 2000 sweeps; SJ_SIZE sets it).
#   loop N    N jobs one after another in a shell loop: the loop's wall, and
#             each warm job's wall (the median of jobs 2..N)
#   at-once N N jobs started together: the set's wall, and for gsrun each
#             job's own part of its start from its -vv timeline ("size" to
#             "mps ready": what gsrun adds once the launcher reached the rank)
#   sweep     48 jobs through xargs -P 12: its wall
# Configurations:
#   plain    mpirun, every job on device 0 (time-sliced)
#   default  gsrun as it comes (the user's shared servers, warm after the
#            first job: --mps-linger=auto)
#   job      gsrun --mps-share=job (each job its own servers)
#   hand     one MPS server per GPU started before the set and kept up
#            (control daemon and server, not counted), mpirun run with its
#            CUDA_MPS_PIPE_DIRECTORY, job i on GPU i mod G: what a user does
#            by hand
# Before each loop of the default configuration the user's shared servers
# are ended, so its first job starts cold, as a user's first job does; the
# jobs at once and the sweep find them warm (one job a GPU run at once
# first, not counted), as they find the hand servers.
# SJ_LOOPS (default "10 50"), SJ_AT_ONCE ("1 4 12 24"), SJ_SWEEP ("48 12"),
# SJ_CONFIGS ("plain default job hand") and SJ_PARTS ("loop at-once sweep")
# choose what runs; SJ_KEEP=DIR keeps the jobs' -vv output of the sets at
# once there. Checks the issue's targets and that nothing of MPS is left;
# ends with "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
solo=$build/examples/solo_jacobi
. "$top/tests/bench/gpu_start.sh"
gpu_bench_start "$solo"
export OMPI_MCA_rmaps_base_oversubscribe=1
unset GSRUN_MPS_SHARE GSRUN_MPS_LINGER CUDA_VISIBLE_DEVICES HWLOC_COMPONENTS
G=$build/launcher/gsrun
control=$(command -v nvidia-cuda-mps-control)
. "$top/tests/bench/mps_by_hand.sh"
T=$(mktemp -d /tmp/gsj.XXXXXX)
ngpus=$(nvidia-smi -L | grep -c '^GPU ')
size=${SJ_SIZE:---n 2048 --iters 2000}
configs=${SJ_CONFIGS:-plain default job hand}
parts=${SJ_PARTS:-loop at-once sweep}
ms() { echo $(($(date +%s%N) / 1000000)); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
median() { sort -n | awk '{v[NR] = $1} END { print NR ? v[int((NR + 1) / 2)] : 0 }'; }

hand_up() {
    local g
    mps_hand_up_all "$T/hand" "$ngpus"
    for ((g = 0; g < ngpus; g++)); do mps_hand_serve "$T/hand$g"; done
}
hand_down() { mps_hand_down_all "$T/hand" "$ngpus"; }
# The user's shared servers ended (a lingering gsrun-share told to stop),
# so that a set starts cold.
shared_down() {
    pkill -TERM -x gsrun-share 2>/dev/null
    for _ in $(seq 500); do
        pgrep -x gsrun-share >/dev/null || pgrep -f 'nvidia-cuda-mps' >/dev/null || return 0
        sleep 0.02
    done
}

# one HOW I OUT: job I of a set, in the foreground; its wall (ms) in OUT.ms.
one() {
    local how=$1 i=$2 out=$3 g t0
    t0=$(($(date +%s%N) / 1000000))
    case $how in
    plain) mpirun -np 1 "$solo" $size >"$out" 2>"$out.err" ;;
    default) "$G" -vv -np 1 "$solo" $size >"$out" 2>"$out.err" ;;
    job) "$G" -vv --mps-share=job -np 1 "$solo" $size >"$out" 2>"$out.err" ;;
    hand)
        g=$((i % ngpus))
        CUDA_MPS_PIPE_DIRECTORY=$T/hand$g/p CUDA_MPS_LOG_DIRECTORY=$T/hand$g/l \
            mpirun -np 1 "$solo" $size >"$out" 2>"$out.err"
        ;;
    esac
    echo $(($(date +%s%N) / 1000000 - t0)) >"$out.ms"
}
# Whether every job of a set printed its solve: "ok" or "fail N".
solved() { # solved WANT files...
    local want=$1 got
    shift
    got=$(cat "$@" 2>/dev/null | grep -c '^solo_jacobi: ')
    [ "$got" -eq "$want" ] && echo ok || echo "fail $got/$want"
}
# gsrun's own part of each job's start, ms: "mps ready" less "size".
own_part() { # own_part files...: the median and the largest
    sed -n 's/.*timeline (ms after gsrun started): .*size \([0-9]*\), .*mps ready \([0-9]*\),.*/\2 \1/p' "$@" |
        awk '{print $1 - $2}' | sort -n | awk '{v[NR] = $1} END { if (NR) print v[int((NR + 1) / 2)], v[NR]; else print "- -" }'
}
# A set starts as its configuration would find the node: hand with its
# servers up; default cold before a loop (its first job is the cold start)
# and warm before the jobs at once and the sweep (one job a GPU run at once
# first, not counted: the hand servers' start is not counted either).
set_up() { # set_up HOW [warm]
    local i
    [ "$1" = hand ] && hand_up
    [ "$1" = default ] && shared_down
    if [ "$1" = default ] && [ "${2:-}" = warm ]; then
        for ((i = 0; i < ngpus; i++)); do one default "$i" "$T/warmup$i" & done
        wait
    fi
    return 0
}
set_down() { [ "$1" = hand ] && hand_down; [ "$1" = default ] && shared_down; }

echo "# $(nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | head -1), $ngpus GPU(s), $(nproc) cores, $(mpirun --version 2>&1 | head -1); solo_jacobi $size"
declare -A res=()

case $parts in *loop*)
for n in ${SJ_LOOPS:-10 50}; do
    line="# loop of $n:"
    for how in $configs; do
        set_up $how
        rm -f "$T"/o.*
        t0=$(ms)
        for i in $(seq 0 $((n - 1))); do one $how "$i" "$T/o.$i"; done
        wall=$(($(ms) - t0))
        set_down $how
        warm=$(for i in $(seq 1 $((n - 1))); do cat "$T/o.$i.ms"; done | median)
        res[loop$n.$how]=$wall res[warm$n.$how]=$warm res[first$n.$how]=$(cat "$T/o.0.ms")
        line="$line $how ${wall} ms (first $(cat "$T/o.0.ms"), warm median $warm, $(solved "$n" "$T"/o.[0-9]*)),"
    done
    echo "${line%,}"
done
;; esac

case $parts in *at-once*)
for n in ${SJ_AT_ONCE:-1 4 12 24}; do
    line="# $n at once:"
    for how in $configs; do
        set_up $how warm
        rm -f "$T"/o.*
        t0=$(ms)
        for i in $(seq 0 $((n - 1))); do one $how "$i" "$T/o.$i" & done
        wait
        wall=$(($(ms) - t0))
        own=""
        case $how in default | job) own=" own $(own_part "$T"/o.[0-9]*.err | sed 's| |/|; s|^-/-$|(no MPS)|')" ;; esac
        set_down $how
        res[once$n.$how]=$wall
        [ $how = default ] && res[own$n]=$(own_part "$T"/o.[0-9]*.err)
        if [ -n "${SJ_KEEP:-}" ]; then
            mkdir -p "$SJ_KEEP"
            for f in "$T"/o.[0-9]*.err; do cp "$f" "$SJ_KEEP/once$n.$how.${f##*/o.}"; done
        fi
        line="$line $how ${wall} ms$own ($(solved "$n" "$T"/o.[0-9]*)),"
    done
    echo "${line%,}"
done
;; esac

case $parts in *sweep*)
set -- ${SJ_SWEEP:-48 12}
jobs=$1 par=$2
line="# sweep of $jobs through xargs -P $par:"
export -f one
export T G solo size ngpus
for how in $configs; do
    set_up $how warm
    rm -f "$T"/o.*
    t0=$(ms)
    seq 0 $((jobs - 1)) | xargs -P "$par" -I{} bash -c "one $how {} $T/o.{}"
    wall=$(($(ms) - t0))
    set_down $how
    res[sweep.$how]=$wall
    line="$line $how ${wall} ms ($(solved "$jobs" "$T"/o.[0-9]*)),"
done
echo "${line%,}"
;; esac

# The targets, where both sides ran.
have() { [ -n "${res[$1]:-}" ] && [ -n "${res[$2]:-}" ]; }
for n in ${SJ_LOOPS:-10 50}; do
    if have "loop$n.default" "loop$n.hand"; then
        r=$(ratio "${res[loop$n.default]}" "${res[loop$n.hand]}")
        awk -v r="$r" 'BEGIN { exit !(r <= 1.1) }' && ok "loop of $n: default ${r}x of hand (target 1.1x)" ||
            notok "loop of $n: default ${r}x of hand (target 1.1x)"
        d=$((res[warm$n.default] - res[warm$n.hand]))
        [ "$d" -le 50 ] && ok "loop of $n: a warm job ${d} ms behind hand (target 50 ms)" ||
            notok "loop of $n: a warm job ${d} ms behind hand (target 50 ms)"
    fi
    if have "first$n.default" "first$n.plain"; then
        d=$((res[first$n.default] - res[first$n.plain]))
        [ "$d" -le 200 ] && ok "loop of $n: the cold first job ${d} ms behind plain (target 200 ms)" ||
            notok "loop of $n: the cold first job ${d} ms behind plain (target 200 ms)"
    fi
done
for n in ${SJ_AT_ONCE:-1 4 12 24}; do
    if have "once$n.default" "once$n.hand"; then
        r=$(ratio "${res[once$n.default]}" "${res[once$n.hand]}")
        awk -v r="$r" 'BEGIN { exit !(r <= 1.1) }' && ok "$n at once: default ${r}x of hand (target 1.1x)" ||
            notok "$n at once: default ${r}x of hand (target 1.1x)"
    fi
done
# gsrun's own part of each start (size to MPS ready), against a job alone.
if [ -n "${res[own1]:-}" ]; then
    read -r alone _ <<<"${res[own1]}"
    for n in ${SJ_AT_ONCE:-1 4 12 24}; do
        [ "$n" = 1 ] || [ -z "${res[own$n]:-}" ] && continue
        read -r med most <<<"${res[own$n]}"
        [ "$most" != - ] && [ "$most" -le $((alone + 50)) ] &&
            ok "$n at once: gsrun's own part of each start at most ${most} ms (median $med), alone $alone (target +50 ms)" ||
            notok "$n at once: gsrun's own part of each start at most ${most} ms (median $med), alone $alone (target +50 ms)"
    done
fi
if have sweep.default sweep.hand; then
    r=$(ratio "${res[sweep.default]}" "${res[sweep.hand]}")
    awk -v r="$r" 'BEGIN { exit !(r <= 1.05) }' && ok "sweep: default ${r}x of hand (target 1.05x)" ||
        notok "sweep: default ${r}x of hand (target 1.05x)"
fi
shared_down
left=$(pgrep -f 'nvidia-cuda-mps|gsrun-share|gsrun-agent' | tr '\n' ' ')
[ -z "$left" ] && ok "nothing of MPS or gsrun left" || notok "left behind: $left"
rm -rf "$T"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
