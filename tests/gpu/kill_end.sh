#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: teardown after SIGKILL with real MPS (GPU machine)
# How long the end of a killed job takes with real MPS (GPU machine; not run
# by CI). 8 ranks of examples/small_kernels keep the GPU busy under MPS; then
# one process is SIGKILLed and the script polls (every 10 ms) until no rank,
# node agent or guard, MPS process or run directory is left, noting when each
# of them went. The floor: every rank SIGKILLed at once (what is left is
# CUDA's own teardown and MPS's quit).
#
#   tests/gpu/kill_end.sh BUILD_DIR [REPS]     (default 3 repetitions)
#
# Cases: mpirun, gsrun, the node agent, one rank, mpirun with the Open MPI
# component (if built), all ranks (the floor). Prints one line per run and
# the agents' -vv timelines; ends with "N passed, N failed": a case passes
# when everything was gone within GSRUN_KILL_BOUND_MS (default 1500). The
# one-rank case gets GSRUN_KILL_RANK_EXTRA_MS more (default 500): there
# Open MPI itself takes about 1.07 s to end the other ranks, as under plain
# mpirun, before gsrun has anything to do (H100, old and new agent alike:
# ranks gone after 1057-1087 ms in 12 runs, everything after 1443-1532 ms).
# GSRUN_KILL_CASES chooses cases (e.g. "gsrun component").
# GSRUN_KILL_PROG names another program of examples/ and its arguments
# (e.g. "jacobi --iters 1000000"); it must run longer than the wait.
set -u
# Each check ends with nothing of MPS left: the shared servers' default
# linger (auto: 60 s) would keep them; the linger has checks of its own.
# The Open MPI component reads its own spelling of it.
export GSRUN_MPS_LINGER=${GSRUN_MPS_LINGER:-0}
export OMPI_MCA_rtc_gsrun_mps_linger=${OMPI_MCA_rtc_gsrun_mps_linger:-$GSRUN_MPS_LINGER}
b=$1
reps=${2:-3}
bound=${GSRUN_KILL_BOUND_MS:-1500}
np=8
pass=0 fail=0
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
set -- ${GSRUN_KILL_PROG:-small_kernels --kernels 200000}
name=$1
shift
prog=$b/examples/$name
args=("$@")
[ -x "$prog" ] || { echo "1..0 # SKIP $prog is not built (no nvcc?)"; exit 77; }

. "$(dirname "$0")/procs.sh"
pin_one_gpu
dirs_left() { ls -d "$GS_ROOT"/gsrun.* /run/gsrun/* 2>/dev/null | tr '\n' ' '; }

run_case() { # run_case CASE REP
    local what=$1 rep=$2 g victim t0 ms t_r="" t_a="" t_m="" t_d="" t_l="" r a m d l
    local rtc=""
    if [ "$what" = component ]; then
        rtc="--mca mca_base_component_path SYS_DEFAULT:$b/ompi/mca --mca rtc_gsrun_agent $b/launcher/gsrun-agent --mca rtc_gsrun_mps on --mca rtc_gsrun_verbose 2"
        mpirun $rtc -np $np "$prog" "${args[@]}" >/tmp/gsk.out 2>&1 &
    else
        "$b/launcher/gsrun" -vv --mps=on -np $np "$prog" "${args[@]}" >/tmp/gsk.out 2>&1 &
    fi
    g=$!
    for _ in $(seq 300); do [ "$(pgrep -xc "$name")" -ge $np ] && break; sleep 0.05; done
    sleep 2 # every rank has its context and runs kernels
    case $what in
    mpirun | component) victim=$(pgrep -x mpirun | head -1) ;;
    gsrun) victim=$g ;;
    agent) victim=$(for p in $(pgrep -f launcher/gsrun-agent); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = gsrun-agent ] && echo $p; done | head -1) ;;
    rank) victim=$(pgrep -x "$name" | sort -n | sed -n 3p) ;;
    ranks) victim=$(pgrep -x "$name" | tr '\n' ' ') ;;
    esac
    t0=$(date +%s%N)
    kill -KILL $victim
    while :; do
        ms=$((($(date +%s%N) - t0) / 1000000))
        r=$(live_procs "$name") a=$(live_procs 'gsrun-*') m=$(live_procs 'nvidia-cuda-mps*')
        d=$(dirs_left) l=$(live_procs mpirun)
        [ -z "$r" ] && [ -z "$t_r" ] && t_r=$ms
        [ -z "$a" ] && [ -z "$t_a" ] && t_a=$ms
        [ -z "$m" ] && [ -z "$t_m" ] && t_m=$ms
        [ -z "$d" ] && [ -z "$t_d" ] && t_d=$ms
        [ -z "$l" ] && [ -z "$t_l" ] && t_l=$ms
        [ -z "$r$a$m$d" ] && break
        [ $ms -ge 10000 ] && break
        sleep 0.01
    done
    wait $g 2>/dev/null
    echo "$what run $rep: all gone after $ms ms (ranks ${t_r:--} ms, agents ${t_a:--}, MPS ${t_m:--}, run dirs ${t_d:--}, mpirun ${t_l:--})"
    grep -E "timeline|problem" /tmp/gsk.out | sed 's/^/#   /'
    local case_bound=$bound
    [ "$what" = rank ] && case_bound=$((bound + ${GSRUN_KILL_RANK_EXTRA_MS:-500}))
    if [ -z "$r$a$m$d" ] && [ $ms -le $case_bound ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "#   over $case_bound ms, or left: ranks [$r] agents [$a] MPS [$m] dirs [$d]"
    fi
    pkill -KILL -x "$name" 2>/dev/null
    pkill -KILL -x mpirun 2>/dev/null
    # Never needed after a passing run: a failing one's daemons are quit
    # through their pipe dirs, then whatever still runs is killed.
    for d in "$GS_ROOT"/gsrun.*/*/g[0-9]* /run/gsrun/*/*/g[0-9]*; do
        [ -S "$d/control" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY=$d timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
    done
    m=$(live_procs 'nvidia-cuda-mps*')
    [ -n "$m" ] && kill -KILL $m 2>/dev/null
    rm -rf "$GS_ROOT"/gsrun.* /run/gsrun/* 2>/dev/null
    sleep 1
}

cases="ranks mpirun gsrun agent rank"
[ -f "$b/ompi/mca/mca_rtc_gsrun.so" ] && cases="$cases component"
cases=${GSRUN_KILL_CASES:-$cases}
for rep in $(seq "$reps"); do
    for c in $cases; do run_case $c $rep; done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
