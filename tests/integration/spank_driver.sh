#!/bin/bash
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
ARGS="--arg agent=$B/launcher/gsrun-agent --arg control=$FAKE_CONTROL"
node=$(hostname | cut -d. -f1)

mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -x SPANK_DRIVER_JOB -x SPANK_DRIVER_STEP -np 4 \
    "$DRIVER" "$PLUGIN" $ARGS --arg verbose=1 --opt mps=on -- "$PROG" >"$OUT" 2>"$ERR"
check "4 tasks through the plugin's task_init: status 0, each under MPS at 50% in the step's dir" \
    [ $? -eq 0 -a "$(grep -c "mps=1 pipe=$TMPDIR/gsrun.slurm-77.3/$node/g0 .*pct=50 " "$OUT")" -eq 4 ] ||
    diag "$OUT" "$ERR"
t0=$(date +%s%N)
"$DRIVER" "$PLUGIN" $ARGS --opt mps=on --exit
ms=$((($(date +%s%N) - t0) / 1000000))
check "the exit hook returns once the agent is done ($ms ms), nothing left" \
    [ $ms -lt 3000 -a -z "$(leftover_procs)" -a -z "$(ls -A "$TMPDIR")" ]
check "  ... one MPS control daemon, reported to the first task's stderr" \
    [ "$(grep -c "MPS control daemon [0-9]* on" "$ERR")" -eq 1 ]

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
check_clean "the plugin's jobs"
finish
