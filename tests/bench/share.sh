#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/service/agent_share.c (--mps-share=node), on the GPU
#
#   tests/bench/share.sh [BUILD_DIR] [ROUNDS]
#
# A user's concurrent and back-to-back jobs on one GPU, side by side in one
# run (issue 38), ROUNDS runs each (default 2):
#   A. two jobs of 24 independent copies of examples/solo_jacobi (2048^2,
#      4000 sweeps; no MPI) at once, worst solve over both jobs;
#   B. four jobs of 12 copies at once, the same;
#   C. two MPI-coupled jobs at once, 8 ranks of examples/jacobi each (16
#      ranks on 16 cores), worst time to solution;
# each as plain mpirun, as gsrun jobs with servers of their own (today's
# default, --mps-share=job), as gsrun jobs with --mps-share=node, and as
# mpirun jobs that are clients of one MPS server started by hand (share
# unset);
#   D. back to back: the wall time of a 16-rank job of examples/mps_probe
#      (context and 16 MiB each) under gsrun with servers of its own, under
#      gsrun finding the shared server warm (--mps-linger), and under mpirun
#      finding a server started by hand;
#   E. 60 copies under one gsrun: the default against --mps-percentage=off;
#   F. client priority across jobs: two jobs of 4 copies sharing a server,
#      both normal, then one --mps-priority=low (worst solve of each job);
#   G. the share of coupled jobs on a shared server: C's two 8-rank jobs
#      with --mps-share=node at the default (200/8 each) and at off.
# SHARE_PARTS (default ABCDEFG) picks the parts to run.
# Checks the targets: node-shared within 1.2x of the hand server (A, B, C),
# a warm start within 50 ms of the hand server's (D), the default within
# 1.2x of off (E), and that nothing of MPS is left. Ends with "N passed, N
# failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
rounds=${2:-2}
solo=$build/examples/solo_jacobi
jac=$build/examples/jacobi
probe=$build/examples/mps_probe
. "$top/tests/bench/gpu_start.sh"
gpu_bench_start "$solo" "$jac" "$probe"
export OMPI_MCA_rmaps_base_oversubscribe=1
G=$build/launcher/gsrun
control=$(command -v nvidia-cuda-mps-control)
. "$top/tests/bench/mps_by_hand.sh"
. "$top/tests/gpu/procs.sh"
pin_one_gpu
T=$(mktemp -d /tmp/gsb.XXXXXX)
hand=$T/hand
size="--n 2048 --iters 4000"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
within() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { exit !(a <= f * b) }'; }

# jobs HOW NJOBS NRANKS PROG ARGS...: NJOBS jobs at once; prints the worst
# time over all their ranks (solve= or tts=), or "fail".
jobs_at_once() {
    local how=$1 nj=$2 nr=$3 i rc=0
    shift 3
    for i in $(seq "$nj"); do
        case $how in
        plain) mpirun -np "$nr" "$@" >"$T/o$i" 2>"$T/e$i" & ;;
        job) "$G" -np "$nr" "$@" >"$T/o$i" 2>"$T/e$i" & ;;
        node) "$G" --mps-share=node -np "$nr" "$@" >"$T/o$i" 2>"$T/e$i" & ;;
        hand) CUDA_MPS_PIPE_DIRECTORY=$hand/p CUDA_MPS_LOG_DIRECTORY=$hand/l \
            mpirun -np "$nr" "$@" >"$T/o$i" 2>"$T/e$i" & ;;
        esac
    done
    for i in $(seq "$nj"); do
        wait -n || rc=1
    done
    local lines
    lines=$(cat $(for i in $(seq "$nj"); do echo "$T/o$i"; done) | grep -E '^(solo_jacobi|jacobi): ')
    if [ $rc -ne 0 ] || [ -z "$lines" ]; then
        echo fail
        return
    fi
    echo "$lines" | grep -oE '(solve|tts)=[0-9.]*' | cut -d= -f2 | sort -g | tail -1
}

# One table: the four ways, ROUNDS runs each.
table() { # table NAME NJOBS NRANKS EXPECTED_LINES PROG ARGS...
    local name=$1 nj=$2 nr=$3 want=$4 r how t line
    shift 4
    for r in $(seq "$rounds"); do
        line="# $name, run $r: worst (s):"
        declare -A got=()
        for how in plain job node hand; do
            [ $how = hand ] && mps_hand_up "$hand"
            t=$(jobs_at_once $how "$nj" "$nr" "$@")
            [ $how = hand ] && mps_hand_down "$hand"
            if [ "$t" != fail ] &&
                [ "$(cat $(for i in $(seq "$nj"); do echo "$T/o$i"; done) | grep -cE '^(solo_jacobi|jacobi): ')" -ne "$want" ]; then
                t=fail
            fi
            got[$how]=$t
            line="$line $how $t,"
        done
        echo "${line%,}"
        if [ "${got[node]}" = fail ] || [ "${got[hand]}" = fail ]; then
            notok "$name, run $r: a job failed"
            sed 's/^/#   /' "$T/e1" | tail -5
            continue
        fi
        echo "# ratios: node/hand $(ratio "${got[node]}" "${got[hand]}"), job/node $(ratio "${got[job]}" "${got[node]}"), plain/node $(ratio "${got[plain]}" "${got[node]}")"
        within "${got[node]}" "${got[hand]}" 1.2 &&
            ok "$name, run $r: --mps-share=node (${got[node]} s) within 1.2x of one hand-started server (${got[hand]} s)" ||
            notok "$name, run $r: --mps-share=node (${got[node]} s) not within 1.2x of one hand-started server (${got[hand]} s)"
    done
}

parts=${SHARE_PARTS:-ABCDEFG}
part() { case $parts in *$1*) return 0 ;; esac; return 1; }
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores"
part A && table "A: 2 jobs x 24 copies" 2 24 48 "$solo" $size
part B && table "B: 4 jobs x 12 copies" 4 12 48 "$solo" $size
part C && table "C: 2 MPI jobs x 8 ranks (jacobi 4096^2)" 2 8 2 "$jac"

# D. Back to back: one job's wall time, 4 rounds each.
part_d() {
wall() { # wall CMD...: ms of one run, or "fail"
    local t0 t1
    t0=$(date +%s%N)
    "$@" >"$T/od" 2>"$T/ed" || { echo fail; return; }
    t1=$(date +%s%N)
    [ "$(grep -c 'mps=1 ' "$T/od")" -eq 16 ] || { echo fail; return; }
    echo $(((t1 - t0) / 1000000))
}
mean() { tr ' ' '\n' | grep -v '^$' | awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n; else print "fail" }'; }
pargs="--expect-mps --n 4194304 --iters 10"
own="" warm="" byhand=""
for r in 1 2 3 4; do
    own="$own $(wall "$G" --mps=on -np 16 "$probe" $pargs)"
done
wall "$G" --mps=on --mps-share=node --mps-linger=60 -np 16 "$probe" $pargs >/dev/null # warms
for r in 1 2 3 4; do
    warm="$warm $(wall "$G" --mps=on --mps-share=node --mps-linger=60 -np 16 "$probe" $pargs)"
done
last=$(wall "$G" --mps=on --mps-share=node --mps-linger=0 -np 16 "$probe" $pargs) # ends it
mps_hand_up "$hand"
for r in 1 2 3 4; do
    byhand="$byhand $(wall env CUDA_MPS_PIPE_DIRECTORY="$hand/p" CUDA_MPS_LOG_DIRECTORY="$hand/l" \
        mpirun -np 16 "$probe" $pargs)"
done
mps_hand_down "$hand"
echo "# D: back to back, 16 ranks (context + 16 MiB each), wall ms: gsrun, servers of its own:$own; gsrun finding the shared server warm:$warm (then$last, linger 0); mpirun finding a hand-started server:$byhand"
mo=$(echo "$own" | mean) mw=$(echo "$warm" | mean) mh=$(echo "$byhand" | mean)
echo "# D: means: own $mo ms, warm $mw ms, hand $mh ms; warm - hand $((mw - mh)) ms, own - warm $((mo - mw)) ms"
case "$own$warm$byhand" in *fail*) notok "D: a job failed"; sed 's/^/#   /' "$T/ed" | tail -5 ;; *)
    [ $((mw - mh)) -le 50 ] && ok "D: a warm start ($mw ms) within 50 ms of the hand-started server's ($mh ms)" ||
        notok "D: a warm start ($mw ms) is $((mw - mh)) ms slower than the hand-started server's ($mh ms)" ;;
esac
}
part D && part_d

# E. 60 copies under one gsrun.
for r in $(seq "$rounds"); do
    part E || break
    d=$(jobs_at_once job 1 60 "$solo" $size)
    o=$("$G" --mps-percentage=off -np 60 "$solo" $size 2>"$T/e1" | grep -o 'solve=[0-9.]*' | cut -d= -f2 | sort -g | tail -1)
    echo "# E: 60 copies, run $r: worst solve (s): gsrun default $d, --mps-percentage=off ${o:-fail}"
    if [ "$d" = fail ] || [ -z "$o" ]; then
        notok "E, run $r: a job failed"
    else
        within "$d" "$o" 1.2 && ok "E, run $r: the default ($d s) within 1.2x of off ($o s)" ||
            notok "E, run $r: the default ($d s) not within 1.2x of off ($o s)"
    fi
done

# F. Priority across two jobs on one shared server.
worst_of() { grep -o 'solve=[0-9.]*' "$1" | cut -d= -f2 | sort -g | tail -1; }
for r in $(seq "$rounds"); do
    part F || break
    for prio in normal low; do
        "$G" --mps-share=node -np 4 "$solo" $size >"$T/p1" 2>"$T/pe1" &
        "$G" --mps-share=node --mps-priority=$prio -np 4 "$solo" $size >"$T/p2" 2>"$T/pe2" &
        wait
        eval "f_$prio=\"$(worst_of "$T/p1") $(worst_of "$T/p2")\""
    done
    set -- $f_normal
    fn1=${1:-fail} fn2=${2:-fail}
    set -- $f_low
    fl1=${1:-fail} fl2=${2:-fail}
    echo "# F, run $r: two jobs of 4 copies on one shared server, worst solve (s): both normal $fn1 and $fn2; normal $fl1 beside low $fl2"
    case "$fn1$fn2$fl1$fl2" in *fail*) notok "F, run $r: a job failed" ;; *)
        awk -v a="$fl1" -v b="$fn1" 'BEGIN { exit !(a < b) }' &&
            ok "F, run $r: the normal job beside a low one ($fl1 s) is faster than beside a normal one ($fn1 s)" ||
            notok "F, run $r: the normal job beside a low one ($fl1 s) is not faster than beside a normal one ($fn1 s)" ;;
    esac
done

# G. Coupled jobs on a shared server: the default share against off.
for r in $(seq "$rounds"); do
    part G || break
    d=$(jobs_at_once node 2 8 "$jac")
    o=$(GSRUN_MPS_PERCENTAGE=off jobs_at_once node 2 8 "$jac")
    echo "# G, run $r: two 8-rank jacobi jobs on one shared server, worst (s): default (200/8 each) $d, --mps-percentage=off $o"
    [ "$d" != fail ] && [ "$o" != fail ] && ok "G, run $r: both ran" || notok "G, run $r: a job failed"
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
