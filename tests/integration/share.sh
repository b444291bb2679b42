#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/service/agent_share.c, runtime/job/agent_lease.c, runtime/job/agent_serve.c, runtime/files/status_format.c
# --mps-share=node (issue 38) with the fake control daemon: a user's
# concurrent and back-to-back jobs on one MPS control daemon, each job's own
# status, output and end, a killed job or shared agent, the linger, the client
# limit, two users, a planted name, the priority and the default share.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
REC=$TEST_TMP/record
ME=$(id -u)
BASE=$TMPDIR/gsrun-$ME
SHARED_RE="$BASE/mps-share/[^/ ]*/g0"

# The user's base stays (gsrun exec's jobs use it too); nothing else may.
clean_share() { # clean_share "context"
    for _ in $(seq 100); do # the shared agent ends just after its last job
        [ -z "$(leftover_procs)" ] && break
        sleep 0.05
    done
    [ -d "$BASE" ] && [ -z "$(ls -A "$BASE")" ] && rmdir "$BASE"
    check_clean "$1"
}
starts() { grep -c '^start ' "$REC" 2>/dev/null || echo 0; }
job() { # job OUT ERR args...: a gsrun job with --mps-share=node (status in OUT.rc)
    local o=$1 e=$2
    shift 2
    FAKE_MPS_RECORD=$REC gsrun_fake 1 --mps-share=node "$@" >"$o" 2>"$e"
    echo $? >"$o.rc"
}

# Two and three jobs at once: one control daemon; each job its own ranks,
# output and status.
rm -f "$REC"
job "$OUT.1" "$ERR.1" -v -np 4 "$PROG" --sleep 3000 &
job "$OUT.2" "$ERR.2" -v -np 4 "$PROG" --sleep 3000 &
wait_status "$OUT.st" "jobs gsrun\.[A-Za-z0-9]*:4 gsrun\.[A-Za-z0-9]*:4"
check "two jobs at once: gsrun status shows both on the shared server" [ $? -eq 0 ] || diag "$OUT.st"
# The shared agent lists a lease before it answers it; the job's own entry
# says "shared" once its agent has the answer (a moment later on a loaded
# machine: the Debian 13 suite saw one of two).
for _ in $(seq 40); do
    [ "$(grep -c "MPS servers shared with the user's other jobs" "$OUT.st")" -eq 2 ] && break
    sleep 0.05
    "$GSRUN" status >"$OUT.st" 2>&1
done
check "  ... and each job as shared ($(grep -c "MPS servers shared with the user's other jobs" "$OUT.st") of 2)" \
    [ "$(grep -c "MPS servers shared with the user's other jobs" "$OUT.st")" -eq 2 ] || diag "$OUT.st"
wait
check "  ... both end with status 0" [ "$(cat "$OUT.1.rc" "$OUT.2.rc" | tr -d '\n')" = 00 ]
check "  ... one MPS control daemon for both" [ "$(starts)" -eq 1 ] || diag "$REC"
check "  ... each job's 4 ranks under MPS on the shared server's pipe dir" \
    [ "$(grep -c "mps=1 pipe=$SHARED_RE .*pct=50 " "$OUT.1")" -eq 4 -a \
        "$(grep -c "mps=1 pipe=$SHARED_RE .*pct=50 " "$OUT.2")" -eq 4 ]
check "  ... one pipe dir for all 8 ranks" \
    [ "$(cat "$OUT.1" "$OUT.2" | grep -o 'pipe=[^ ]*' | sort -u | wc -l)" -eq 1 ]
check "  ... -v: one job started the shared MPS, the other found it" \
    [ "$(cat "$ERR.1" "$ERR.2" | grep -c 'shared MPS on this node .*: started for this job')" -eq 1 -a \
        "$(cat "$ERR.1" "$ERR.2" | grep -c 'shared MPS on this node .*: found running')" -eq 1 ]
clean_share "two jobs sharing"

rm -f "$REC"
job "$OUT.1" "$ERR.1" -np 3 "$PROG" --sleep 2500 &
job "$OUT.2" "$ERR.2" -np 3 "$PROG" --sleep 2500 --exit 1 3 &
job "$OUT.3" "$ERR.3" -np 2 "$PROG" --sleep 2500 &
wait
check "three jobs at once: statuses 0, 3 (its rank 1's), 0" \
    [ "$(cat "$OUT.1.rc" "$OUT.2.rc" "$OUT.3.rc" | tr -d '\n')" = 030 ] || diag "$ERR.2"
check "  ... one MPS control daemon" [ "$(starts)" -eq 1 ]
check "  ... each job's own output: 3, 3 and 2 rank lines" \
    [ "$(grep -c "^rank=.*pipe=$SHARED_RE " "$OUT.1")" -eq 3 -a "$(grep -c "^rank=.*size=3 " "$OUT.2")" -eq 3 -a \
        "$(grep -c "^rank=.*size=2 .*pipe=$SHARED_RE " "$OUT.3")" -eq 2 ]
clean_share "three jobs sharing"

# Through another front end: a gsrun exec job joins a gsrun job's servers.
rm -f "$REC"
job "$OUT.1" "$ERR.1" -np 2 "$PROG" --sleep 3000 &
LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 FAKE_MPS_RECORD=$REC GSRUN_MPS_CONTROL=$FAKE_CONTROL \
    GSRUN_MPS_SHARE=node mpirun -np 3 "$GSRUN" exec -- "$PROG" --sleep 3000 >"$OUT.2" 2>"$ERR.2"
rc2=$?
wait
check "gsrun and gsrun exec (GSRUN_MPS_SHARE=node) at once: both 0, one daemon, one pipe dir" \
    [ "$(cat "$OUT.1.rc")" = 0 -a $rc2 = 0 -a "$(starts)" -eq 1 -a \
        "$(cat "$OUT.1" "$OUT.2" | grep -c "mps=1 pipe=$SHARED_RE ")" -eq 5 ] || diag "$ERR.2"
clean_share "gsrun exec sharing"

# SIGKILL of one job's gsrun: its ranks end; the other runs on to 0.
rm -f "$REC"
(FAKE_MPS_RECORD=$REC gsrun_fake_exec 1 --mps-share=node -np 3 "$PROG" --sleep 8000 >"$OUT.1" 2>"$ERR.1") &
victim=$!
job "$OUT.2" "$ERR.2" -np 3 "$PROG" --sleep 4000 &
other=$!
wait_status "$OUT.st" "jobs gsrun\.[A-Za-z0-9]*:3 gsrun\.[A-Za-z0-9]*:3" || diag "$OUT.st"
t0=$(date +%s%N)
kill -9 "$victim"
wait "$victim" 2>/dev/null
for _ in $(seq 100); do
    pgrep -f "rank_report --sleep 8000" >/dev/null || break
    sleep 0.05
done
gone_ms=$((($(date +%s%N) - t0) / 1000000))
check "SIGKILL to one job's gsrun: its ranks gone after $gone_ms ms" eval '! pgrep -f "rank_report --sleep 8000"' 
wait "$other"
check "  ... the other job ends with status 0, all 3 ranks under MPS" \
    [ "$(cat "$OUT.2.rc")" = 0 -a "$(grep -c "mps=1 pipe=$SHARED_RE " "$OUT.2")" -eq 3 ] || diag "$ERR.2"
check "  ... one MPS control daemon" [ "$(starts)" -eq 1 ]
clean_share "a job killed beside another"

# SIGKILL of one job's agent: its guard ends its ranks, its lease ends
# with the agent; the other job runs on to 0.
rm -f "$REC"
job "$OUT.1" "$ERR.1" -np 3 "$PROG" --sleep 8000 &
victim=$!
job "$OUT.2" "$ERR.2" -np 3 "$PROG" --sleep 4000 &
other=$!
wait_status "$OUT.st" "jobs gsrun\.[A-Za-z0-9]*:3 gsrun\.[A-Za-z0-9]*:3" || diag "$OUT.st"
g=$(pgrep -P "$victim" -x gsrun)
agent=$(sed -n "s/^job gsrun\.[A-Za-z0-9]* (uid [0-9]*): agent \([0-9]*\), launcher [0-9]*, gsrun $g,.*/\1/p" "$OUT.st")
kill -9 "$agent"
wait "$victim"
rc1=$(cat "$OUT.1.rc")
for _ in $(seq 100); do
    pgrep -f "rank_report --sleep 8000" >/dev/null || break
    sleep 0.05
done
check "SIGKILL to one job's agent ($agent): its ranks end, its gsrun fails ($rc1)" \
    eval '[ -n "$agent" ] && [ "$rc1" != 0 ] && ! pgrep -f "rank_report --sleep 8000" >/dev/null' || diag "$ERR.1"
wait "$other"
check "  ... the other job ends with status 0 under the shared server" \
    [ "$(cat "$OUT.2.rc")" = 0 -a "$(grep -c "mps=1 pipe=$SHARED_RE " "$OUT.2")" -eq 3 ] || diag "$ERR.2"
check "  ... one MPS control daemon" [ "$(starts)" -eq 1 ]
clean_share "a job's agent killed beside another"

# Back to back: without a linger the servers stop with the job; with one the
# next job finds them warm, and they stop after its linger.
rm -f "$REC"
job "$OUT.1" "$ERR.1" -np 2 "$PROG"
job "$OUT.2" "$ERR.2" -np 2 "$PROG"
check "back to back, no linger: both 0, each job its own daemon" \
    [ "$(cat "$OUT.1.rc" "$OUT.2.rc" | tr -d '\n')" = 00 -a "$(starts)" -eq 2 ]
clean_share "back to back"
rm -f "$REC"
job "$OUT.1" "$ERR.1" --mps-linger=5 -np 2 "$PROG"
wait_status "$OUT.st" "^shared MPS mps-share .*0 jobs"
check "--mps-linger=5: the shared MPS stays after the job, with no job" [ $? -eq 0 ] || diag "$OUT.st"
job "$OUT.2" "$ERR.2" -v --mps-linger=3 -np 2 "$PROG"
check "  ... the next job finds it running: status 0, no second daemon" \
    [ "$(cat "$OUT.2.rc")" = 0 -a "$(starts)" -eq 1 -a "$(grep -c "mps=1 pipe=$SHARED_RE " "$OUT.2")" -eq 2 ]
check "  ... and says so" grep -q "shared MPS on this node .*: found running, leased in" "$ERR.2"
t0=$(date +%s%N)
for _ in $(seq 160); do
    [ -z "$(leftover_procs)" ] && break
    sleep 0.05
done
gone_ms=$((($(date +%s%N) - t0) / 1000000))
# The linger counts from the lease's end, a little before gsrun exits.
check "  ... gone $gone_ms ms after the second job (its linger: 3 s)" [ "$gone_ms" -ge 1500 -a -z "$(leftover_procs)" ]
clean_share "linger"

# The client limit: two jobs of 3 ranks, 4 clients a server: a second server.
rm -f "$REC"
job "$OUT.1" "$ERR.1" --mps-clients-per-server=4 -np 3 "$PROG" --sleep 3000 &
job "$OUT.2" "$ERR.2" --mps-clients-per-server=4 -np 3 "$PROG" --sleep 3000 &
wait_status "$OUT.st" "GPU 0 server 1 of 2 .*jobs gsrun"
check "past the client limit: gsrun status shows two servers, a job on each" [ $? -eq 0 ] || diag "$OUT.st"
wait
check "  ... both 0; two daemons; each job on one pipe dir of its own" \
    [ "$(cat "$OUT.1.rc" "$OUT.2.rc" | tr -d '\n')" = 00 -a "$(starts)" -eq 2 -a \
        "$(grep -o 'pipe=[^ ]*' "$OUT.1" | sort -u | wc -l)" -eq 1 -a \
        "$(cat "$OUT.1" "$OUT.2" | grep -o 'pipe=[^ ]*' | sort -u | wc -l)" -eq 2 ]
clean_share "client limit"

# The shared agent killed under a running job: the job is told.
rm -f "$REC"
job "$OUT.1" "$ERR.1" -np 2 "$PROG" --sleep 4000 &
wait_status "$OUT.st" "^shared MPS mps-share .*1 job"
kill -9 "$(sed -n 's/^shared MPS mps-share (uid [0-9]*): agent \([0-9]*\).*/\1/p' "$OUT.st")"
wait
check "the shared agent SIGKILLed: the job says its servers are gone" \
    grep -q "the user's shared MPS on this node .* ended while this job ran" "$ERR.1" || diag "$ERR.1"
clean_share "shared agent killed"

# Priority and the default share are each job's own.
rm -f "$REC"
job "$OUT.1" "$ERR.1" --mps-priority=low -np 2 "$PROG" --sleep 5000 &
# The printenv job starts once the first has leased: started together, it
# could lead, end and stop the shared server before the first job leased
# (seen under Open MPI 5: two daemons, every output right).
wait_status "$OUT.st" "^shared MPS mps-share .*1 job" || diag "$OUT.st"
job "$OUT.2" "$ERR.2" -np 4 printenv CUDA_MPS_CLIENT_PRIORITY GSRUN_MPS_ACTIVE CUDA_MPS_PIPE_DIRECTORY &
wait
check "a low-priority job beside a normal one: its ranks get CUDA_MPS_CLIENT_PRIORITY=1" \
    [ "$(grep -c 'mps=1 .*prio=1$' "$OUT.1")" -eq 2 ]
check "  ... the other job's (printenv): priority 0, under MPS on the same server, one daemon" \
    [ "$(grep -cx 0 "$OUT.2")" -eq 4 -a "$(grep -cx 1 "$OUT.2")" -eq 4 -a \
        "$(grep -c "^$SHARED_RE$" "$OUT.2")" -eq 4 -a "$(starts)" -eq 1 ] || diag "$OUT.2" "$ERR.2"
clean_share "priority and share per job"

# Another user's directory under the base's name does not deny sharing, and
# two users at once never share a server.
if [ "$ME" = 0 ] && getent passwd nobody >/dev/null; then
    rm -f "$REC"
    mkdir -m 700 "$BASE" && chown nobody "$BASE"
    job "$OUT.1" "$ERR.1" -np 2 "$PROG" --sleep 2500 &
    job "$OUT.2" "$ERR.2" -np 2 "$PROG" --sleep 2500 &
    wait
    check "$BASE planted by nobody: two jobs share one daemon in $BASE.1" \
        [ "$(cat "$OUT.1.rc" "$OUT.2.rc" | tr -d '\n')" = 00 -a "$(starts)" -eq 1 -a \
            "$(cat "$OUT.1" "$OUT.2" | grep -c "pipe=$BASE.1/mps-share/")" -eq 4 ] || diag "$ERR.1"
    check "  ... the planted directory left as it was" [ "$(stat -c '%U %a' "$BASE")" = "nobody 700" ]
    rmdir "$BASE"
    [ -d "$BASE.1" ] && [ -z "$(ls -A "$BASE.1")" ] && rmdir "$BASE.1"
    clean_share "a planted base"

    # Both users' jobs in one shared TMPDIR (as /tmp is).
    NT=$(mktemp -d /tmp/gsn.XXXXXX)
    chmod 711 "$NT"
    mkdir -m 1777 "$NT/tmp"
    mkdir -m 700 "$NT/ompi" && chown nobody "$NT/ompi"
    rm -f "$REC" "$REC.nobody"
    TMPDIR=$NT/tmp job "$OUT.1" "$ERR.1" -np 2 "$PROG" --sleep 3000 &
    setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$NT" TMPDIR="$NT/tmp" \
        OMPI_MCA_orte_tmpdir_base="$NT/ompi" PRTE_MCA_prte_tmpdir_base="$NT/ompi" \
        OMPI_MCA_btl_vader_backing_directory="$NT/ompi" OMPI_MCA_btl_sm_backing_directory="$NT/ompi" \
        LD_LIBRARY_PATH="$FAKE_LIB" FAKE_NVML_GPUS=1 FAKE_MPS_RECORD="$NT/ompi/rec" \
        "$GSRUN" --mps-control="$FAKE_CONTROL" --mps-share=node -np 2 "$PROG" --sleep 3000 \
        >"$OUT.2" 2>"$ERR.2"
    rc2=$?
    wait
    check "two users at once: both 0, a daemon each, each in its own base" \
        [ "$(cat "$OUT.1.rc")" = 0 -a $rc2 = 0 -a "$(starts)" -eq 1 -a \
            "$(grep -c '^start ' "$NT/ompi/rec")" -eq 1 -a \
            "$(grep -c "pipe=$NT/tmp/gsrun-$ME/mps-share/" "$OUT.1")" -eq 2 -a \
            "$(grep -c "pipe=$NT/tmp/gsrun-65534/mps-share/" "$OUT.2")" -eq 2 ] || diag "$ERR.2"
    for _ in $(seq 100); do
        [ -z "$(find "$NT/tmp" -mindepth 2)" ] && break
        sleep 0.05
    done
    check "  ... nothing left in either base" [ -z "$(find "$NT/tmp" -mindepth 2)" ] || find "$NT/tmp" | diag
    rm -rf "$NT"
    clean_share "two users"
fi

# A bad value: one line naming the setting and what it takes.
gsrun_fake 1 --mps-share=everyone -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "--mps-share=everyone: status $? (2), one line naming the accepted values" \
    eval '[ "$(grep -c "mps-share: invalid value .everyone.; accepted: auto, job or node" "$ERR")" -eq 1 ]'
GSRUN_MPS_LINGER=-1 gsrun_fake 1 --mps-share=node -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "GSRUN_MPS_LINGER=-1: refused, naming the variable" grep -q "GSRUN_MPS_LINGER" "$ERR"
clean_share "bad values"
finish
