#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: slurm/spank_gsrun.c, runtime/batch/provision.c, runtime/rank/task.c
# The SPANK plugin's hooks run by tests/progs/spank_driver (no Slurm): each
# rank of an mpirun job plays a Slurm task (task_init, then exec), and the
# step's end runs the exit hook. Stand-in MPS daemon and NVML. The same
# driver runs the plugin against real MPS in tests/gpu/slurm_path.sh. TAP.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

PLUGIN=$B/slurm/gsrun_spank.so
DRIVER=$B/tests/progs/spank_driver
if [ ! -f "$PLUGIN" ] || [ ! -x "$DRIVER" ]; then
    echo "1..0 # SKIP the SPANK plugin was not built (no slurm/spank.h: libslurm-dev)"
    rm -rf "$TEST_TMP"
    exit 0
fi
export LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1
export SPANK_DRIVER_JOB=77 SPANK_DRIVER_STEP=3
# The step dirs' base (root's /run/gsrun on a real node): made by the
# plugin, as root, or as the user when the test runs as one.
BASE=$TEST_TMP/base
ARGS="--arg agent=$B/launcher/gsrun-agent --arg control=$FAKE_CONTROL --arg rundir=$BASE"
node=$(hostname | cut -d. -f1)

mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -x SPANK_DRIVER_JOB -x SPANK_DRIVER_STEP -np 4 \
    "$DRIVER" "$PLUGIN" $ARGS --arg verbose=1 --opt mps=on -- "$PROG" >"$OUT" 2>"$ERR"
check "4 tasks through the plugin's task_init: status 0, each under MPS at 50% in the step's dir" \
    [ $? -eq 0 -a "$(grep -c "mps=1 pipe=$BASE/slurm-77.3/$node/g0 .*pct=50 " "$OUT")" -eq 4 ] ||
    diag "$OUT" "$ERR"
t0=$(date +%s%N)
"$DRIVER" "$PLUGIN" $ARGS --opt mps=on --exit
ms=$((($(date +%s%N) - t0) / 1000000))
check "the exit hook returns once the agent is done ($ms ms), nothing left, the step's dir removed" \
    [ $ms -lt 3000 -a -z "$(leftover_procs)" -a -z "$(run_files)" -a -z "$(ls -A "$BASE")" ]
check "  ... one MPS control daemon, reported to the first task's stderr" \
    [ "$(grep -c "MPS control daemon [0-9]* on" "$ERR")" -eq 1 ]

SPANK_DRIVER_STEP=9 mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -x SPANK_DRIVER_JOB -x SPANK_DRIVER_STEP \
    -np 5 "$DRIVER" "$PLUGIN" $ARGS --arg clients_per_server=2 --arg verbose=1 --opt mps=on -- \
    "$PROG" --mps-client >"$OUT" 2>"$ERR"
rc=$?
SPANK_DRIVER_STEP=9 "$DRIVER" "$PLUGIN" $ARGS --opt mps=on --exit
check "5 tasks, clients_per_server=2: three servers, every task a client, nothing left" \
    [ $rc -eq 0 -a "$(grep -c 'client=ok' "$OUT")" -eq 5 -a "$(grep -c "MPS control daemon [0-9]* on" "$ERR")" -eq 3 \
      -a -z "$(leftover_procs)" -a -z "$(ls -A "$BASE")" ] || diag "$ERR"

mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -np 4 "$DRIVER" "$PLUGIN" $ARGS -- "$PROG" >"$OUT" 2>"$ERR"
check "no --mps and no admin default: untouched" \
    [ $? -eq 0 -a "$(grep -c ' mps=- pipe=- ' "$OUT")" -eq 4 -a ! -s "$ERR" ]
mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -np 4 "$DRIVER" "$PLUGIN" $ARGS --arg mps=auto \
    --arg percentage=25 -- "$PROG" >"$OUT" 2>"$ERR"
check "the admin's defaults (mps=auto percentage=25): every task at 25%" \
    [ $? -eq 0 -a "$(grep -c ' mps=1 .*pct=25 ' "$OUT")" -eq 4 ]
mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -np 2 "$DRIVER" "$PLUGIN" $ARGS --arg mps=sometimes \
    -- "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "a bad plugstack.conf value: the step runs without MPS and says why" eval \
    '[ $rc -eq 0 ] && grep -q "gsrun_spank.so in plugstack.conf: invalid value .sometimes." "$ERR"' ||
    diag "$ERR"
# As root: a step dir planted under the step's name (a stale one of another
# uid, or a link to another user's dir) is replaced, never used or followed.
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$TEST_TMP/victim" && echo keep >"$TEST_TMP/victim/file"
    mkdir "$BASE/slurm-77.4" && chown 65534:65534 "$BASE/slurm-77.4"
    ln -s "$TEST_TMP/victim" "$BASE/slurm-77.5"
    for st in 4 5; do
        SPANK_DRIVER_STEP=$st mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -x SPANK_DRIVER_JOB -x SPANK_DRIVER_STEP \
            -np 2 "$DRIVER" "$PLUGIN" $ARGS --opt mps=on -- "$PROG" >"$OUT" 2>"$ERR"
        rc=$?
        SPANK_DRIVER_STEP=$st "$DRIVER" "$PLUGIN" $ARGS --opt mps=on --exit
        check "a planted $([ $st = 4 ] && echo "dir of uid 65534" || echo "link") at step 77.$st's name: status $rc (0), both tasks under MPS in a new dir" \
            [ $rc -eq 0 -a "$(grep -c "mps=1 pipe=$BASE/slurm-77.$st/$node/g0 " "$OUT")" -eq 2 ] || diag "$ERR"
    done
    check "  ... the link's target untouched, nothing left in the base" \
        [ "$(cat "$TEST_TMP/victim/file")" = keep -a -z "$(ls -A "$BASE")" ]
    # S3: a FIFO where the exit hook reads the node's state (a task of the
    # step's user can put one there) must not hang slurmstepd.
    mkdir -p -m 700 "$BASE/slurm-77.6/$node" && chmod 700 "$BASE/slurm-77.6" &&
        mkfifo "$BASE/slurm-77.6/$node/state"
    t0=$(date +%s%N)
    SPANK_DRIVER_STEP=6 timeout 60 "$DRIVER" "$PLUGIN" $ARGS --opt mps=on --exit
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    check "a FIFO as the step's state: the exit hook returns ($rc) in $ms ms, the step's dir removed" \
        [ $rc -ne 124 -a $ms -lt 5000 -a ! -e "$BASE/slurm-77.6" ]
fi
check_clean "the plugin's jobs"
# --mps-share=node (issue 38): two steps at once through the plugin share
# one server (the plugstack's share=node, an admin's default; linger=0:
# the servers end with the last step, as the check below wants).
rm -f "$TEST_TMP/share.rec"
FAKE_MPS_RECORD=$TEST_TMP/share.rec SPANK_DRIVER_STEP=5 mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS \
    -x SPANK_DRIVER_JOB -x SPANK_DRIVER_STEP -x FAKE_MPS_RECORD -np 2 "$DRIVER" "$PLUGIN" $ARGS \
    --arg share=node --arg linger=0 --opt mps=on -- "$PROG" --sleep 3000 >"$OUT.5" 2>"$ERR.5" &
s5=$!
FAKE_MPS_RECORD=$TEST_TMP/share.rec SPANK_DRIVER_STEP=6 mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS \
    -x SPANK_DRIVER_JOB -x SPANK_DRIVER_STEP -x FAKE_MPS_RECORD -np 3 "$DRIVER" "$PLUGIN" $ARGS \
    --arg share=node --arg linger=0 --opt mps=on -- "$PROG" --sleep 3000 >"$OUT.6" 2>"$ERR.6"
rc6=$?
wait $s5
rc5=$?
check "two steps at once with share=node in plugstack.conf: both 0, one daemon, one pipe dir" \
    [ $rc5 -eq 0 -a $rc6 -eq 0 -a "$(grep -c '^start ' "$TEST_TMP/share.rec")" -eq 1 -a \
        "$(cat "$OUT.5" "$OUT.6" | grep -c "mps=1 pipe=$TMPDIR/gsrun-$(id -u)/mps-share/")" -eq 5 ] ||
    diag "$ERR.5" "$ERR.6"
for _ in $(seq 100); do
    [ ! -d "$TMPDIR/gsrun-$(id -u)/mps-share" ] && break
    sleep 0.05
done
rmdir "$TMPDIR/gsrun-$(id -u)" 2>/dev/null
check "  ... the shared MPS gone after the steps" [ ! -d "$TMPDIR/gsrun-$(id -u)" -a -z "$(leftover_procs)" ]

finish
