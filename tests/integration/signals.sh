#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: launcher/supervise.c, runtime/agent/guard.c, runtime/job/agent_serve.c
# Signals to gsrun and mpirun, and ranks that resist: the job ends as it
# would under plain mpirun, and MPS is torn down every time.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

start_job() { # start_job ARGS...: gsrun in the background, waits until all ranks printed
    gsrun_fake_exec 1 -np 3 "$PROG" "$@" >"$OUT" 2>"$ERR" &
    JOB=$!
    for _ in $(seq 150); do [ "$(grep -c '^rank=' "$OUT")" -eq 3 ] && break; sleep 0.1; done
}
ended_within() { # ended_within SECONDS: waits for $JOB; sets RC
    local i
    for i in $(seq $(($1 * 10))); do kill -0 $JOB 2>/dev/null || break; sleep 0.1; done
    if kill -0 $JOB 2>/dev/null; then
        kill -9 $JOB
        wait $JOB 2>/dev/null
        return 1
    fi
    wait $JOB
    RC=$?
    return 0
}
procs_of() { # the live processes of this test whose exe is $1, the agent's guard (its fork) not
    local p c
    for p in $(leftover_procs); do
        [ /proc/$p/exe -ef "$1" ] && read -r c 2>/dev/null </proc/$p/comm && [ "$c" != gsrun-guard ] && echo "$p"
    done
}
wait_clean() { # until nothing of ours is left, at most 5 s
    for _ in $(seq 50); do [ -z "$(leftover_procs)" ] && [ -z "$(run_files)" ] && break; sleep 0.1; done
}

for sig in INT HUP TERM; do
    start_job --sleep 30000
    kill -$sig $JOB
    ended_within 10 && ok "SIG$sig to gsrun ends the job (status $RC)" || not_ok "SIG$sig to gsrun: still running after 10 s"
    wait_clean
    check_clean "SIG$sig"
done

start_job --sleep 30000
kill -INT $JOB
sleep 0.1
kill -INT $JOB
ended_within 10 && ok "SIGINT twice quickly ends the job (status $RC)" || not_ok "SIGINT twice: still running"
wait_clean
check_clean "SIGINT twice"

# A rank that ignores SIGTERM: mpirun escalates, and teardown still happens.
start_job --sleep 30000 --ignore-term
kill -TERM $JOB
ended_within 20 && ok "a rank ignoring SIGTERM: the job still ends (status $RC)" || not_ok "rank ignoring SIGTERM: job still running after 20 s"
wait_clean
check_clean "rank ignores SIGTERM"

# SIGKILL to mpirun: the agent sees the launcher go, ends the ranks it
# orphaned (SIGTERM, then SIGKILL) and tears MPS down at once.
start_job --sleep 30000
mp=$(pgrep -P $JOB -x 'mpirun|prterun') # Open MPI 5's mpirun execs prterun
t0=$(date +%s%N)
kill -KILL "$mp"
ended_within 10 && ok "SIGKILL to mpirun: gsrun exits (status $RC)" || not_ok "SIGKILL to mpirun: gsrun still running"
# gsrun exits only once the agent has ended the ranks and stopped MPS.
ms=$((($(date +%s%N) - t0) / 1000000))
check "  ... ranks ended and MPS torn down within 2 s ($ms ms)" [ $ms -lt 2000 ]
wait_clean
check "  ... reported as a problem" grep -q "problem: node .*: the launcher exited while 3 ranks still ran: ended them (SIGTERM)" "$ERR"
check_clean "SIGKILL to mpirun"

# A rank that leaves a grandchild behind (own session, 3 s): the job and MPS
# end without waiting for it; the grandchild is the program's own business.
gsrun_fake 1 -np 2 "$PROG" --grandchild 3 >"$OUT" 2>"$ERR"
check "a rank leaves a grandchild: status 0" [ $? -eq 0 ]
check "  ... MPS is gone while the grandchild still runs" [ -z "$(leftover_procs | grep -v "^$(pgrep -f -- "$PROG --grandchild" | tr '\n' '|' | sed 's/|$//')$")" ]
pkill -f -- "$PROG --grandchild" 2>/dev/null
wait_clean
check_clean "grandchild"
# Several MPS servers on the GPU (one client each: 3 servers; two each: 2):
# every kill that ends a one-server job ends these too, nothing left.
# The agent killed while MPS still starts (issue 37): the node's ranks,
# which wait for its state, learn at once that it is gone (its lock free,
# its socket there, or its dir removed) and the job ends as a failed
# agent's job ends, not after the 40 s of the timeout. Under gsrun (whose
# early agent the ranks tell their number) and under gsrun exec (whose
# first rank starts it).
for front in gsrun exec; do
    for sig in TERM KILL; do
        if [ $front = gsrun ]; then
            FAKE_MPS_START_DELAY_MS=2500 gsrun_fake_exec 1 -np 7 "$PROG" >"$OUT" 2>"$ERR" &
        else
            (export LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1 FAKE_MPS_START_DELAY_MS=2500
                exec mpirun -np 7 "$GSRUN" exec --mps=on --mps-control="$FAKE_CONTROL" "$PROG" >"$OUT" 2>"$ERR") &
        fi
        JOB=$!
        victim= RC=
        for _ in $(seq 100); do
            victim=$(procs_of "$B/launcher/gsrun-agent" | head -1)
            [ -n "$victim" ] && break
            sleep 0.05
        done
        sleep 0.5
        t0=$(date +%s%N)
        [ -n "$victim" ] && kill -$sig "$victim"
        ended_within 20
        ms=$((($(date +%s%N) - t0) / 1000000))
        check "$front: SIG$sig to the agent ${victim:-(not found)} while MPS starts: the job ends in $ms ms (under 8000), status ${RC:-none} (not 0)" \
            [ -n "$victim" -a $ms -lt 8000 -a "${RC:-0}" -ne 0 ] || diag "$ERR"
        check "  ... no rank ran" [ "$(grep -c '^rank=' "$OUT")" -eq 0 ]
        wait_clean
        rmdir "$TMPDIR"/gsrun-* 2>/dev/null # gsrun exec's private base stays (empty) by design
        check_clean "$front: SIG$sig to the agent while MPS starts"
    done
done

for per in 1 2; do
    n=$(((3 + per - 1) / per))
    for how in gsrun-TERM gsrun-KILL mpirun-KILL agent-KILL rank-KILL; do
        rm -f "$TEST_TMP/rec"
        GSRUN_MPS_CLIENTS_PER_SERVER=$per FAKE_MPS_RECORD=$TEST_TMP/rec start_job --sleep 30000
        # Under a loaded suite the job can take longer than start_job waits.
        for _ in $(seq 200); do
            [ "$(grep -c '^rank=' "$OUT")" -eq 3 ] && [ "$(grep -c '^start ' "$TEST_TMP/rec" 2>/dev/null)" -eq "$n" ] && break
            sleep 0.1
        done
        daemons=$(grep -c '^start ' "$TEST_TMP/rec" 2>/dev/null)
        case $how in
        gsrun-*) victim=$JOB ;;
        mpirun-*) victim=$(pgrep -P $JOB -x 'mpirun|prterun') ;;
        agent-*) victim=$(procs_of "$B/launcher/gsrun-agent" | head -1) ;;
        rank-*) victim=$(procs_of "$PROG" | head -1) ;;
        esac
        if [ "$daemons" -ne "$n" ] || [ -z "$victim" ]; then
            not_ok "$n servers, SIG${how#*-} to ${how%-*}: the job was not as planned ($daemons daemons, victim '$victim')"
            kill -9 $JOB 2>/dev/null
        else
            kill -"${how#*-}" $victim
            ended_within 15 && ok "$n servers: SIG${how#*-} to ${how%-*} ends the job (status $RC)" ||
                not_ok "$n servers: SIG${how#*-} to ${how%-*}: still running after 15 s"
        fi
        wait_clean
        check_clean "$n servers, SIG${how#*-} to ${how%-*}"
    done
done
finish
