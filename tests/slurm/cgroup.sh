#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: slurm/spank_gsrun.c, launcher/batch_main.c under proctrack/task cgroup
# Slurm with cgroups, as GPU sites run it: proctrack/cgroup, task/cgroup with
# ConstrainDevices=yes, 2 gres/gpu per host (device files the test makes).
# Each simulated host has cgroup trees of its own (cgroup namespace), of the
# machine's cgroup version: v2 (IgnoreSystemd=yes, no systemd) on a pure v2
# machine, else v1 (Slurm's cgroup/v2 refuses a machine with v1 hierarchies).
# Where gsrun's agent and MPS daemons land, that the step ends cleanly (the
# agent's teardown done before Slurm kills what is left in the step's
# cgroup, the step's cgroups removed, no node drained), the devices the
# daemons may open, scancel and SIGKILL. TAP output.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
. "$GS_TOP_SRCDIR/tests/slurm/lib.sh"

CGV=$(cluster_cgroup_can) || { echo "1..0 # SKIP cgroups for the simulated hosts: $CGV"; rm -rf "$TEST_TMP"; exit 0; }
[ -n "$(find /usr/lib* -name "cgroup_$CGV.so" 2>/dev/null | head -1)" ] ||
    { echo "1..0 # SKIP Slurm has no cgroup/$CGV plugin here"; rm -rf "$TEST_TMP"; exit 0; }
GSC_CGROUP=1
slurm_test_cluster
slurm_gpu_devices
cat >"$GSS_DIR/gres.conf" <<CONF
AutoDetect=off
NodeName=host[1-2] Name=gpu File=$GSS_DIR/dev/nvidia[0-1]
CONF
{
    echo "CgroupPlugin=cgroup/$CGV"
    echo "ConstrainDevices=yes"
    [ "$CGV" = v2 ] && echo "IgnoreSystemd=yes"
} >"$GSS_DIR/cgroup.conf"
GSS_EXTRA_CONF="GresTypes=gpu"
slurm_prolog_scripts 2
GSS_NODE_EXTRA="Gres=gpu:2"
GSS_PROCTRACK=proctrack/cgroup
GSS_TASK=task/cgroup
slurm_test_up
echo "# cgroup $CGV: $(tr '\n' ' ' <"$GSS_DIR/cgroup.conf")"
JOBENV="export OMPI_MCA_btl_vader_single_copy_mechanism=none LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=2;"
SRUN="srun -N2 -n8 --mpi=pmix"

# gsrun's processes on a host, one line each: "NAME CGROUP OPENS": the
# cgroup that Slurm's proctrack tracks (v1: freezer; v2: the one tree), and
# what a probe put into the process's device cgroup gets opening each "GPU"
# (no such device: allowed, as there is no driver; not permitted: denied).
ours_cgroups() { # ours_cgroups HOST
    on_host "$1" 'for p in /proc/[0-9]*; do
        e=$(readlink $p/exe) || continue
        case "$e" in *gsrun-agent | *nvidia-cuda-mps-control) ;; *) continue ;; esac
        if grep -q "^[0-9]*:freezer:" $p/cgroup; then
            cg=$(sed -n "s/^[0-9]*:freezer://p" $p/cgroup)
            d=/sys/fs/cgroup/devices$(sed -n "s/^[0-9]*:devices://p" $p/cgroup)
        else
            cg=$(sed -n "s/^0:://p" $p/cgroup)
            d=/sys/fs/cgroup$cg
        fi
        o=$(sh -c "echo \$\$ >$d/cgroup.procs && for g in 0 1; do
                cat '"$GSS_DIR"'/dev/nvidia\$g 2>&1 | grep -q \"not permitted\" && echo \$g:denied || echo \$g:open
            done" 2>&1 | tr "\n" " ")
        echo "${e##*/} $cg $o"
    done'
}
step_cgroups() { # step_cgroups HOST: Slurm cgroups of steps still there
    on_host "$1" 'find /sys/fs/cgroup -type d -name "step_*" 2>/dev/null'
}
# Runs STEP in the background until all 8 tasks have printed, then records
# gsrun's processes' cgroups on both hosts in $J/NAME.cg; then waits.
during() { # during NAME STEP...
    local name=$1 bg h
    shift
    slurm_wait_idle
    on_slurm host1 "$JOBENV exec $* >$J/$name.out 2>$J/$name.err" &
    bg=$!
    for _ in $(seq 200); do [ "$(grep -c '^rank=' $J/$name.out 2>/dev/null)" -ge 8 ] && break; sleep 0.1; done
    for h in $HOSTS; do ours_cgroups $h | sed "s/^/$h /"; done >$J/$name.cg
    wait $bg
}

# --- where the agent and the daemons land; a clean end ------------------------
during g1 "$SRUN --gpus-per-node=1 --mps $PROG --sleep 1500"
rc=$?
t_end=$(date +%s%N)
check "srun --mps -N2 -n8 --gpus-per-node=1 (proctrack/cgroup, task/cgroup): status 0, 8 tasks under MPS at 50%" \
    [ $rc -eq 0 -a "$(grep -c 'mps=1 .* pct=50 ' $J/g1.out)" -eq 8 ] || diag $J/g1.out $J/g1.err
diag $J/g1.cg
for h in $HOSTS; do
    # (the fake GPUs' UUIDs end in their index; with ConstrainDevices Slurm
    # numbers a job's GPUs from 0 in its variables)
    g=$(grep "host=$h " $J/g1.out | sed -n 's/.* uuid=GPU-fa4e[0-9-]*-00000000000\([0-9]\) .*/\1/p' | sort -u)
    n=$(grep -c "^$h " $J/g1.cg)
    check "  ... $h: the agent and the MPS daemon ($n processes) in the step's cgroup" \
        [ "$n" -ge 2 -a "$(grep "^$h " $J/g1.cg | grep -c -v "^$h [^ ]* /.*job_[0-9]*/step_0 ")" -eq 0 ]
    check "  ... $h: what they may open: the job's GPU ($g), not the other" \
        [ "$(grep "^$h " $J/g1.cg | grep -c -v "^$h [^ ]* [^ ]* $g:open $((1 - ${g:-0})):denied *$")" -eq 0 ]
done
check "  ... each node's agent ends MPS itself (not Slurm's kill of the step's cgroup)" \
    [ "$(grep -c 'GPU 0: MPS shut down in' $J/g1.err)" -eq 2 ] || diag $J/g1.err
check "  ... nothing left on any node" clean_within 2000 "$t_end"
check "  ... the step's cgroups removed on both nodes" \
    eval '[ -z "$(step_cgroups host1; step_cgroups host2)" ]' || { step_cgroups host1; step_cgroups host2; } | diag
# All nodes idle within 10 s: a node leaves "completing" once its epilog and
# step cleanup are done; a drained one never comes back.
nodes_idle() {
    for _ in $(seq 100); do
        [ "$(on_slurm host1 "sinfo -h -o %T" | sort -u)" = idle ] && return 0
        sleep 0.1
    done
    return 1
}
check "  ... no node drained or stuck completing; no kill of leftover step processes logged" \
    eval 'nodes_idle &&
        ! grep -h -i -E "not ending|unkillable|STEPD TERMINATED|left in the step" $GSS_DIR/slurmd-*.log' ||
    { on_slurm host1 "sinfo -N"; grep -h -i -E "error|kill" $GSS_DIR/slurmd-*.log | tail -20; } | diag

# --- the devices rules are in force (else the checks above prove little) ----
job dev "srun -w host1 -N1 -n1 --gpus-per-node=1 sh -c 'echo gpu=\${SLURM_STEP_GPUS:-\$SLURM_JOB_GPUS};
    for g in 0 1; do cat $GSS_DIR/dev/nvidia\$g 2>&1 | sed \"s/^/nvidia\$g: /\"; done'"
g=$(sed -n 's/^gpu=//p' $J/dev.out)
o=$((1 - ${g:-0}))
check "ConstrainDevices: a task of a 1-GPU job opens its GPU ($g: no such device) but not the other ($o: denied)" \
    eval 'grep -q "nvidia$g: .*No such device" $J/dev.out && grep -q "nvidia$o: .*Operation not permitted" $J/dev.out' ||
    diag $J/dev.out $J/dev.err

# --- gsrun srun; prolog mode ----------------------------------------------------
during gs "$GSRUN --mps-control=$FAKE_CONTROL $SRUN --gpus-per-node=1 $PROG --sleep 1500"
rc=$?
t_end=$(date +%s%N)
check "gsrun srun -N2 -n8 --gpus-per-node=1: status 0, 8 tasks under MPS at 50%" \
    [ $rc -eq 0 -a "$(grep -c 'mps=1 .* pct=50 ' $J/gs.out)" -eq 8 ] || diag $J/gs.out $J/gs.err
diag $J/gs.cg
check "  ... nothing left on any node" clean_within 2000 "$t_end"
touch $PROV
during pro "$SRUN --gpus-per-node=1 $PROG --sleep 1500"
rc=$?
t_end=$(date +%s%N)
check "prolog mode, srun -N2 -n8 --gpus-per-node=1: status 0, 8 tasks under MPS at 50%" \
    [ $rc -eq 0 -a "$(grep -c 'mps=1 .* pct=50 ' $J/pro.out)" -eq 8 ] || diag $J/pro.out $J/pro.err $GSS_DIR/prolog-*.log
diag $J/pro.cg
check "  ... nothing left on any node once the epilog ran" clean_within 5000 "$t_end"
# While another job holds GPU 0 of host1, a job gets GPU 1: the prolog's
# MPS must be on that one (the prolog runs outside the job's cgroup and
# could open either).
slurm_wait_idle
on_slurm host1 "srun -w host1 -N1 -n1 --gpus-per-node=1 sleep 4 >/dev/null 2>&1" &
hold=$!
for _ in $(seq 50); do [ -n "$(on_slurm host1 'squeue -h -t R')" ] && break; sleep 0.1; done
on_slurm host1 "$JOBENV srun -w host1 -N1 -n2 --gpus-per-node=1 --mpi=pmix $PROG >$J/pro1.out 2>$J/pro1.err"
rc=$?
wait $hold
check "prolog mode, a 1-GPU job beside one on GPU 0: status $rc, its 2 tasks under MPS on GPU 1" \
    [ $rc -eq 0 -a "$(grep -c "mps=1 .* pct=100 .* uuid=GPU-fa4e0000-0000-4000-8000-000000000001 " $J/pro1.out)" -eq 2 ] ||
    diag $J/pro1.out $J/pro1.err
check "  ... nothing left on any node once the epilogs ran" clean_within 5000 "$(date +%s%N)"
rm -f $PROV

# --- scancel, SIGKILL of a task ----------------------------------------------
kill_case "scancel of srun --mps (cgroups)" "$SRUN --gpus-per-node=1 --mps"
kill_case "SIGKILL of one task of srun --mps (cgroups)" "$SRUN --gpus-per-node=1 --mps"
check "  ... and no step cgroup left" eval '[ -z "$(step_cgroups host1; step_cgroups host2)" ]'
kill_case "scancel of gsrun srun (cgroups)" "$GSRUN --mps-control=$FAKE_CONTROL $SRUN --gpus-per-node=1"
check "  ... no node drained or stuck completing (idle within 10 s)" nodes_idle ||
    on_slurm host1 "sinfo -N" | diag
finish
