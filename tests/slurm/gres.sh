#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/gpu.c (CUDA_VISIBLE_DEVICES from Slurm), runtime/plan/policy.c (site MPS)
# Slurm with GPUs as gres/gpu (2 per host, device files the test makes, the
# fake NVML giving 2 GPUs): Slurm sets CUDA_VISIBLE_DEVICES for each job, and
# gsrun's MPS must serve only the job's GPUs. Jobs with --gpus-per-node=1 and
# 2 through the SPANK plugin (srun --mps), two jobs on one node at once on
# different GPUs, `gsrun srun`, and Slurm's own gres/mps (a share of an MPS
# daemon the site runs: gsrun stands aside). TAP output.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
. "$GS_TOP_SRCDIR/tests/slurm/lib.sh"

slurm_test_cluster
slurm_gpu_devices
cat >"$GSS_DIR/gres.conf" <<CONF
AutoDetect=off
NodeName=host[1-2] Name=gpu File=$GSS_DIR/dev/nvidia[0-1]
NodeName=host[1-2] Name=mps Count=200 File=$GSS_DIR/dev/nvidia[0-1]
CONF
GSS_EXTRA_CONF="GresTypes=gpu,mps"
GSS_NODE_EXTRA="Gres=gpu:2,mps:200"
slurm_test_up
JOBENV="export OMPI_MCA_btl_vader_single_copy_mechanism=none LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=2;"
U0=GPU-fa4e0000-0000-4000-8000-000000000000
U1=GPU-fa4e0000-0000-4000-8000-000000000001

# --- one GPU of two per node ----------------------------------------------------
job g1 "srun -N2 -n8 --gpus-per-node=1 --mpi=pmix --mps $PROG"
rc=$?
check "srun --mps -N2 -n8 --gpus-per-node=1: status 0, 8 tasks" \
    [ $rc -eq 0 -a "$(grep -c '^rank=' $J/g1.out)" -eq 8 ] || diag $J/g1.err
for h in $HOSTS; do
    lines=$(grep "host=$h " $J/g1.out)
    g=$(echo "$lines" | sed -n 's/.* slurm_gpus=\([^ ]*\) .*/\1/p' | sort -u)
    check "  ... $h: Slurm gave the job one GPU ($g); its 4 tasks under MPS at 50% on that GPU" \
        [ "$(echo "$lines" | grep -c "mps=1 pipe=/run/gsrun/slurm-[0-9.]*/$h/g0 .* pct=50 .* uuid=GPU-fa4e0000-0000-4000-8000-00000000000$g ")" -eq 4 ] ||
        echo "$lines" | diag
done
check "  ... one MPS control daemon per node (the job's GPU only)" \
    [ "$(grep -c "MPS control daemon [0-9]* on" $J/g1.err)" -eq 2 ] || diag $J/g1.err
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"

# --- both GPUs ----------------------------------------------------------------
job g2 "srun -N2 -n8 --gpus-per-node=2 --mpi=pmix --mps $PROG"
rc=$?
check "srun --mps -N2 -n8 --gpus-per-node=2: status 0, 8 tasks" \
    [ $rc -eq 0 -a "$(grep -c '^rank=' $J/g2.out)" -eq 8 ] || diag $J/g2.err
for h in $HOSTS; do
    lines=$(grep "host=$h " $J/g2.out)
    check "  ... $h: 2 tasks on each GPU, MPS at 100% (200/2)" \
        [ "$(echo "$lines" | grep -c "mps=1 .* pct=100 .* uuid=$U0 ")" -eq 2 -a \
        "$(echo "$lines" | grep -c "mps=1 .* pct=100 .* uuid=$U1 ")" -eq 2 ] || echo "$lines" | diag
done
check "  ... one MPS control daemon per GPU (4)" \
    [ "$(grep -c "MPS control daemon [0-9]* on" $J/g2.err)" -eq 4 ] || diag $J/g2.err
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"

# --- two jobs on one node at once, a GPU each ---------------------------------
slurm_wait_idle
t0=$(date +%s%N)
for k in a b; do
    on_slurm host1 "$JOBENV exec srun -w host1 -N1 -n2 --gpus-per-node=1 --mpi=pmix --mps $PROG --sleep 2000 \
        >$J/two$k.out 2>$J/two$k.err" &
    eval "pid_$k=\$!"
done
wait $pid_a
ra=$?
wait $pid_b
rb=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "two jobs on host1 at once, --gpus-per-node=1 each: status $ra, $rb" [ $ra -eq 0 -a $rb -eq 0 ] ||
    diag $J/twoa.err $J/twob.err
ua=$(sed -n 's/.* uuid=\([^ ]*\) .*/\1/p' $J/twoa.out | sort -u)
ub=$(sed -n 's/.* uuid=\([^ ]*\) .*/\1/p' $J/twob.out | sort -u)
ga=$(sed -n 's/.* slurm_gpus=\([^ ]*\) .*/\1/p' $J/twoa.out | sort -u)
gb=$(sed -n 's/.* slurm_gpus=\([^ ]*\) .*/\1/p' $J/twob.out | sort -u)
check "  ... Slurm gave them GPUs $ga and $gb; each job's 2 tasks on its own ($ua, $ub)" \
    [ "$(echo "$ua" | wc -w)" -eq 1 -a "$(echo "$ub" | wc -w)" -eq 1 -a -n "$ua" -a "$ua" != "$ub" -a \
    "$ua" = "GPU-fa4e0000-0000-4000-8000-00000000000$ga" -a "$ub" = "GPU-fa4e0000-0000-4000-8000-00000000000$gb" ]
da=$(sed -n 's|.* pipe=\(/run/gsrun/[^/]*\)/.*|\1|p' $J/twoa.out | sort -u)
db=$(sed -n 's|.* pipe=\(/run/gsrun/[^/]*\)/.*|\1|p' $J/twob.out | sort -u)
check "  ... each under MPS at 100% in its own run dir ($da, $db)" \
    [ "$(grep -c 'mps=1 .* pct=100 ' $J/twoa.out)" -eq 2 -a "$(grep -c 'mps=1 .* pct=100 ' $J/twob.out)" -eq 2 -a \
    -n "$da" -a -n "$db" -a "$da" != "$db" ]
check "  ... each job's one daemon" \
    [ "$(grep -c "MPS control daemon [0-9]* on" $J/twoa.err)" -eq 1 -a "$(grep -c "MPS control daemon [0-9]* on" $J/twob.err)" -eq 1 ]
check "  ... side by side: both done in $ms ms, each task sleeping 2 s (one after the other: over 4 s)" \
    [ $ms -lt 4000 ]
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"

# --- gsrun srun, one GPU per node ---------------------------------------------
job gs "$GSRUN --mps-control=$FAKE_CONTROL srun -N2 -n8 --gpus-per-node=1 --mpi=pmix $PROG"
rc=$?
check "gsrun srun -N2 -n8 --gpus-per-node=1: status 0, every task under MPS at 50%" \
    [ $rc -eq 0 -a "$(grep -c 'mps=1 .* pct=50 ' $J/gs.out)" -eq 8 ] || diag $J/gs.err
check "  ... each node's 4 tasks on the one GPU Slurm gave it" \
    [ "$(for h in $HOSTS; do grep "host=$h " $J/gs.out | sed -n 's/.* uuid=\([^ ]*\) .*/\1/p' | sort -u | wc -l; done | tr '\n' ' ')" = "1 1 " ]
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"

# --- Slurm's own gres/mps: a share of the site's MPS daemon -------------------
# Slurm gives the step its share as CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
# expects the site's prolog to run the daemon: gsrun starts no second one on
# those GPUs and leaves the share as Slurm set it.
job mp0 "srun -w host1 -N1 -n2 --gres=mps:50 --mpi=pmix $PROG"
share=$(sed -n 's/.* pct=\([^ ]*\) .*/\1/p' $J/mp0.out | sort -u)
job mp "srun -w host1 -N1 -n2 --gres=mps:50 --mpi=pmix --mps $PROG"
rc=$?
check "srun --mps --gres=mps:50: status 0, both tasks run, without gsrun's MPS" \
    [ $rc -eq 0 -a "$(grep -c '^rank=.* mps=0 pipe=- ' $J/mp.out)" -eq 2 ] || diag $J/mp.out $J/mp.err
check "  ... with Slurm's share as Slurm set it ($share, as without --mps)" \
    [ -n "$share" -a "$share" != "-" -a "$(grep -c " pct=$share " $J/mp.out)" -eq 2 ]
check "  ... and one notice saying why (and the verbose plan line)" \
    [ "$(grep -c "node host1: Slurm's gres/mps gives this job a share of the site's MPS daemon" $J/mp.err)" -eq 1 ] ||
    diag $J/mp.err
check "  ... no MPS daemon of gsrun's" [ "$(grep -c "MPS control daemon [0-9]* on" $J/mp.err)" -eq 0 ]
job mpon "srun -w host1 -N1 -n2 --gres=mps:50 --mpi=pmix --mps=on $PROG"
rc=$?
check "srun --mps=on --gres=mps:50: refused (status $rc), the line names gres/mps and what to ask for" \
    eval '[ $rc -ne 0 ] && grep -q "starts no second one; ask Slurm for GPUs" $J/mpon.err' || diag $J/mpon.err
check "  ... nothing left on any node" clean_within 2000 "$(date +%s%N)"
finish
