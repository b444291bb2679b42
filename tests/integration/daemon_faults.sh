#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/mps.c, runtime/gpu/mps_stop.c, runtime/agent/daemons.c, runtime/agent/report.c, runtime/job/agent_confirm.c
# The MPS control daemon failing in each way: bounded waits, a clear message,
# the documented status, and nothing left behind.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

FAKE_MPS_FAIL_START=1 gsrun_fake 1 --mps=on -np 4 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "daemon fails to start, --mps=on: status 70" [ $rc -eq 70 ]
check "  ... before any rank ran" [ "$(grep -c '^rank=' "$OUT")" -eq 0 ]
check "  ... one message naming the GPU and the daemon's words" \
    [ "$(grep -c 'error: GPU 0 (GPU-fa4e.*exited with status 1 before it was ready: fake-mps: cannot start' "$ERR")" -eq 1 ]
check_clean "fails to start, on"

FAKE_MPS_FAIL_START=1 gsrun_fake 1 -np 4 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'mps=0 ' "$OUT")" -eq 4 ]
check "daemon fails to start, --mps=auto: the job runs without MPS" [ $? -eq 0 ]
check "  ... with one warning" [ "$(grep -c 'MPS could not start: .*running without MPS' "$ERR")" -eq 1 ]
check_clean "fails to start, auto"

t0=$(date +%s%N)
FAKE_MPS_NO_SOCKET=1 gsrun_fake 1 --mps=on --mps-timeout=2 -np 4 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "daemon never ready, --mps-timeout=2: status 70" [ $rc -eq 70 ]
[ $ms -ge 1900 ] && [ $ms -lt 8000 ]
check "  ... after about 2 s, not more ($ms ms)" [ $? -eq 0 ]
check "  ... message says the socket never came" grep -q "did not create its socket" "$ERR"
check_clean "never ready"

FAKE_MPS_HANG_ON_QUIT=1 FAKE_MPS_IGNORE_TERM=1 gsrun_fake 1 -np 4 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "daemon hangs on quit: the job's status (0) comes through" [ $rc -eq 0 ]
check "  ... the problem is reported" grep -q "problem: .*did not quit within 5000 ms; stopped with SIGTERM/SIGKILL" "$ERR"
check_clean "hangs on quit"

FAKE_MPS_QUIT_STATUS=5 gsrun_fake 1 -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "daemon exits 5 on quit: job status 0" [ $? -eq 0 ]
check_clean "quit status"

FAKE_MPS_DIE_AFTER_MS=300 gsrun_fake 1 -np 3 "$PROG" --sleep 1500 >"$OUT" 2>"$ERR"
rc=$?
check "daemon dies mid-job: job status 0 (the fake GPU work needs no daemon)" [ $rc -eq 0 ]
check "  ... reported as a problem naming the GPU" grep -q "problem: .*GPU 0 (GPU-fa4e.*exited while the job ran" "$ERR"
check_clean "dies mid-job"

FAKE_MPS_SERVER_ERROR="Client 7 encountered a fatal GPU error" gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "errors in MPS's own log reach the user" grep -q "problem: .*GPU 0: .*ERROR: Client 7 encountered a fatal GPU error" "$ERR"
check_clean "server log error"

# The real control daemon answers no command while a server it started sets
# up its GPU context (~250 ms on an H100): no rank may wait for that.
FAKE_MPS_SERVER_SETUP_MS=1500 gsrun_fake 1 -vv --mps=on -np 4 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "control daemon silent 1.5 s after start_server: job status 0" [ $rc -eq 0 ]
step_ms() { grep -o "timeline (ms after gsrun started): agent .*" "$ERR" | grep -o "$1 [0-9]*" | head -1 | awk '{print $NF}'; }
pub=$(step_ms published) reg=$(step_ms registered) listed=$(step_ms "servers listed")
[ -n "$pub" ] && [ -n "$reg" ] && [ $((reg - pub)) -lt 1000 ]
check "  ... the ranks registered without waiting for it (published ${pub:-?}, registered ${reg:-?} ms)" [ $? -eq 0 ]
[ -n "$listed" ] && [ "$listed" -ge 1400 ] && [ "$listed" -ge "$reg" ]
check "  ... the servers listed after that, once the daemon answered (${listed:-?} ms)" [ $? -eq 0 ]
check "  ... and reported with their PID" grep -q "MPS control daemon [0-9]* on .*, server [1-9][0-9]*, 4 ranks" "$ERR"
check_clean "control daemon silent during server setup"

# Silent past the 2 s bound of a command: gsrun kills the command's client,
# and the daemon answers into a closed connection. The daemon must live on
# (the fake once died of SIGPIPE there, under load: mps_fake.sh's 100-rank
# job failed with status 70 or 46 beside endjob.sh's fork bomb).
FAKE_MPS_SERVER_SETUP_MS=3000 gsrun_fake 1 -v --mps=on -np 2 "$PROG" --mps-client >"$OUT" 2>"$ERR"
rc=$?
check "control daemon silent 3 s (past a command's 2 s): job status $rc (0), $(grep -c 'client=ok' "$OUT") of 2 ranks MPS clients" \
    eval '[ $rc -eq 0 ] && [ "$(grep -c "client=ok" "$OUT")" -eq 2 ]' || diag "$ERR"
check "  ... the late command told, and the daemon did not die of it" \
    eval 'grep -q "got no answer within [0-9]* ms" "$ERR" && ! grep -q "exited while the job ran" "$ERR"' || diag "$ERR"
check_clean "control daemon silent past a command's bound"

# Signals: SIGTERM to gsrun ends the job as it ends mpirun's; MPS goes away.
gsrun_fake_exec 1 -np 3 "$PROG" --sleep 20000 >"$OUT" 2>"$ERR" &
pid=$!
for _ in $(seq 100); do [ "$(grep -c '^rank=' "$OUT")" -eq 3 ] && break; sleep 0.1; done
kill -TERM $pid
t0=$(date +%s%N)
wait $pid
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $ms -lt 10000 ] && [ $rc -ne 0 ]
check "SIGTERM to gsrun: the job ends within 10 s ($ms ms, status $rc)" [ $? -eq 0 ]
check_clean "SIGTERM"

# SIGKILL to gsrun: mpirun dies with it (parent-death signal); the agent
# ends the ranks and cleans up on its own, the job dir included.
gsrun_fake_exec 1 -np 2 "$PROG" --sleep 1000 >"$OUT" 2>"$ERR" &
pid=$!
for _ in $(seq 100); do [ "$(grep -c '^rank=' "$OUT")" -eq 2 ] && break; sleep 0.1; done
kill -KILL $pid
wait $pid 2>/dev/null
for _ in $(seq 100); do [ -z "$(leftover_procs)" ] && [ -z "$(run_files)" ] && break; sleep 0.1; done
check_clean "SIGKILL to gsrun"
finish
