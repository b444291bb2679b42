#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: every front end with real MPS (GPU machine)
# GPU end-to-end test, for a machine with an NVIDIA GPU (not run by CI).
#
#   tests/gpu/e2e.sh [--component|--spank|--task-prolog|--prolog|--exec] [BUILD_DIR]
#                                    (BUILD_DIR defaults to ./_build; built if missing)
#
# Runs `gsrun -np 16 examples/mps_probe` with real MPS three times back to
# back; with --component, plain `mpirun -np 16 examples/mps_probe` with the
# Open MPI component (mca_rtc_gsrun) loaded from the build instead. There is
# no Slurm on the GPU machine, so the two Slurm front ends run under mpirun
# as Slurm would run them: --spank runs each rank through the SPANK plugin's
# hooks (tests/progs/spank_driver: task_init in the rank's process, then
# exec; the exit hook after the step), --task-prolog through
# gsrun-srun-task (as srun's task prolog: a child of the rank's process,
# whose "export" lines the rank applies before it execs the program);
# --prolog provisions the node for a "job" with `gsrun prolog`, runs each
# rank through `gsrun task-prolog` and ends with `gsrun epilog`; --exec puts
# the rank prefix `gsrun exec` in front of each rank under plain mpirun.
# Every rank must report MPS enabled and 200 / (its GPU's ranks) of the SMs (16 ranks: 12.5 % on
# one GPU, 25 % on two, 50 % on four) and
# a correct result; after each job no MPS process and no gsrun run dir may
# remain. With gsrun itself, one more run as MPMD (-np 8 : -np 8 of the
# same program). Ends with "N passed, N failed".
set -u
# Each check ends with nothing of MPS left: the shared servers' default
# linger (auto: 60 s) would keep them; the linger has checks of its own.
# The Open MPI component reads its own spelling of it.
export GSRUN_MPS_LINGER=${GSRUN_MPS_LINGER:-0}
export OMPI_MCA_rtc_gsrun_mps_linger=${OMPI_MCA_rtc_gsrun_mps_linger:-$GSRUN_MPS_LINGER}
top=$(cd "$(dirname "$0")/../.." && pwd)
front=gsrun
case "${1:-}" in
--component) front=component; shift ;;
--spank) front=spank; shift ;;
--task-prolog) front=task-prolog; shift ;;
--prolog) front=prolog; shift ;;
--exec) front=exec; shift ;;
esac
build=${1:-$top/_build}
np=${GSRUN_E2E_NP:-16}
runs=${GSRUN_E2E_RUNS:-3}
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }

. "$(dirname "$0")/procs.sh"
gpu_ready "$top" "$build"
if [ $front = component ]; then
    if [ ! -f "$build/ompi/mca/mca_rtc_gsrun.so" ]; then
        echo "Bail out! the Open MPI component was not built (configure found no ORTE headers)"
        exit 1
    fi
    launch() { mpirun --mca mca_base_component_path "SYS_DEFAULT:$build/ompi/mca" \
        --mca rtc_gsrun_agent "$build/launcher/gsrun-agent" --mca rtc_gsrun_mps on \
        --mca rtc_gsrun_verbose 1 "$@"; }
elif [ $front = spank ]; then
    [ -f "$build/slurm/gsrun_spank.so" ] && [ -x "$build/tests/progs/spank_driver" ] ||
        { echo "Bail out! the SPANK plugin or its driver was not built (make check builds the driver)"; exit 1; }
    spank=("$build/tests/progs/spank_driver" "$build/slurm/gsrun_spank.so"
        --arg "agent=$build/launcher/gsrun-agent" --arg verbose=1 --opt mps=on)
    launch() { # launch -np N --oversubscribe PROGRAM ARGS...
        local rc
        export SPANK_DRIVER_JOB=$$ SPANK_DRIVER_STEP=$((${SPANK_DRIVER_STEP:-0} + 1))
        mpirun -x SPANK_DRIVER_JOB -x SPANK_DRIVER_STEP "$1" "$2" "$3" "${spank[@]}" -- "${@:4}"
        rc=$?
        "${spank[@]}" --exit # the step's end: waits for the node agent
        return $rc
    }
elif [ $front = task-prolog ]; then
    launch() { # launch -np N --oversubscribe PROGRAM ARGS...
        local rc jd
        jd=$(mktemp -d "$GS_ROOT/gsrun.XXXXXX")
        GSRUN_JOB_DIR=$jd GSRUN_MPS=on GSRUN_VERBOSE=1 mpirun -x GSRUN_JOB_DIR -x GSRUN_MPS \
            -x GSRUN_VERBOSE "$1" "$2" "$3" sh -c 'export SLURM_LOCALID=$OMPI_COMM_WORLD_LOCAL_RANK \
            SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=$OMPI_COMM_WORLD_LOCAL_SIZE
            lines=$('"$build/launcher/gsrun-srun-task"') || exit $?
            eval "$lines"; exec "$0" "$@"' "${@:4}"
        rc=$?
        rmdir "$jd" 2>/dev/null # the agent removes its node dir, the job dir if empty
        return $rc
    }
elif [ $front = prolog ]; then
    launch() { # launch -np N --oversubscribe PROGRAM ARGS...
        local rc
        E2E_JOB=$((${E2E_JOB:-0} + 1))
        export SLURM_JOB_ID=e2e$$.$E2E_JOB SLURM_JOB_USER=$(id -un)
        "$build/launcher/gsrun" prolog -v --mps=on || return $?
        SLURM_STEP_ID=0 mpirun -x SLURM_JOB_ID -x SLURM_STEP_ID "$1" "$2" "$3" \
            sh -c 'export SLURM_LOCALID=$OMPI_COMM_WORLD_LOCAL_RANK SLURM_NODEID=0 \
            SLURM_STEP_TASKS_PER_NODE=$OMPI_COMM_WORLD_LOCAL_SIZE
            lines=$('"$build/launcher/gsrun"' task-prolog) || exit $?
            eval "$lines"; exec "$0" "$@"' "${@:4}"
        rc=$?
        "$build/launcher/gsrun" epilog -v
        return $rc
    }
elif [ $front = exec ]; then
    # The rank prefix under plain mpirun: no gsrun around the launcher.
    launch() { # launch -np N --oversubscribe PROGRAM ARGS...
        mpirun "$1" "$2" "$3" "$build/launcher/gsrun" exec -v --mps=on -- "${@:4}"
    }
else
    launch() { "$build/launcher/gsrun" -v --mps=on "$@"; }
fi
echo "# front end: $front"

nvidia-smi --query-gpu=name,uuid,driver_version,compute_mode,mig.mode.current --format=csv,noheader
# Live MPS processes, by executable (command lines and zombies do not count).
mps_procs() { live_procs 'nvidia-cuda-mps*'; }
before=$(mps_procs)
[ -z "$before" ] || echo "# note: MPS processes already running before the test: $before"
# The GPUs the job may use: the ranks are dealt over them in equal blocks
# (np a multiple of their count), each rank's share 200 / (its GPU's ranks).
# Otherwise the test pins itself to GPU 0 and says so.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    ngpu=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else
    ngpu=$(nvidia-smi -L | grep -c '^GPU ')
fi
if [ "$ngpu" -gt 1 ] && [ $((np % ngpu)) -ne 0 ]; then
    echo "# $np ranks do not divide over $ngpu GPUs: pinned to GPU 0 (CUDA_VISIBLE_DEVICES=0)"
    export CUDA_VISIBLE_DEVICES=0
    ngpu=1
fi
per_gpu=$((np / ngpu))
echo "# $ngpu GPU(s): $per_gpu ranks each"
expect_pct=$(awk -v n="$per_gpu" 'BEGIN { p = 200 / n; if (p > 100) p = 100; print p }')
# The whole GPU's SM count, from one rank without MPS; MPS gives a client
# its percentage of it, rounded down to whole TPCs (2 SMs).
total_sms=$("$build/launcher/gsrun" --mps=off -np 1 "$build/examples/mps_probe" --iters 1 2>/dev/null |
    sed -n 's/.* sms=\([0-9]*\) .*/\1/p' | head -1)
expect_sms=$(awk -v t="$total_sms" -v p="$expect_pct" 'BEGIN { print int(t * p / 100 / 2) * 2 }')
echo "# GPU has $total_sms SMs; at ${expect_pct}% each rank should see $expect_sms"

for i in $(seq 1 "$runs"); do
    out=$(mktemp)
    t0=$(date +%s.%N)
    launch -np "$np" --oversubscribe "$build/examples/mps_probe" --expect-mps --expect-sms "$expect_sms" >"$out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    sed "s/^/# run $i: /" "$out"
    [ $rc -eq 0 ] && ok "run $i: $front exit status 0 ($(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s)" \
        || notok "run $i: $front exit status $rc"
    n_mps=$(grep -c "mps=1 " "$out")
    [ "$n_mps" -eq "$np" ] && ok "run $i: $n_mps of $np ranks report MPS enabled" \
        || notok "run $i: only $n_mps of $np ranks report MPS enabled"
    n_ok=$(grep "result=ok" "$out" | grep -vc " FAIL")
    [ "$n_ok" -eq "$np" ] && ok "run $i: $n_ok ranks see $expect_sms SMs (${expect_pct}%) and a correct result" \
        || notok "run $i: only $n_ok ranks passed the SM-share and result checks"
    n_daemons=$(grep -cE "MPS control daemon [0-9]* on|shared MPS server [0-9]* \(control daemon [0-9]* on" "$out")
    [ "$n_daemons" -eq "$ngpu" ] && ok "run $i: exactly one MPS control daemon a GPU ($ngpu)" \
        || notok "run $i: $n_daemons MPS control daemons reported for $ngpu GPU(s)"
    # MPS's own log errors and any escalation of the stop come as problems.
    problems=$(grep -c "problem" "$out")
    [ "$problems" -eq 0 ] && ok "run $i: no problem reported (MPS logs, stop)" \
        || notok "run $i: $problems problem lines"
    after=$(mps_procs)
    [ "$after" = "$before" ] && ok "run $i: no MPS process left" || notok "run $i: MPS processes left: $after"
    left=$(ls -d "$GS_ROOT"/gsrun.* "$GS_ROOT"/gsrun-*/* /run/gsrun/* 2>/dev/null | tr '\n' ' ')
    [ -z "$left" ] && ok "run $i: no run directory left" || notok "run $i: left: $left"
    rm -f "$out"
done
# MPMD through gsrun (two app contexts, the same program: its -x list in
# each): every rank an MPS client with its share, as above.
if [ $front = gsrun ]; then
    out=$(mktemp)
    h=$((np / 2))
    probe=("$build/examples/mps_probe" --expect-mps --expect-sms "$expect_sms")
    launch -np "$h" --oversubscribe "${probe[@]}" : -np $((np - h)) "${probe[@]}" >"$out" 2>&1
    rc=$?
    sed "s/^/# mpmd: /" "$out" | grep -v ' rank [0-9]*/'
    n_ok=$(grep "mps=1 " "$out" | grep "result=ok" | grep -vc " FAIL")
    [ $rc -eq 0 ] && [ "$n_ok" -eq "$np" ] &&
        ok "MPMD (-np $h : -np $((np - h))): status 0, $n_ok of $np ranks MPS clients at ${expect_pct}% with a correct result" ||
        notok "MPMD (-np $h : -np $((np - h))): status $rc, $n_ok of $np ranks MPS clients with a correct result"
    rm -f "$out"
fi
echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
