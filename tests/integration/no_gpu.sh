#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/gpu.c, runtime/plan/policy.c
# Without a GPU the job still runs, without MPS, with one clear notice.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

"$GSRUN" -np 4 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "no GPU, --mps=auto: the job runs (status 0)" [ $rc -eq 0 ]
check "every rank ran, without MPS" [ "$(grep -c 'mps=0 pipe=- ' "$OUT")" -eq 4 ]
check "exactly one notice that there is no GPU" [ "$(grep -c 'no NVIDIA GPU found' "$ERR")" -eq 1 ]
check "the notice names the node" grep -q "^gsrun: node [A-Za-z0-9_-]*: " "$ERR"
check "the ranks know their local rank" [ "$(grep -c 'local=[0-3]/4 ' "$OUT")" -eq 4 ]
check_clean "no GPU, auto"

"$GSRUN" --mps=off -np 3 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$ERR" ]
check "--mps=off: status 0, no notice" [ $? -eq 0 ]
check "--mps=off: plain mpirun, gsrun sets nothing" [ "$(grep -c 'mps=- ' "$OUT")" -eq 3 ]
check_clean "--mps=off"

# An NVML that cannot start counts as no GPU.
LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_FAIL_INIT=1 "$GSRUN" -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "NVML failing to start: job runs, notice says why" grep -q "Driver Not Loaded" "$ERR"
check_clean "NVML failure"
finish
