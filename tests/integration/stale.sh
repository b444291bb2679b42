#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/files/preflight.c, runtime/files/status.c, runtime/files/status_format.c
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
# The same on this node as gsrun status sees them: a crashed job's node dir
# with no agent status, its gsrun gone (stale), and one whose gsrun runs
# (starting).
node=$("$GSRUN" status --json | sed -n 's/.*"node":"\([^"]*\)".*/\1/p')
mkdir -m 700 "$TMPDIR/gsrun.crash2" "$TMPDIR/gsrun.crash2/$node" "$TMPDIR/gsrun.alive2" "$TMPDIR/gsrun.alive2/$node"
echo $dead >"$TMPDIR/gsrun.crash2/owner"
echo $$ >"$TMPDIR/gsrun.alive2/owner"
"$GSRUN" status >"$OUT.st" 2>&1
check "gsrun status: a crashed job's dir (no agent status, its gsrun $dead gone) is stale, not starting" \
    grep -qx "job gsrun.crash2 (uid [0-9]*): stale: no agent status, and the gsrun (or agent) that made its directory, PID $dead, is gone; left behind: $TMPDIR/gsrun.crash2" "$OUT.st" ||
    diag "$OUT.st"
check "  ... one whose gsrun runs (no agent status yet) is starting" \
    grep -qx "job gsrun.alive2 (uid [0-9]*): starting (no agent status yet)" "$OUT.st" || diag "$OUT.st"
"$GSRUN" status --json >"$OUT.json" 2>&1
check "  ... and in the JSON: stale, starting" \
    eval 'grep -q "\"job\":\"gsrun.crash2\",\"uid\":[0-9]*,\"state\":\"stale\"" "$OUT.json" && grep -q "\"job\":\"gsrun.alive2\",\"uid\":[0-9]*,\"state\":\"starting\"" "$OUT.json"' ||
    diag "$OUT.json"
gsrun_fake 1 -v -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "the job runs" [ $? -eq 0 ]
check "  ... and removes the crashed job's dir of this node too" [ ! -e "$TMPDIR/gsrun.crash2" ]
check "the crashed job's directory is removed" [ ! -e "$TMPDIR/gsrun.crash1" ]
check "  ... and gsrun -v says so" grep -q "removed the run directory of a job that crashed: $TMPDIR/gsrun.crash1" "$ERR"
check "a live job's directory is kept" [ -d "$TMPDIR/gsrun.alive1" ]
check "a directory without owner is kept" [ -d "$TMPDIR/gsrun.fresh1" ]
rm -rf "$TMPDIR/gsrun.alive1" "$TMPDIR/gsrun.fresh1" "$TMPDIR/gsrun.alive2"
check_clean "stale directories"

# Pre-flight warnings: a low open-file limit.
(ulimit -Sn 256 && gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR")
check "ulimit -n 256: a warning saying what to raise" grep -q "warning: the open-file limit is 256.*ulimit -n 4096" "$ERR"
check_clean "low ulimit"
finish
