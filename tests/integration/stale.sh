#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/files/preflight.c
# Run directories left by a crashed job are removed; a live job's never.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

# A crashed job: its gsrun (a PID that has exited) and no agent.
sh -c 'exit 0' &
dead=$!
wait $dead
mkdir -m 700 "$TMPDIR/gsrun.crash1" "$TMPDIR/gsrun.crash1/node"
echo $dead >"$TMPDIR/gsrun.crash1/owner"
# A live job: owned by this shell.
mkdir -m 700 "$TMPDIR/gsrun.alive1"
echo $$ >"$TMPDIR/gsrun.alive1/owner"
# One being created (no owner file yet).
mkdir -m 700 "$TMPDIR/gsrun.fresh1"
gsrun_fake 1 -v -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "the job runs" [ $? -eq 0 ]
check "the crashed job's directory is removed" [ ! -e "$TMPDIR/gsrun.crash1" ]
check "  ... and gsrun -v says so" grep -q "removed the run directory of a job that crashed: $TMPDIR/gsrun.crash1" "$ERR"
check "a live job's directory is kept" [ -d "$TMPDIR/gsrun.alive1" ]
check "a directory without owner is kept" [ -d "$TMPDIR/gsrun.fresh1" ]
rm -rf "$TMPDIR/gsrun.alive1" "$TMPDIR/gsrun.fresh1"
check_clean "stale directories"

# Pre-flight warnings: a low open-file limit.
(ulimit -Sn 256 && gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR")
check "ulimit -n 256: a warning saying what to raise" grep -q "warning: the open-file limit is 256.*ulimit -n 4096" "$ERR"
check_clean "low ulimit"
finish
