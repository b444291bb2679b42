#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/job/agent_pack.c, runtime/plan/pack.c (packing a user's jobs), on the GPU
#
#   tests/bench/pack.sh [BUILD_DIR] [ROUNDS]
#
# A user's concurrent jobs over all GPUs of the machine, side by side in one
# run (issue 44), ROUNDS runs each (default 2): K jobs of r ranks of
# examples/solo_jacobi (4096^2: memory-bound) at once for (K, r) in (8, 1),
# (16, 1), (4, 3), (6, 2), worst solve over all ranks (2000 sweeps, every
# copy's first sweep held to one wall-clock moment, --start-at, so that
# the copies solve together whatever their start-up took: a copy alone
# takes ~0.1 s, shorter than the jobs' start-ups differ); and a sweep of 32
# one-rank jobs (1000 sweeps each) run 8 at a time (xargs -P 8), its wall
# time, which is mostly start-up.
# Configurations:
#   plain    mpirun: every job on device 0, time-sliced
#   job      gsrun --mps-share=job: packed over the GPUs, each job its own servers
#   default  gsrun as it comes (auto: packed, the user's shared servers;
#            the same as --mps-share=node outside a Slurm job step)
#   hand     one MPS server per GPU started by hand, job i on GPU i mod G
#   linger   (the sweep only) the default with --mps-linger=5: the shared
#            servers stay between the sweep's jobs
# PACK_PARTS (default "at-once sweep") picks the parts to run.
# Checks the target: the default within 1.1x of hand on every point and on
# the sweep, and that nothing of MPS is left. Ends with "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
rounds=${2:-2}
solo=$build/examples/solo_jacobi
. "$top/tests/bench/gpu_start.sh"
gpu_bench_start "$solo"
export OMPI_MCA_rmaps_base_oversubscribe=1
unset GSRUN_MPS_SHARE CUDA_VISIBLE_DEVICES
G=$build/launcher/gsrun
control=$(command -v nvidia-cuda-mps-control)
. "$top/tests/bench/mps_by_hand.sh"
T=$(mktemp -d /tmp/gsp.XXXXXX)
ngpus=$(nvidia-smi -L | grep -c '^GPU ')
size="--n 4096 --iters 1000"      # the sweep's
together="--n 4096 --iters 2000"  # the jobs at once
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
within() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { exit !(a <= f * b) }'; }

# One server per GPU, by hand: hand_up / hand_down.
hand_up() { mps_hand_up_all "$T/hand" "$ngpus"; }
hand_down() { mps_hand_down_all "$T/hand" "$ngpus"; }

# one HOW I NRANKS OUT ARGS...: job I of a set, in the foreground.
one() {
    local how=$1 i=$2 nr=$3 out=$4 g
    shift 4
    case $how in
    plain) mpirun -np "$nr" "$solo" "$@" >"$out" 2>"$out.err" ;;
    job) "$G" --mps-share=job -np "$nr" "$solo" "$@" >"$out" 2>"$out.err" ;;
    default) "$G" -np "$nr" "$solo" "$@" >"$out" 2>"$out.err" ;;
    linger) "$G" --mps-linger=5 -np "$nr" "$solo" "$@" >"$out" 2>"$out.err" ;;
    hand)
        g=$((i % ngpus))
        CUDA_MPS_PIPE_DIRECTORY=$T/hand$g/p CUDA_MPS_LOG_DIRECTORY=$T/hand$g/l \
            mpirun -np "$nr" "$solo" "$@" >"$out" 2>"$out.err"
        ;;
    esac
}

# Worst solve over the outputs, or "fail" when a rank's line is missing.
worst() { # worst WANT files...
    local want=$1
    shift
    [ "$(cat "$@" | grep -c '^solo_jacobi: ')" -eq "$want" ] || { echo fail; return; }
    cat "$@" | grep -o 'solve=[0-9.]*' | cut -d= -f2 | sort -g | tail -1
}

# K jobs of r ranks at once, solving together: the worst solve (and how
# many copies were ready only after the common start, in late_copies).
at_once() { # at_once HOW K R
    local how=$1 k=$2 r=$3 i at
    rm -f "$T"/o.*
    at=$(($(date +%s%3N) + 2000 + 250 * k * r))
    for i in $(seq 0 $((k - 1))); do
        one "$how" "$i" "$r" "$T/o.$i" $together --start-at "$at" &
    done
    wait
    late=$(cat "$T"/o.[0-9]* 2>/dev/null | grep -c 'late_ms=[1-9]')
    echo "$(worst $((k * r)) "$T"/o.[0-9]*)$([ "$late" -gt 0 ] && echo "(late:$late)")"
}

# The sweep: 32 one-rank jobs, 8 at a time: "wall_ms worst_solve".
sweep() { # sweep HOW
    local how=$1 t0 t1
    rm -f "$T"/o.*
    export -f one
    export T G solo size ngpus
    t0=$(date +%s%N)
    seq 0 31 | xargs -P 8 -I{} bash -c "one $how {} 1 $T/o.{} $size"
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000000)) $(worst 32 "$T"/o.[0-9]*)"
}

echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $ngpus GPUs, $(nproc) cores; solo_jacobi $together (at once), $size (sweep)"
parts=${PACK_PARTS:-at-once sweep}
for r in $(seq "$rounds"); do
    for kr in "8 1" "16 1" "4 3" "6 2"; do
        case $parts in *at-once*) ;; *) break ;; esac
        set -- $kr
        k=$1 n=$2
        declare -A got=()
        line="# $k jobs x $n ranks, run $r: worst solve (s):"
        for how in plain job default hand; do
            [ $how = hand ] && hand_up
            got[$how]=$(at_once $how "$k" "$n")
            [ $how = hand ] && hand_down
            line="$line $how ${got[$how]},"
        done
        echo "${line%,}"
        dv=${got[default]%%(*} hv=${got[hand]%%(*}
        if [ "$dv" = fail ] || [ "$hv" = fail ]; then
            notok "$k x $n, run $r: a job failed"
            tail -3 "$T"/o.0.err | sed 's/^/#   /'
            continue
        fi
        pv=${got[plain]%%(*} jv=${got[job]%%(*}
        echo "# ratios: default/hand $(ratio "$dv" "$hv")$([ "$pv" != fail ] && echo ", plain/default $(ratio "$pv" "$dv")")$([ "$jv" != fail ] && echo ", job/default $(ratio "$jv" "$dv")")"
        within "$dv" "$hv" 1.1 &&
            ok "$k x $n, run $r: gsrun's default ($dv s) within 1.1x of one hand server per GPU ($hv s)" ||
            notok "$k x $n, run $r: gsrun's default ($dv s) not within 1.1x of one hand server per GPU ($hv s)"
    done
    case $parts in *sweep*) ;; *) continue ;; esac
    declare -A sw=()
    line="# sweep of 32 one-rank jobs, 8 at a time, run $r: wall ms / worst solve s:"
    for how in plain job default linger hand; do
        [ $how = hand ] && hand_up
        sw[$how]=$(sweep $how)
        [ $how = hand ] && hand_down
        # The linger's servers end 5 s after the sweep: the next configuration
        # starts on a quiet node.
        for _ in $(seq 100); do pgrep -x nvidia-cuda-mps >/dev/null || break; sleep 0.1; done
        line="$line $how ${sw[$how]// / \/ },"
    done
    echo "${line%,}"
    set -- ${sw[default]}
    dw=$1 ds=${2:-fail}
    set -- ${sw[hand]}
    hw=$1 hs=${2:-fail}
    if [ "$ds" = fail ] || [ "$hs" = fail ]; then
        notok "sweep, run $r: a job failed"
    else
        within "$dw" "$hw" 1.1 &&
            ok "sweep, run $r: gsrun's default ($dw ms) within 1.1x of one hand server per GPU ($hw ms)" ||
            notok "sweep, run $r: gsrun's default ($dw ms) not within 1.1x of one hand server per GPU ($hw ms)"
    fi
done

for _ in $(seq 100); do
    left=$(pgrep -c -x 'nvidia-cuda-mps' || true)
    [ "${left:-0}" -eq 0 ] && break
    sleep 0.1
done
[ "${left:-0}" -eq 0 ] && ok "no MPS process left" || notok "$left MPS processes left"
rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
