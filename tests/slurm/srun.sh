#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: slurm/spank_gsrun.c, slurm/srun_task.c, launcher/batch_main.c (prolog mode)
# Slurm on the simulated cluster (tests/cluster/cluster.sh, tests/slurm/slurm.sh):
# real slurmctld and slurmd, srun --mpi=pmix, the stand-in MPS daemon and NVML.
# Both Slurm front ends: the SPANK plugin (srun --mps) and `gsrun srun`. TAP.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
. "$GS_TOP_SRCDIR/tests/slurm/lib.sh"

slurm_test_cluster
slurm_prolog_scripts 1
slurm_test_up
# What a user's login gives srun on host1, plus the test's stand-ins.
JOBENV="export OMPI_MCA_btl_vader_single_copy_mechanism=none LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1;"
SRUN="srun -N2 -n8 --mpi=pmix"

# Each host's 4 tasks: local ranks 0-3, under MPS at 50 % with a pipe dir of
# the given job dir pattern on the host (its own /dev/shm, or its own /run/gsrun
# where root made the dir).
tasks_ok() { # tasks_ok OUTFILE DIR-PATTERN
    local h lines
    for h in $HOSTS; do
        lines=$(grep "host=$h " "$1")
        [ "$(echo "$lines" | grep -c "local=[0-3]/4 mps=1 pipe=$2/$h/g0 .* pct=50 ")" -eq 4 ] || return 1
        [ "$(echo "$lines" | sed -n 's/.*local=\([0-9]*\).*/\1/p' | sort -u | wc -l)" -eq 4 ] || return 1
    done
}
daemons_per_host() { echo "$(grep -c "node host1: GPU 0 (.*MPS control daemon" $1) $(grep -c "node host2: GPU 0 (.*MPS control daemon" $1)"; }

# --- the SPANK plugin ----------------------------------------------------------
job plain "$SRUN $PROG"
check "no --mps (plugin loaded, no admin default): status 0, 8 tasks" \
    [ $? -eq 0 -a "$(grep -c '^rank=' $J/plain.out)" -eq 8 ]
check "  ... untouched: no MPS variable, no gsrun line" \
    [ "$(grep -c 'mps=- pipe=- log=- pct=-' $J/plain.out)" -eq 8 -a ! -s $J/plain.err ]

job spank "$SRUN --mps $PROG"
rc=$?
check "srun --mps -N2 -n8: status 0, 8 tasks" [ $rc -eq 0 -a "$(grep -c '^rank=' $J/spank.out)" -eq 8 ]
check "  ... every task: its local rank of 4, MPS at 50%, its host's own pipe dir" \
    tasks_ok $J/spank.out '/run/gsrun/slurm-[0-9]*\.0' || diag $J/spank.out
check "  ... one MPS control daemon per node (host1 host2: $(daemons_per_host $J/spank.err))" \
    [ "$(daemons_per_host $J/spank.err)" = "1 1" ] || diag $J/spank.err
check "  ... each node's agent reports the end of its 4 tasks" \
    [ "$(grep -Ec '(served 4 of 4 ranks|no rank of the 4 used the GPU [^;]*); stopping MPS: every rank has exited' $J/spank.err)" -eq 2 ]
# srun returns once the tasks have ended; slurmstepd runs the plugin's exit
# hook (which waits for the agent) after that: once seen still there when
# srun had returned, on a loaded machine (1 run in 9).
check "  ... nothing left on any node within 2 s of srun's return" clean_within 2000 "$(date +%s%N)"

job pct "$SRUN --mps=on --mps-percentage=30 $PROG"
check "srun --mps=on --mps-percentage=30: every task at 30%" \
    [ $? -eq 0 -a "$(grep -c 'mps=1 .*pct=30 ' $J/pct.out)" -eq 8 ]

# Exit status as plain srun's.
for case in "--exit 5 3" "--kill 6"; do
    job st "$SRUN --mps $PROG $case"
    rc=$?
    job stp "$SRUN $PROG $case"
    prc=$?
    check "srun --mps, a task fails ($case): status $rc, plain srun $prc" [ $rc -eq $prc -a $rc -ne 0 ]
    check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"
done

kill_case "scancel of srun --mps" "$SRUN --mps"
kill_case "SIGKILL of one task of srun --mps" "$SRUN --mps"

# --- bad input: a message in the job's stderr, auto runs, on fails ---------------
job bad "$SRUN --mps=bogus $PROG"
check "srun --mps=bogus: status 0, the step ran without MPS" \
    [ $? -eq 0 -a "$(grep -c 'mps=- ' $J/bad.out)" -eq 8 ]
check "  ... each node says why" \
    [ "$(grep -c "warning: srun --mps: invalid value 'bogus'; accepted: auto, on or off" $J/bad.err)" -eq 2 ] || diag $J/bad.err
job badpct "$SRUN --mps --mps-percentage=150 $PROG"
rc=$?
check "srun --mps --mps-percentage=150: status 0, no MPS, a message" eval \
    '[ $rc -eq 0 -a "$(grep -c "mps=- " $J/badpct.out)" -eq 8 ] && grep -q "warning: srun --mps-percentage: .*150" $J/badpct.err' ||
    diag $J/badpct.err
job badpcton "$SRUN --mps=on --mps-percentage=150 $PROG"
rc=$?
check "srun --mps=on --mps-percentage=150: fails (status $rc), no task ran the program" eval \
    '[ $rc -ne 0 -a "$(grep -c "^rank=" $J/badpcton.out)" -eq 0 ] && grep -q "error: srun --mps-percentage: .*150" $J/badpcton.err' ||
    diag $J/badpcton.err
JOBENV_SAVE=$JOBENV
JOBENV="export OMPI_MCA_btl_vader_single_copy_mechanism=none LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=0;"
job nogpu "$SRUN --mps $PROG"
check "no GPU, srun --mps (auto): status 0, 8 tasks without MPS" \
    [ $? -eq 0 -a "$(grep -c 'mps=0 pipe=- ' $J/nogpu.out)" -eq 8 ] || diag $J/nogpu.err
check "  ... each node says why" [ "$(grep -c "host[12]: no NVIDIA GPU found on this node" $J/nogpu.err)" -ge 2 ]
# A failed step must end at once: the agent that keeps the error for the
# node's ranks must neither hold a task's stderr nor be waited for by the
# plugin's exit hook (both hung the step until Slurm's time limit once).
slurm_wait_idle
t0=$(date +%s%N)
job nogpuon "timeout 30 $SRUN --mps=on $PROG"
rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
check "no GPU, srun --mps=on: fails (status $rc) with the reason" eval \
    '[ $rc -ne 0 -a $rc -ne 124 -a "$(grep -c "^rank=" $J/nogpuon.out)" -eq 0 ] && grep -qi "error: .*GPU" $J/nogpuon.err' ||
    diag $J/nogpuon.err
check "  ... and srun returns within 5 s ($ms ms)" [ $ms -lt 5000 ]
JOBENV=$JOBENV_SAVE
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"
# A node without the control program (the admin's path is wrong).
slurm_plugstack "optional $B/slurm/gsrun_spank.so agent=$B/launcher/gsrun-agent control=/nonexistent/nvidia-cuda-mps-control"
job noctl "$SRUN --mps $PROG"
rc=$?
check "no control program, srun --mps (auto): status 0, no MPS, each node says why" eval \
    '[ $rc -eq 0 -a "$(grep -c "mps=0 pipe=- " $J/noctl.out)" -eq 8 ] &&
     [ "$(grep -c "MPS control program .*/nonexistent/nvidia-cuda-mps-control.* does not exist" $J/noctl.err)" -eq 2 ]' ||
    diag $J/noctl.err
slurm_wait_idle
t0=$(date +%s%N)
job noctlon "timeout 30 $SRUN --mps=on $PROG"
rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
check "no control program, srun --mps=on: fails (status $rc), names the program" eval \
    '[ $rc -ne 0 -a $rc -ne 124 ] && grep -q "/nonexistent/nvidia-cuda-mps-control" $J/noctlon.err' || diag $J/noctlon.err
check "  ... and srun returns within 5 s ($ms ms)" [ $ms -lt 5000 ]
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"
slurm_plugstack "$PLUG"
check "slurmd is not wedged: both nodes idle" [ "$(on_slurm host1 "sinfo -h -t idle -o %D")" = 2 ]

# --- gsrun srun ---------------------------------------------------------------
# Two MPS servers on each node's GPU (2 clients each, 4 tasks per node). On
# idle nodes, as every job after a failed step here: this first job after the
# failed --mps=on steps and the plugstack's change failed twice in about ten
# full runs (a task's segfault in Open MPI's start-up, its shared-memory
# segment then missing for its neighbours; gsrun's agents served and stopped
# normally); cause not found.
slurm_wait_idle
job gs "$GSRUN -v --mps-control=$FAKE_CONTROL --mps-clients-per-server=2 $SRUN $PROG --mps-client"
rc=$?
check "gsrun --mps-clients-per-server=2 srun -N2 -n8: status 0, every task an MPS client" \
    [ $rc -eq 0 -a "$(grep -c 'client=ok' $J/gs.out)" -eq 8 ] || diag $J/gs.err
check "  ... two servers on each node's GPU" \
    [ "$(grep -c "node host1: GPU 0 server [01] (.*MPS control daemon" $J/gs.err) $(grep -c "node host2: GPU 0 server [01] (.*MPS control daemon" $J/gs.err)" = "2 2" ] ||
    diag $J/gs.err
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"

job g "$GSRUN -v --mps-control=$FAKE_CONTROL $SRUN $PROG"
rc=$?
check "gsrun srun -N2 -n8: status 0, 8 tasks" [ $rc -eq 0 -a "$(grep -c '^rank=' $J/g.out)" -eq 8 ] || diag $J/g.err
check "  ... every task: its local rank of 4, MPS at 50%, its host's own pipe dir" \
    tasks_ok $J/g.out '/dev/shm/gsrun\.[A-Za-z0-9]*' || diag $J/g.out
check "  ... one MPS control daemon per node (host1 host2: $(daemons_per_host $J/g.err))" \
    [ "$(daemons_per_host $J/g.err)" = "1 1" ] || diag $J/g.err
check "  ... the summary names both nodes" \
    [ "$(grep -Ec 'served 4 of 4 ranks|no rank of the 4 used the GPU' $J/g.err)" -eq 2 ]
check "  ... nothing left on any node within 2 s" clean_within 2000 "$(date +%s%N)"
# --- the rank prefix under plain srun (no plugin, no wrapper) ---------------------
job x "$SRUN $GSRUN exec -v --mps-control=$FAKE_CONTROL -- $PROG"
rc=$?
check "srun -N2 -n8 gsrun exec (the rank prefix): status 0, 8 tasks" \
    [ $rc -eq 0 -a "$(grep -c '^rank=' $J/x.out)" -eq 8 ] || diag $J/x.err
check "  ... every task: its local rank of 4, MPS at 50%, a pipe dir in the user's base on its host" \
    tasks_ok $J/x.out '/dev/shm/gsrun-[0-9]*/exec-[0-9a-f]*-[^/]*' || diag $J/x.out
check "  ... one MPS control daemon per node (host1 host2: $(daemons_per_host $J/x.err))" \
    [ "$(daemons_per_host $J/x.err)" = "1 1" ] || diag $J/x.err
check "  ... no job dir left in either host's base within 2 s" \
    eval 'OURS_FILES="file /dev/shm/gsrun-" OURS_HOSTS="host[12]" clean_within 2000 "$(date +%s%N)" ours'
check "  ... nothing left on any node within 2 s" clean_within 2000 "$(date +%s%N)"
# gsrun on a node with no task of the step (a login node, say).
job gw "$GSRUN -v --mps-control=$FAKE_CONTROL srun -N1 -n4 -w host2 --mpi=pmix $PROG"
rc=$?
check "gsrun srun, every task on another node: status $rc, 4 tasks under MPS at 50% on host2" \
    [ $rc -eq 0 -a "$(grep -c 'host=host2 ' $J/gw.out)" -eq 4 -a "$(grep -c 'mps=1 .*pct=50 ' $J/gw.out)" -eq 4 ] ||
    diag $J/gw.out $J/gw.err
check "  ... host2's report came back, nothing left on any node" eval \
    'grep -Eq "node host2: (served 4 of 4 ranks|no rank of the 4 used the GPU)" $J/gw.err && clean_within 2000 "$(date +%s%N)"' || diag $J/gw.err
job gq "$GSRUN --mps-control=$FAKE_CONTROL $SRUN $PROG"
check "gsrun srun without -v: no gsrun line" [ $? -eq 0 -a ! -s $J/gq.err ] || diag $J/gq.err
job gst "$GSRUN --mps-control=$FAKE_CONTROL $SRUN $PROG --exit 6 4"
rc=$?
check "gsrun srun, a task exits 4: status $rc (plain srun: 4)" [ $rc -eq 4 ]
# A task prolog of the user's own still runs, before gsrun's.
echo '#!/bin/sh
echo "export USER_PROLOG=ran"' >$J/user_prolog.sh
chmod +x $J/user_prolog.sh
job gup "SLURM_TASK_PROLOG=$J/user_prolog.sh $GSRUN --mps-control=$FAKE_CONTROL $SRUN sh -c 'echo \$USER_PROLOG \$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'"
check "gsrun srun with the user's SLURM_TASK_PROLOG: both ran in every task" \
    [ "$(grep -c '^ran 50$' $J/gup.out)" -eq 8 ] || diag $J/gup.out $J/gup.err
kill_case "scancel of gsrun srun" "$GSRUN --mps-control=$FAKE_CONTROL $SRUN"
kill_case "SIGKILL of one task of gsrun srun" "$GSRUN --mps-control=$FAKE_CONTROL $SRUN"
check "the nodes are idle at the end" [ "$(on_slurm host1 "sinfo -h -t idle -o %D")" = 2 ]

# --- an ordinary user (nobody): MPS runs as the job's user ----------------------
# The cluster's files must be readable for that user (slurm.conf), and the
# job's output needs a directory it may write.
chmod 711 "$GSC_DIR"
chmod 755 "$GSS_DIR"
chmod 644 "$GSS_DIR/slurm.conf" "$GSS_DIR/plugstack.conf"
U=$GSS_DIR/user
mkdir -p $U && chmod 1777 $U
as_nobody() { # as_nobody NAME CMD: CMD on host1 as nobody, output in $U/NAME.{out,err}
    local name=$1
    shift
    on_slurm host1 "$JOBENV exec setpriv --reuid=65534 --regid=65534 --clear-groups sh -c '$* >$U/$name.out 2>$U/$name.err'"
}
daemon_uids() { # the uids of the MPS control daemons on both hosts, during a job
    local h
    for h in $HOSTS; do on_host $h "ps -o uid= -C nvidia-cuda-mps-control | sort -u | tr -d ' '"; done | sort -u | tr '\n' ' '
}
user_case() { # user_case WHAT FRONT
    local what=$1 front=$2 bg uids=""
    slurm_wait_idle
    rm -f $U/u.out $U/u.err # the last case's lines must not count for this one
    as_nobody u "$front $PROG --sleep 3000" &
    bg=$!
    for _ in $(seq 100); do
        [ "$(cat $U/u.out 2>/dev/null | grep -c '^rank=')" -ge 8 ] && uids=$(daemon_uids) && [ -n "$uids" ] && break
        sleep 0.05
    done
    wait $bg
    local rc=$?
    check "$what as nobody: status $rc, 8 tasks under MPS at 50%" \
        [ $rc -eq 0 -a "$(grep -c 'mps=1 .*pct=50 ' $U/u.out)" -eq 8 ] || diag $U/u.out $U/u.err
    check "  ... the MPS daemons ran as the job's user (uids: $uids)" [ "$uids" = "65534 " ]
    check "  ... both nodes' reports reached the job's stderr" \
        [ "$(grep -Ec 'served 4 of 4 ranks|no rank of the 4 used the GPU' $U/u.err)" -eq 2 ] || diag $U/u.err
    check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"
}
user_case "srun --mps" "$SRUN --mps"
user_case "gsrun -v srun" "$GSRUN -v --mps-control=$FAKE_CONTROL $SRUN"

# --- prolog mode: gsrun prolog / epilog / task-prolog in slurm.conf ---------------
touch $PROV
job pro "$SRUN $PROG"
rc=$?
check "prolog mode, plain srun -N2 -n8: status 0, 8 tasks" [ $rc -eq 0 -a "$(grep -c '^rank=' $J/pro.out)" -eq 8 ] ||
    diag $J/pro.err $GSS_DIR/prolog-*.log
check "  ... every task: its local rank of 4, MPS at 50%, the job's pipe dir on its host" \
    tasks_ok $J/pro.out '/run/gsrun/job-[0-9]*' || diag $J/pro.out
pro_clean() { # the epilog runs after the job, on its own time
    clean_within 5000 "$(date +%s%N)"
}
check "  ... nothing left on any node once the epilog ran" pro_clean
check "  ... one MPS control daemon per node, reported by each epilog" \
    [ "$(cat $GSS_DIR/epilog-host1.log | grep -c 'MPS control daemon')" -eq 1 -a \
      "$(cat $GSS_DIR/epilog-host2.log | grep -c 'MPS control daemon')" -eq 1 ] || diag $GSS_DIR/epilog-*.log
# One job, two steps of different sizes: the share is each step's.
on_slurm host1 "$JOBENV sbatch -N2 -n8 -o $J/batch.out --wrap '$SRUN $PROG; srun -N2 -n4 --mpi=pmix $PROG; srun -N1 -n1 --mpi=pmix $PROG' >/dev/null"
for _ in $(seq 150); do [ -z "$(on_slurm host1 'squeue -h')" ] && break; sleep 0.1; done
check "a batch job of 3 steps (8, 4, 1 tasks): 13 tasks ran" [ "$(grep -c '^rank=' $J/batch.out)" -eq 13 ] ||
    diag $J/batch.out
check "  ... 8 tasks at 50%, 4 at 100% (2 per GPU), 1 without MPS (alone on its GPU)" \
    [ "$(grep -c 'size=8 .*mps=1 .*pct=50 ' $J/batch.out)" -eq 8 -a \
      "$(grep -c 'size=4 .*mps=1 .*pct=100 ' $J/batch.out)" -eq 4 -a \
      "$(grep -c 'size=1 .*mps=- ' $J/batch.out)" -eq 1 ] || diag $J/batch.out
check "  ... nothing left once the epilog ran" pro_clean
# The commands themselves, as an admin's script calls them: idempotent.
P="export LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 SLURM_JOB_ID=4711 SLURM_JOB_USER=root GSRUN_AGENT_ENV='FAKE_*';"
on_slurm host2 "$P $GSRUN prolog --mps-control=$FAKE_CONTROL && $GSRUN prolog --mps-control=$FAKE_CONTROL"
rc=$?
check "gsrun prolog twice: status $rc, one MPS control daemon ($(cluster_count_exe host2 "$FAKE_CONTROL"))" \
    [ $rc -eq 0 -a "$(cluster_count_exe host2 "$FAKE_CONTROL")" -eq 1 ]
on_slurm host2 "$GSRUN status" >$J/st.out 2>&1
check "  ... gsrun status shows the job, MPS on, its daemon" eval \
    'grep -q "^job job-4711 (uid 0): agent [0-9]*, .*MPS on" $J/st.out && grep -q "GPU 0 .*daemon [0-9]* on core" $J/st.out' ||
    diag $J/st.out
on_slurm host2 "$P SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_TASKS_PER_NODE=3 $GSRUN task-prolog" >$J/tp.out 2>&1
check "gsrun task-prolog for a batch script (no step): status 0, nothing printed" [ $? -eq 0 -a ! -s $J/tp.out ]
on_slurm host2 "$P SLURM_STEP_ID=0 SLURM_LOCALID=1 SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=3 $GSRUN task-prolog" >$J/tp.out 2>&1
check "gsrun task-prolog for task 1 of 3: export lines with 66.6667%" \
    grep -q "^export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=66.6667$" $J/tp.out || diag $J/tp.out
on_slurm host2 "$P $GSRUN epilog && $GSRUN epilog"
rc=$?
check "gsrun epilog twice: status $rc, nothing left on host2" eval '[ $rc -eq 0 ] && [ -z "$(left_on host2)" ]'
on_slurm host2 "$P FAKE_NVML_GPUS=0 $GSRUN prolog --mps=on --mps-control=$FAKE_CONTROL" 2>$J/p69.err
rc=$?
check "gsrun prolog --mps=on without a GPU: status $rc (69), says why, nothing left" eval \
    '[ $rc -eq 69 ] && grep -q "error: .*GPU" $J/p69.err && [ -z "$(left_on host2)" ]' || diag $J/p69.err
on_slurm host2 "$P FAKE_NVML_GPUS=0 $GSRUN prolog --mps-control=$FAKE_CONTROL" 2>$J/p0.err
rc=$?
check "gsrun prolog (auto) without a GPU: status $rc (0), says the job runs without MPS" eval \
    '[ $rc -eq 0 ] && grep -q "without MPS" $J/p0.err' || diag $J/p0.err
on_slurm host2 "$P $GSRUN epilog"
check "  ... its epilog leaves nothing" [ -z "$(left_on host2)" ]
rm -f $PROV

echo "1..$T_N"
rm -rf "$TEST_TMP"
[ $T_FAIL -eq 0 ]
