#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Many ranks over every GPU of the node: how long the job takes to start and
# how long its end takes after a SIGKILL, gsrun beside plain mpirun and beside
# MPS started by hand (the floor). For a GPU machine (not CI; the smoke test
# runs it on the fakes).
#
#   tests/bench/many_ranks.sh --build DIR [--np N] [--cases "floor gsrun plain"]
#                             [--kill "gsrun mpirun agent rank"] [--reps K]
#                             [--clients-per-server C] [--gsrun-args "..."]
#
# N ranks (default 100 a GPU) of examples/mps_probe each create a context,
# print their line and sleep, so that all hold the GPUs at once. The start is
# the time from the launch until the last rank's line. Then the job is ended
# and polled every 10 ms until no rank, node agent or guard, MPS process or
# run directory is left (120 s at most). Cases:
#   floor  MPS by hand: ceil(N / G / C) control daemons a GPU (G GPUs, C
#          clients a server, default 48), each with its own pipe and log
#          directory, CUDA_VISIBLE_DEVICES of its GPU and its server started
#          before the clock; the ranks dealt round-robin over the servers by
#          a wrapper. The end: every rank SIGKILLed at once, then quit to
#          every daemon. What is left is CUDA's and MPS's own teardown.
#   gsrun  gsrun --mps=on (the default share mode unless --gsrun-args says
#          otherwise); the end: SIGKILL of each target in --kill in turn, one
#          job each (gsrun, mpirun, agent: the job's gsrun-agent, rank: one rank).
#   plain  mpirun, rank i on GPU i mod G through CUDA_VISIBLE_DEVICES, no MPS;
#          the end: every rank SIGKILLed at once.
# One line per run: "CASE [KILL] run K: N ranks started in S s; SIGKILL: ranks
# gone after A ms, MPS after B ms, all after C ms". Ends with "N passed, N
# failed": a run passes when every rank printed its line (an MPS client
# where the case has MPS) and nothing was left.
# --prog "CMD ARGS" replaces the program (it must print "rank I/N: mps=0|1"
# and then stay up), --gpus G and --control PATH the GPU count and MPS
# control program: for the smoke test on the fakes.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/gpu/procs.sh"
. "$top/tests/bench/mps_by_hand.sh"
build="" np="" cases="floor gsrun plain" kills=gsrun reps=1 cps=48 gsrun_args="" prog="" gpus="" control=""
usage() { echo "usage: see the head of $0" >&2; exit 2; }
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
    --build) build=$2 ;;
    --np) np=$2 ;;
    --cases) cases=$2 ;;
    --kill) kills=$2 ;;
    --reps) reps=$2 ;;
    --clients-per-server) cps=$2 ;;
    --gsrun-args) gsrun_args=$2 ;;
    --prog) prog=$2 ;;
    --gpus) gpus=$2 ;;
    --control) control=$2 ;;
    *) usage ;;
    esac
    shift 2
done
[ -n "$build" ] || usage
gsrun=$build/launcher/gsrun
[ -x "$gsrun" ] || { echo "many_ranks.sh: $gsrun is missing; build gsrun first" >&2; exit 2; }
if [ -z "$gpus" ]; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    [ "$gpus" -gt 0 ] || { echo "many_ranks.sh: no NVIDIA GPU here (nvidia-smi -L lists none); give --gpus and --prog to run on fakes" >&2; exit 77; }
fi
if [ -z "$prog" ]; then
    [ -x "$build/examples/mps_probe" ] || { echo "many_ranks.sh: $build/examples/mps_probe is not built (no nvcc?)" >&2; exit 77; }
    prog="$build/examples/mps_probe --iters 20 --sleep 600000"
fi
control=${control:-$(command -v nvidia-cuda-mps-control)} ||
    { echo "many_ranks.sh: no nvidia-cuda-mps-control on PATH" >&2; exit 77; }
for v in "$gpus" "${np:-1}" "$cps" "$reps"; do
    case $v in '' | *[!0-9]* | 0) echo "many_ranks.sh: '$v': --np, --gpus, --clients-per-server and --reps take whole numbers from 1" >&2; exit 2 ;; esac
done
np=${np:-$((100 * gpus))}
spg=$(((np + gpus * cps - 1) / (gpus * cps))) # the floor's servers a GPU
read -r -a prog_argv <<<"$prog"
name=$(basename "${prog_argv[0]}")
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
work=$(mktemp -d "${TMPDIR:-/tmp}/gsmany.XXXXXX")
daemons=()
cleanup() {
    for d in "${daemons[@]}"; do
        [ -S "$d/p/control" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY=$d/p timeout 10 "$control" >/dev/null 2>&1
    done
    rm -rf "$work"
}
trap cleanup EXIT
# procs PATTERN: live_procs, limited under `make check` (GS_TEST_MARK, which
# every process of a test's jobs inherits) to this test's own: tests running
# beside it have mpiruns, agents and fake daemons of their own. (Not on a GPU
# machine: there CUDA programs' environ cannot be read.)
procs() {
    local p
    if [ -z "${GS_TEST_MARK:-}" ]; then live_procs "$1"; return; fi
    for p in $(live_procs "$1"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "GS_TEST_MARK=$GS_TEST_MARK" && printf '%s ' "$p"
    done
}
pass=0 fail=0
now_ms() { echo $(($(date +%s%N) / 1000000)); }
rundirs() { ls -d "${TMPDIR:-/tmp}"/gsrun.* "${TMPDIR:-/tmp}"/gsrun-*/mps-share/* /dev/shm/gsrun.* /dev/shm/gsrun-*/mps-share/* /run/gsrun/*/* 2>/dev/null | tr '\n' ' '; }
echo "# $np ranks over $gpus GPU(s), $cps clients a server at most; program: $prog"

# The rank wrapper: the hand case's server, or plain's GPU, by local rank.
cat >"$work/wrap" <<EOF
#!/bin/sh
r=\${OMPI_COMM_WORLD_LOCAL_RANK:?not under Open MPI}
case \$1 in
floor) s=\$((r % $((gpus * spg)))); shift
    export CUDA_MPS_PIPE_DIRECTORY=$work/d\$s/p CUDA_MPS_LOG_DIRECTORY=$work/d\$s/l ;;
plain) export CUDA_VISIBLE_DEVICES=\$((r % $gpus)); shift ;;
esac
exec "\$@"
EOF
chmod +x "$work/wrap"

# The job's node agent: not its guard (a gsrun-agent's child) nor the user's
# shared agent (--mode node-share).
job_agent() {
    local p pp c
    for p in $(procs gsrun-agent); do
        read -r pp < <(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || continue
        read -r c 2>/dev/null <"/proc/$pp/comm"
        [ "$c" = gsrun-agent ] && continue
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--mode node-share" && continue
        echo "$p"
        return
    done
}

hand_up() { # the floor's daemons and servers, before the clock
    local s d
    for s in $(seq 0 $((gpus * spg - 1))); do
        d=$work/d$s
        CUDA_VISIBLE_DEVICES=$((s / spg)) mps_hand_up "$d" || return 1
        daemons+=("$d")
    done
    for d in "${daemons[@]}"; do
        echo "start_server -uid $(id -u)" | CUDA_MPS_PIPE_DIRECTORY=$d/p "$control" >/dev/null || return 1
    done
    echo "# floor: $((gpus * spg)) daemons with a server each ($spg a GPU)"
}
hand_quit() {
    local d
    for d in "${daemons[@]}"; do
        (echo quit | CUDA_MPS_PIPE_DIRECTORY=$d/p timeout 60 "$control" >/dev/null 2>&1) &
    done
    daemons=()
}

one_run() { # one_run CASE KILL REP
    local what=$1 kill=$2 rep=$3 out=$work/out t0 t_start="" launched victim n expect r m a d
    local t_r="" t_m="" t_all="" ms
    : >"$out"
    [ "$what" = floor ] && { hand_up || { fail=$((fail + 1)); echo "not ok: floor: the hand-started MPS did not come up"; return; }; }
    t0=$(now_ms)
    case $what in
    floor | plain) mpirun -np "$np" "$work/wrap" "$what" "${prog_argv[@]}" >"$out" 2>&1 & ;;
    gsrun) "$gsrun" --mps=on $gsrun_args -np "$np" "${prog_argv[@]}" >"$out" 2>&1 & ;;
    esac
    launched=$!
    expect=1
    [ "$what" = plain ] && expect=0
    while kill -0 $launched 2>/dev/null; do
        n=$(grep -c "^rank [0-9]*/[0-9]*: mps=" "$out")
        [ "$n" -ge "$np" ] && { t_start=$(($(now_ms) - t0)); break; }
        [ $(($(now_ms) - t0)) -gt 900000 ] && break
        sleep 0.05
    done
    n=$(grep -c "^rank [0-9]*/[0-9]*: mps=$expect" "$out")
    case $what in
    floor | plain) victim=$(procs "$name") ;;
    *) case $kill in
        gsrun) victim=$launched ;;
        mpirun) victim=$(procs mpirun)$(procs prterun) ;; # Open MPI 4, 5
        agent) victim=$(job_agent) ;;
        rank) victim=$(procs "$name" | awk '{print $1}') ;;
        esac ;;
    esac
    local label=$what
    [ "$what" = gsrun ] && label="gsrun (SIGKILL of $kill)"
    t0=$(now_ms)
    if [ -z "$victim" ]; then
        echo "#   no $kill to kill: the job is ended instead"
        kill -KILL $launched $(procs "$name") 2>/dev/null
    fi
    [ -n "$victim" ] && kill -KILL $victim 2>/dev/null
    [ "$what" = floor ] && hand_quit
    while :; do
        ms=$(($(now_ms) - t0))
        r=$(procs "$name") m=$(procs 'nvidia-cuda-mps*') a=$(procs 'gsrun-*') d=$(rundirs)
        [ -z "$r" ] && [ -z "$t_r" ] && t_r=$ms
        [ -z "$m" ] && [ -z "$t_m" ] && t_m=$ms
        [ -z "$r$m$a$d" ] && { t_all=$ms; break; }
        [ $ms -ge 120000 ] && break
        sleep 0.01
    done
    # Whatever outlived the poll is ended, so that the wait cannot hang.
    [ -z "$t_all" ] && kill -KILL $launched $(procs "$name") $(procs mpirun) $(procs prterun) 2>/dev/null
    for _ in $(seq 600); do kill -0 $launched 2>/dev/null || break; sleep 0.1; done
    kill -KILL $launched 2>/dev/null
    wait 2>/dev/null
    echo "$label run $rep: $n of $np ranks (mps=$expect) started in ${t_start:+$((t_start / 1000)).$(printf %03d $((t_start % 1000)))} s; SIGKILL: ranks gone after ${t_r:--} ms, MPS after ${t_m:--} ms, all after ${t_all:--} ms"
    grep -v "^rank [0-9]*/[0-9]*: mps=$expect" "$out" | head -8 | sed 's/^/#   /' # gsrun's own lines
    if [ -n "$victim" ] && [ -n "$t_start" ] && [ "$n" -eq "$np" ] && [ -n "$t_all" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "#   not started or left behind: ranks [$r] MPS [$m] agents [$a] dirs [$d]"
        [ -n "$r$m$a" ] && kill -KILL $r $m $a 2>/dev/null
    fi
}

for rep in $(seq "$reps"); do
    for c in $cases; do
        case $c in
        floor | plain) one_run "$c" - "$rep" ;;
        gsrun) for k in $kills; do one_run gsrun "$k" "$rep"; done ;;
        *) echo "many_ranks.sh: unknown case '$c' (floor, gsrun, plain)" >&2; exit 2 ;;
        esac
    done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
