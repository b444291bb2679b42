#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/mps_probe.c, runtime/job/agent_stuck.c, runtime/service/agent_share_wedge.c, runtime/service/agent_share_place.c, runtime/job/agent_lease_watch.c, runtime/agent/daemons.c
# MPS itself stuck (issue 66), with the fakes (tests/fake: a daemon or its
# server stopped with SIGSTOP answers nothing, as the real ones; with
# FAKE_MPS_MUTE_FILE, and the file .PID made, daemon PID runs, takes
# connections and never replies): a job never hangs silently on MPS.
#   1. the user's shared control daemon stopped between two jobs: the next
#      job is told, gets a fresh one, runs to status 0 with every rank a
#      client; the stopped one is gone
#   2. the shared server stopped: the same
#   3. a shared daemon that runs but never replies (muted): the same,
#      within the bound
#   4. the job's own daemon stopped while its ranks have not started CUDA:
#      the ranks that wait are told within 5 s of the start, a fresh
#      daemon replaces it, the job ends with the ranks' own status
#   4b. the shared daemon wedged while another job's ranks hold its server:
#      left running (ending it would end their contexts), the next job gets
#      another server and is told so
#   5. a healthy job whose ranks start CUDA late is told nothing
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

CT=$B/tests/progs/ct_client
export FAKE_NVML_CTX_DIR=$TEST_TMP/ctx
mkdir -p "$FAKE_NVML_CTX_DIR"
ME=$(id -u)
BASE=$TMPDIR/gsrun-$ME
MUTE=$TEST_TMP/mute
export FAKE_MPS_MUTE_FILE=$MUTE
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A job that hangs on MPS is what this test is about: each one is bounded
# (SIGTERM at 30 s, which gsrun passes on and cleans up after).
bounded_gsrun() {
    LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1 \
        timeout -k 10 30 "$GSRUN" --mps-control="$FAKE_CONTROL" "$@"
}
job() { # job NAME args...: in the foreground; status in $OUT.NAME.rc, ms in $OUT.NAME.ms
    local n=$1 t0
    shift
    t0=$(now_ms)
    bounded_gsrun "$@" >"$OUT.$n" 2>"$ERR.$n"
    echo $? >"$OUT.$n.rc"
    echo $(($(now_ms) - t0)) >"$OUT.$n.ms"
}
rc_of() { cat "$OUT.$1.rc" 2>/dev/null || echo none; }
ms_of() { cat "$OUT.$1.ms" 2>/dev/null || echo none; }
# The fake control daemons whose pipe dir matches PATTERN (this test's).
daemons_at() {
    local p
    for p in $(pgrep -f "$FAKE_CONTROL -f"); do
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -q "^CUDA_MPS_PIPE_DIRECTORY=$1" &&
            echo "$p"
    done
}
shared_daemon() { daemons_at "$BASE/mps-share/" | head -1; }
server_of() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1; }
shared_agent() {
    local p
    for p in $(pgrep -x gsrun-share); do
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "GS_TEST_MARK=$TEST_TMP" && echo "$p"
    done
}
wait_gone() { # wait_gone PID SECONDS: until PID is no live process (a zombie is none)
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        [ -e "/proc/$1" ] || return 0
        grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
served() { grep -c "client=ok" "$OUT.$1"; }

# --- 1-3: the user's shared server wedged between two jobs ----------------
# shared_case N WHAT HOW: a warm shared server, made wedged by HOW
# (daemon: SIGSTOP the control daemon; server: SIGSTOP its server; mute:
# the daemon takes connections and never replies), then the next job.
shared_case() {
    local n=$1 what=$2 how=$3 sd ss victim # not d: check's own local
    rm -f "$MUTE".*
    job "warm$n" --mps-share=node --mps-linger=60 -np 2 "$CT" --sleep 100
    sd=$(shared_daemon)
    ss=$([ -n "$sd" ] && server_of "$sd")
    check "$what: a warm job: status $(rc_of "warm$n") (0), shared daemon ${sd:-none}, server ${ss:-none}" \
        eval '[ "$(rc_of "warm$n")" = 0 ] && [ -n "$sd" ] && [ -n "$ss" ]' || { diag "$ERR.warm$n"; return; }
    case $how in
    daemon) victim=$sd; kill -STOP "$sd" ;;
    server) victim=$ss; kill -STOP "$ss" ;;
    mute) victim=$sd; touch "$MUTE.$sd" ;;
    esac
    # A server that answered less than a second ago is handed out on its
    # processes' state alone (one command a second in a burst of jobs):
    # past that the lease asks it (case 3b: within it).
    [ "$how" = mute ] && sleep 1.2
    job "next$n" --mps-share=node --mps-linger=60 -np 2 "$CT" --sleep 300
    rm -f "$MUTE".*
    "$GSRUN" status >"$OUT.status$n" 2>&1
    "$GSRUN" status --json >"$OUT.json$n" 2>&1
    "$GSRUN" stop >/dev/null 2>&1
    local told
    told=$(grep -m1 "wedged" "$ERR.next$n")
    check "$what: the next job: status $(rc_of "next$n") (0) in $(ms_of "next$n") ms (under 10000), $(served "next$n") of 2 ranks MPS clients" \
        eval '[ "$(rc_of "next$n")" = 0 ] && [ "$(ms_of "next$n")" -lt 10000 ] && [ "$(served "next$n")" = 2 ]' ||
        diag "$ERR.next$n" "$OUT.next$n"
    case $how in
    daemon) want="control daemon $sd is stopped" ;;
    server) want="MPS server $ss (of control daemon $sd) is stopped" ;;
    mute) want="control daemon $sd did not answer get_server_list within 2000 ms" ;;
    esac
    check "$what: ... told during the job: ${told:-nothing}" \
        eval 'grep -q "$want" "$ERR.next$n" && grep -q "started a fresh one (control daemon [0-9]*)" "$ERR.next$n"' ||
        diag "$ERR.next$n"
    check "$what: ... the wedged process ($victim) is gone" wait_gone "$victim" 5
    check "$what: ... gsrun status shows the wedge: $(grep -m1 WEDGED "$OUT.status$n" | cut -c1-120)" \
        eval 'grep -q "WEDGED: .*$want.*replaced by control daemon [0-9]* (1 wedged so far)" "$OUT.status$n" &&
              grep -q "\"wedged\":\".*$want" "$OUT.json$n"' || diag "$OUT.status$n" "$OUT.json$n"
    local a
    a=$(shared_agent)
    [ -n "$a" ] && for _ in $(seq 100); do [ -e "/proc/$a" ] || break; sleep 0.05; done
    check_clean "$what"
}

shared_case 1 "the shared control daemon stopped" daemon
shared_case 2 "the shared server stopped" server
shared_case 3 "the shared control daemon muted (runs, never replies)" mute

# --- 3b: muted within a second of its last answer: handed out, the job's
# ranks told (they run on without MPS once it is ended) or, if the lease
# came later, the lease found it; either way the job after gets a fresh
# server.
rm -f "$MUTE".*
job warm3b --mps-share=node --mps-linger=60 -np 2 "$CT" --sleep 100
m3=$(shared_daemon)
touch "$MUTE.${m3:-0}"
job next3b --mps-share=node --mps-linger=60 -np 2 "$CT" --sleep 300
job after3b --mps-share=node -np 2 "$CT" --sleep 100
rm -f "$MUTE".*
check "muted at once: the next job told (status $(rc_of next3b), $(served next3b) clients, in $(ms_of next3b) ms)" \
    eval '[ -n "$m3" ] && { { [ "$(rc_of next3b)" = 0 ] && [ "$(served next3b)" = 2 ] &&
          grep -q "control daemon $m3 did not answer get_server_list within 2000 ms; gsrun.s node service ended it" "$ERR.next3b"; } ||
        { [ "$(rc_of next3b)" = 0 ] && [ "$(ms_of next3b)" -lt 15000 ] &&
          grep -qE "ranks? [0-9,]+ waited .* wedged: the MPS control daemon $m3 did not answer" "$ERR.next3b"; }; }' ||
    diag "$ERR.next3b"
check "... the job after it: status $(rc_of after3b) (0), $(served after3b) of 2 ranks clients, $m3 gone" \
    eval '[ "$(rc_of after3b)" = 0 ] && [ "$(served after3b)" = 2 ] && wait_gone "$m3" 5' ||
    diag "$ERR.after3b"
a=$(shared_agent)
[ -n "$a" ] && for _ in $(seq 100); do [ -e "/proc/$a" ] || break; sleep 0.05; done
check_clean "muted at once"

# --- 4: the job's own daemon stopped before its ranks start CUDA ----------
REC=$TEST_TMP/rec.own
t0=$(now_ms)
(
    FAKE_MPS_RECORD=$REC bounded_gsrun -v --mps-share=job -np 2 "$CT" --start-wait 2000 --sleep 8000 \
        >"$OUT.own" 2>"$ERR.own"
    echo $? >"$OUT.own.rc"
) &
jobpid=$!
own_d=""
for _ in $(seq 1000); do # the ranks run (their CUDA 2 s away): the daemon serves
    [ "$(grep -c " start$" "$OUT.own" 2>/dev/null)" -ge 2 ] &&
        own_d=$(sed -n 's/^start pid=\([0-9]*\) .*/\1/p' "$REC" 2>/dev/null | head -1)
    [ -n "$own_d" ] && break
    sleep 0.01
done
[ -n "$own_d" ] && kill -STOP "$own_d"
stopped_at=$(($(now_ms) - t0))
cuda_at=$((stopped_at + 2000)) # the ranks' CUDA starts (at the latest)
told_at=none
for _ in $(seq 300); do
    grep -q "wedged" "$ERR.own" 2>/dev/null && { told_at=$(($(now_ms) - t0)); break; }
    [ -e "$OUT.own.rc" ] && break
    sleep 0.05
done
for _ in $(seq 400); do [ -e "$OUT.own.rc" ] && break; sleep 0.05; done
ended_at=$(($(now_ms) - t0))
[ -e "$OUT.own.rc" ] || kill -9 "$jobpid" 2>/dev/null
check "the job's own daemon ($own_d) stopped at $stopped_at ms, the ranks' CUDA at $cuda_at ms: told at $told_at ms (within 5000 of it)" \
    eval '[ -n "$own_d" ] && [ "$told_at" != none ] && [ "$told_at" -lt $((cuda_at + 5000)) ]' ||
    diag "$ERR.own"
check "... the line names the daemon, the ranks and what gsrun did" \
    eval 'grep "wedged" "$ERR.own" | grep -q "control daemon $own_d is stopped (state T)" &&
          grep "wedged" "$ERR.own" | grep -qE "ranks? [0-9,]+ waited" &&
          grep "wedged" "$ERR.own" | grep -q "started a fresh one (control daemon [0-9]*)"' ||
    diag "$ERR.own"
check "... the job ended by itself at $ended_at ms (under 20000), status $(rc_of own) (0: the ranks ran on without MPS, as on the H200)" \
    eval '[ "$(rc_of own)" = 0 ] && [ "$ended_at" -lt 20000 ]' || diag "$ERR.own" "$OUT.own"
check "... the stopped daemon is gone" wait_gone "${own_d:-0}" 5
check "... the ranks counted as what they became (on the GPU without MPS), not served, not blocked" \
    eval 'grep -qE "served 0 of 2 ranks as MPS clients; 2 ran on the GPU without MPS" "$ERR.own" &&
          ! grep -q "blocked on" "$ERR.own" && ! grep -q "mps=off" "$ERR.own"' || diag "$ERR.own"
check_clean "the job's own daemon stopped"

# --- 4b: wedged while another job's ranks hold it: left running (when in
# doubt gsrun does not kill), the next job gets another server.
(bounded_gsrun --mps-share=node -np 2 "$CT" --sleep 6000 >"$OUT.holder" 2>"$ERR.holder"
    echo $? >"$OUT.holder.rc") &
wait_for "$OUT.holder" "client=ok" 2 20
hd=$(shared_daemon)
[ -n "$hd" ] && kill -STOP "$hd"
job other --mps-share=node -np 2 "$CT" --sleep 300
wait_for "$OUT.holder.rc" . 1 30
check "wedged under another job's clients: the next job status $(rc_of other) (0), $(served other) of 2 clients, told it was left running" \
    eval '[ -n "$hd" ] && [ "$(rc_of other)" = 0 ] && [ "$(served other)" = 2 ] &&
          grep -q "control daemon $hd is stopped (state T); gsrun.s node service leaves it running (2 ranks of other jobs lease it" "$ERR.other"' ||
    diag "$ERR.other"
check "... the holding job ran to its end untouched: status $(rc_of holder) (0)" \
    eval '[ "$(rc_of holder)" = 0 ] && [ "$(served holder)" = 2 ]' || diag "$ERR.holder"
[ -n "$hd" ] && kill -CONT "$hd" # for the node service's bounded stop, and its quit
a=$(shared_agent)
[ -n "$a" ] && for _ in $(seq 200); do [ -e "/proc/$a" ] || break; sleep 0.05; done
check_clean "wedged under another job's clients"

# --- 5: healthy, a late CUDA start --------------------------------------------
job late --mps-share=job -np 2 "$CT" --start-wait 2500 --sleep 200
check "a healthy job whose ranks start CUDA 2.5 s late: status $(rc_of late) (0), 2 clients, no line of a wedge" \
    eval '[ "$(rc_of late)" = 0 ] && [ "$(served late)" = 2 ] && ! grep -q wedged "$ERR.late"' ||
    diag "$ERR.late"
check_clean "a late CUDA start"
finish
