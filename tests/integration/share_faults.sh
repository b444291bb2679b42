#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/service/agent_share.c, runtime/job/agent_lease.c, runtime/job/agent_lease_watch.c, runtime/agent/daemons.c, runtime/files/status.c, runtime/files/rundir.c, runtime/files/rundir_base.c, runtime/core/proctree.c, runtime/service/agent_share_tell.c
# --mps-share=node under faults (issue 46): sharing is an optimisation,
# never a reason to lose MPS. A shared agent killed with its guard and
# daemons leaves nothing the next job mistakes for a live daemon; a shared
# agent whose start failed goes at once; another user's directories under
# every guessable name of the base leave the user's jobs a base nobody could
# take first, where they share as usual; another user's name at the base, removed
# between two jobs, does not split them over two shared agents; a stuck
# shared agent costs a job neither its MPS nor its end, nor does a TMPDIR
# too long for the shared servers' sockets alone, nor a 65th job; the shared agent and its daemons keep no
# job's directory busy; a rank's process named like gsrun's helpers is ended
# with the job; a shared daemon's death is told to every job on it; root's
# `gsrun status` reads a status file no further than one can be.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
ME=$(id -u)
BASE=$TMPDIR/gsrun-$ME
SHARED_RE="$BASE/mps-share/[^/ ]*/g0"

shared_agents() { # the PIDs of this test's shared agents
    local p
    for p in $(pgrep -x gsrun-share); do
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "GS_TEST_MARK=$TEST_TMP" && echo "$p"
    done
}
wait_no_shared() { # wait_no_shared SECONDS: until no shared agent of this test runs
    for _ in $(seq $(($1 * 20))); do
        [ -z "$(shared_agents)" ] && return 0
        sleep 0.05
    done
    return 1
}
# kill_shared PID: SIGKILL to shared agent PID's process group, then waits
# (5 s at most) until it is reaped. Not until its environment is unreadable,
# as shared_agents sees it: the kernel drops a process's memory before its
# other threads have closed its files, so a job's agent could still find
# the lease open (seen under a Debian 13 make check beside this one: the
# next rank was answered before the agent heard of the end).
kill_shared() {
    [ -n "$1" ] || return 1
    kill -9 -- "-$(ps -o pgid= "$1" | tr -d ' ')"
    for _ in $(seq 100); do
        [ -e "/proc/$1" ] || return 0
        sleep 0.05
    done
    return 1
}
clean_share() { # clean_share "context"
    wait_no_shared 5
    [ -d "$BASE" ] && [ -z "$(ls -A "$BASE")" ] && rmdir "$BASE"
    check_clean "$1"
}
job() { # job OUT ERR args...: a gsrun job with --mps-share=node (status in OUT.rc)
    local o=$1 e=$2
    shift 2
    gsrun_fake 1 --mps-share=node "$@" >"$o" 2>"$e"
    echo $? >"$o.rc"
}

# 1. The shared agent, its guard and its daemon SIGKILLed together: the
# next job's server starts in a pipe dir made new, not beside the dead
# daemon's socket (before: "Cannot find MPS control daemon process", 70).
mkdir -p "$TEST_TMP/wd"
(cd "$TEST_TMP/wd" && job "$OUT.1" "$ERR.1" --mps-linger=60 -np 2 "$PROG")
pid=$(shared_agents | head -1)
check "a job with --mps-linger=60: status $(cat "$OUT.1.rc") (0), its shared agent stays (${pid:-none})" \
    [ "$(cat "$OUT.1.rc")" = 0 -a -n "$pid" ] || diag "$ERR.1"
# 2. It, its guard and its daemons keep no job's directory: '/' (before:
# the first job's, a tmpfs that could not be unmounted).
cwds=$( (echo "$pid"; pgrep -P "$pid"; pgrep -f "$FAKE_CONTROL") | while read -r p; do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "GS_TEST_MARK=$TEST_TMP" && readlink "/proc/$p/cwd"
done | sort | uniq -c | tr -s ' \n' '  ')
check "  ... it and its processes all run in '/' ($cwds)" \
    eval '[ -n "$cwds" ] && [ "$(echo "$cwds" | grep -o "/[^ ]*" | sort -u)" = / ]'
kill_shared "$pid"
wait_no_shared 5
job "$OUT.2" "$ERR.2" --mps=on -np 2 "$PROG"
check "  ... killed with its group: the next --mps=on job: status $(cat "$OUT.2.rc") (0), its 2 ranks on a shared server" \
    [ "$(cat "$OUT.2.rc")" = 0 -a "$(grep -c "mps=1 pipe=$SHARED_RE " "$OUT.2")" -eq 2 ] || diag "$ERR.2"
rm -rf "$BASE/mps-share" # what the killed agent left (its pipe dir, now the next one's, is gone)
clean_share "a killed shared agent"

# 2b. The shared agent killed (with its group) after it answered a job's
# lease, before the job's second rank came (a launcher of its own, through
# the rank prefix): that rank gets a server of the job's own, and the job
# says so once (issue 58; before: the dead shared server's pipe dir, on
# which the fake client failed with 46 in 3 of 3 runs).
RANK='echo "rank $GSRUN_LOCAL_RANK mps=$GSRUN_MPS_ACTIVE pipe=$CUDA_MPS_PIPE_DIRECTORY live=$([ -S "$CUDA_MPS_PIPE_DIRECTORY/control" ] && echo 1 || echo 0)"; sleep ${S:-0}'
(
    export LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 GSRUN_JOB_KEY=k$$ GSRUN_LOCAL_SIZE=2
    GSRUN_LOCAL_RANK=0 S=2 "$GSRUN" exec --mps-control="$FAKE_CONTROL" --mps-share=node -- \
        sh -c "$RANK" &
    for _ in $(seq 200); do
        grep -q "^rank 0 " "$OUT.1" && break
        sleep 0.05
    done
    pid=$(shared_agents | head -1)
    kill_shared "$pid"
    wait_no_shared 5
    GSRUN_LOCAL_RANK=1 "$GSRUN" exec --mps-control="$FAKE_CONTROL" --mps-share=node -- sh -c "$RANK"
    echo "rank 1 status $?"
    wait
) >"$OUT.1" 2>"$ERR.1"
for _ in $(seq 100); do # the report: on rank 0's stderr at the agent's end
    grep -q "ended before 1 of the job's 2 ranks" "$ERR.1" && break
    sleep 0.05
done
check "the shared agent killed between a job's two ranks: rank 0 on its server, rank 1 on a live server of the job's own" \
    eval 'grep -q "^rank 0 mps=1 pipe=$SHARED_RE " "$OUT.1" &&
        grep -q "^rank 1 mps=1 pipe=$BASE/exec-[^ ]*/g0 live=1$" "$OUT.1" &&
        grep -q "^rank 1 status 0$" "$OUT.1"' || diag "$OUT.1" "$ERR.1"
check "  ... one line says it, and that the rank told before was given the ended servers" \
    [ "$(grep -c "shared MPS on this node (.*) ended before 1 of the job's 2 ranks were told their servers: this job runs MPS servers of its own for them (the 1 told before were given the servers that ended)" "$ERR.1")" -eq 1 ] ||
    diag "$ERR.1"
rm -rf "$BASE/mps-share" "$BASE"/exec-*
clean_share "a shared agent killed between a job's ranks"

# A shared control daemon that dies while two jobs lease it: both are told,
# and status shows it (before: neither job said a word, status "daemon 0").
job "$OUT.1" "$ERR.1" -np 2 "$PROG" --sleep 4000 &
job "$OUT.2" "$ERR.2" -np 2 "$PROG" --sleep 4000 &
wait_status "$OUT.st" "jobs gsrun\.[A-Za-z0-9]*:2 gsrun\.[A-Za-z0-9]*:2"
dpid=$(sed -n 's/^  GPU 0 (.*: daemon \([0-9]*\) on .*/\1/p' "$OUT.st" | head -1)
[ -n "$dpid" ] && kill -9 "$dpid"
wait_status "$OUT.st" "control daemon exited, jobs"
st=$?
wait
check "the shared control daemon ($dpid) SIGKILLed under two jobs: gsrun status says it exited" [ $st -eq 0 ] ||
    diag "$OUT.st"
check "  ... each job is told, in one line" \
    [ "$(grep -c "the shared MPS control daemon exited while the job ran (signal 9); ranks on this server lost MPS" "$ERR.1")" -eq 1 -a \
        "$(grep -c "the shared MPS control daemon exited while the job ran (signal 9)" "$ERR.2")" -eq 1 ] ||
    diag "$ERR.1" "$ERR.2"
clean_share "a dead shared daemon"

# 3. A shared agent whose start failed (a bad control program) goes at once;
# the next job starts one with its own settings (before: it stayed up to the
# first job's --mps-timeout, and the next --mps=on job exited 70).
LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 "$GSRUN" --mps-control=/bin/false --mps-share=node \
    --mps-timeout=3600 -np 2 "$PROG" >"$OUT.1" 2>"$ERR.1"
rc=$?
wait_no_shared 3
left=$(shared_agents | wc -l)
check "--mps-control=/bin/false (auto): status $rc (0), no MPS, its shared agent gone within 3 s ($left left)" \
    [ $rc = 0 -a "$left" -eq 0 -a "$(grep -c 'mps=0' "$OUT.1")" -eq 2 ] || diag "$ERR.1"
# The shared agent it started had its settings: no second try of its own.
check "  ... one line of why, no servers of its own tried" \
    eval '[ "$(grep -c "MPS could not start: .*running without MPS" "$ERR.1")" -eq 1 ] && ! grep -q "servers of its own" "$ERR.1"' ||
    diag "$ERR.1"
job "$OUT.2" "$ERR.2" --mps=on -np 2 "$PROG"
check "  ... the next --mps=on job: status $(cat "$OUT.2.rc") (0), its 2 ranks on a shared server" \
    [ "$(cat "$OUT.2.rc")" = 0 -a "$(grep -c "mps=1 pipe=$SHARED_RE " "$OUT.2")" -eq 2 ] || diag "$ERR.2"
clean_share "a failed shared start"

# 4. Another user's directories under every name the user's base may take:
# the user's jobs meet in a base nobody could take first, <base>.x<random>,
# on its shared servers (before issue 52: servers of its own with a line of
# why; before issue 46: 70 under --mps=on, no MPS under auto).
if [ "$ME" = 0 ] && getent passwd nobody >/dev/null; then
    for n in "" $(seq -f .%g 16); do
        mkdir -m 700 "$BASE$n" && chown nobody "$BASE$n"
    done
    for mps in on auto; do
        job "$OUT.1" "$ERR.1" --mps=$mps -np 2 "$PROG"
        check "17 directories of nobody's as root's base, --mps=$mps: status $(cat "$OUT.1.rc") (0), 2 ranks on the shared servers in $BASE.x*" \
            [ "$(cat "$OUT.1.rc")" = 0 -a "$(grep -c "mps=1 pipe=$BASE\.x[A-Za-z0-9]\{6\}/mps-share/" "$OUT.1")" -eq 2 ] ||
            diag "$ERR.1" "$OUT.1"
        check "  ... and nothing said of it without -v" [ ! -s "$ERR.1" ] || diag "$ERR.1"
    done
    for n in "" $(seq -f .%g 16); do
        rmdir "$BASE$n"
    done
    wait_no_shared 5
    rmdir "$BASE".x* 2>/dev/null
    clean_share "a denied base"
else
    ok "# SKIP another user's directories: needs root and the user nobody"
fi

# 4b. Another user's directory at the user's base while the first job
# starts (its shared agent goes to <base>.1), then removed: the next job
# finds the same shared agent (before: it made <base>, a second agent and
# daemon, and the user's jobs were split).
if [ "$ME" = 0 ] && getent passwd nobody >/dev/null; then
    mkdir -m 700 "$BASE" && chown nobody "$BASE"
    job "$OUT.1" "$ERR.1" --mps-linger=60 -np 2 "$PROG"
    first=$(shared_agents)
    rmdir "$BASE"
    job "$OUT.2" "$ERR.2" --mps=on --mps-linger=60 -np 2 "$PROG"
    check "nobody's dir at root's base, then gone: both jobs 0 ($(cat "$OUT.1.rc"), $(cat "$OUT.2.rc")), on one shared agent ($(echo $(shared_agents)))" \
        [ "$(cat "$OUT.1.rc")" = 0 -a "$(cat "$OUT.2.rc")" = 0 -a -n "$first" -a "$(shared_agents)" = "$first" ] ||
        diag "$ERR.1" "$ERR.2"
    check "  ... the second job's ranks on the first one's server, in $BASE.1" \
        [ "$(grep -c "mps=1 pipe=$BASE\.1/mps-share/[^/ ]*/g0 " "$OUT.2")" -eq 2 -a ! -e "$BASE" ] || diag "$OUT.2"
    kill $(shared_agents) 2>/dev/null
    wait_no_shared 5
    rm -rf "$BASE.1"
    clean_share "a base taken, then freed"
else
    ok "# SKIP a base taken, then freed: needs root and the user nobody"
fi

# 4c. A stuck shared agent (SIGSTOPped): a job does not wait for it (before
# issue 58: its whole --mps-timeout) and runs servers of its own at once,
# naming the stopped agent, to which it sent nothing (the look at its state
# before the lease is written; service.sh 4b stops it with a lease in flight); a gsrun told to stop meanwhile ends at once, its
# agent with it (before issue 37: SIGTERM took 25 s and left the job's agent).
job "$OUT.1" "$ERR.1" --mps-linger=60 -np 2 "$PROG"
stuck=$(shared_agents)
kill -STOP $stuck
t0=$(date +%s%N)
job "$OUT.2" "$ERR.2" --mps=on --mps-timeout=3 -np 2 "$PROG"
ms=$((($(date +%s%N) - t0) / 1000000))
check "a stopped shared agent ($stuck), --mps-timeout=3: status $(cat "$OUT.2.rc") (0) after $ms ms (under 3000: not waited for), 2 ranks on servers of its own" \
    [ "$(cat "$OUT.2.rc")" = 0 -a "$ms" -lt 3000 -a "$(grep -c "mps=1 pipe=$TMPDIR/gsrun\.[^/]*/" "$OUT.2")" -eq 2 ] ||
    diag "$ERR.2" "$OUT.2"
check "  ... one line names the stopped agent, sent it nothing ('is stopped ... answers no job') and says the job runs servers of its own" \
    [ "$(grep -c "shared MPS agent on this node (PID $stuck, .*) is stopped (SIGSTOP, or a suspended session) and answers no job: .*; this job runs MPS servers of its own" "$ERR.2")" -eq 1 ] ||
    diag "$ERR.2"
t0=$(date +%s%N)
gsrun_fake_exec 1 --mps-share=node --mps=on -np 2 "$PROG" --sleep 30000 >"$OUT.3" 2>"$ERR.3" &
g=$!
sleep 1
kill -TERM $g
wait $g
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
sleep 0.2
agents=$(pgrep -f "gsrun-agent --job-dir $TMPDIR/gsrun\." | wc -l)
check "  ... SIGTERM to a job beside it: gsrun ends in $ms ms (under 5000), status $rc, $agents job agent(s) left" \
    [ "$ms" -lt 5000 -a "$rc" -ne 0 -a "$agents" -eq 0 ] || diag "$ERR.3"
kill -CONT $stuck
kill $stuck
clean_share "a stuck shared agent"

# 4d. A TMPDIR short enough for a job's own MPS sockets and too long for the
# shared servers' (mps-share/ in the user's base): the first such length
# from 40 up runs the job on servers of its own (before: the shared agent
# refused it, status 70, as if MPS could not start).
found=""
for len in $(seq 40 90); do
    d=$TEST_TMP/$(printf 'x%.0s' $(seq $((len - ${#TEST_TMP} - 1))))
    mkdir -p -m 1777 "$d"
    TMPDIR=$d job "$OUT.1" "$ERR.1" --mps=on -np 2 "$PROG"
    rmdir "$d/gsrun-$ME" 2>/dev/null
    if [ "$(cat "$OUT.1.rc")" != 0 ] || grep -q "too long" "$ERR.1"; then
        found=$len
        rm -rf "$d"
        break
    fi
    rm -rf "$d"
done
check "TMPDIR of $found bytes, the first too long for the shared sockets: status $(cat "$OUT.1.rc") (0), 2 ranks on servers of its own" \
    [ -n "$found" -a "$(cat "$OUT.1.rc")" = 0 -a "$(grep -c "mps=1 pipe=$TEST_TMP/x*/gsrun\.[^/]*/" "$OUT.1")" -eq 2 ] ||
    diag "$ERR.1" "$OUT.1"
check "  ... one line says the shared sockets would be too long and the job runs servers of its own" \
    [ "$(grep -c "would be too long (108 bytes); set TMPDIR to a shorter directory to share them; this job runs MPS servers of its own" "$ERR.1")" -eq 1 ] ||
    diag "$ERR.1"
clean_share "a long TMPDIR"

# 4e. The shared agent's 64 leases all held (here by a process of the
# user's that leases like a job): the 65th job runs servers of its own and
# says why in one line.
job "$OUT.1" "$ERR.1" --mps-linger=60 -np 2 "$PROG"
sock=$(ls -d "$BASE"/mps-share/*/ | head -1)agent.sock
"$B/tests/progs/hostile_user" hold "$sock" 64 30 "lease 0 filler 1 GPU-fa4e0000-0000-4000-8000-000000000000 1" \
    >"$OUT.hold" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q "^hold:" "$OUT.hold" && break; sleep 0.1; done
job "$OUT.2" "$ERR.2" --mps=on -np 2 "$PROG"
check "64 leases held ($(cat "$OUT.hold")), the 65th job: status $(cat "$OUT.2.rc") (0), 2 ranks on servers of its own" \
    [ "$(cat "$OUT.hold")" = "hold: 64 of 64 leased" -a "$(cat "$OUT.2.rc")" = 0 -a \
      "$(grep -c "mps=1 pipe=$TMPDIR/gsrun\.[^/]*/" "$OUT.2")" -eq 2 ] || diag "$ERR.2" "$OUT.2"
check "  ... one line says the shared MPS serves as many jobs as it can and the job runs its own" \
    [ "$(grep -c "serves as many jobs as it can; this job runs MPS servers of its own" "$ERR.2")" -eq 1 ] ||
    diag "$ERR.2"
kill $holder $(shared_agents) 2>/dev/null
wait $holder 2>/dev/null
clean_share "64 leases held"

# 5. A rank's process named like gsrun's shared agent (a copy of sleep) is
# ended with the job (before: spared by its name, it outlived the job).
cp "$(command -v sleep)" "$TEST_TMP/gsrun-share"
gsrun_fake 1 --mps-share=job -np 1 sh -c "setsid '$TEST_TMP/gsrun-share' 300 </dev/null >/dev/null 2>&1 &" \
    >"$OUT" 2>"$ERR"
rc=$?
sleep 0.2
left=$(pgrep -f "^$TEST_TMP/gsrun-share" | wc -l)
check "a rank's copy of sleep named gsrun-share: status $rc (0), ended with the job ($left left)" \
    [ $rc = 0 -a "$left" -eq 0 ] || diag "$ERR"
pkill -9 -f "^$TEST_TMP/gsrun-share" 2>/dev/null
check "  ... gsrun says it ended it" grep -q "ended 1 process the job's ranks left running" "$ERR"
clean_share "a process named like gsrun's"

# 6. A status file of 4 GiB (sparse) where the shared agent's goes: read no
# further than a status file can be (before: 19 s here, 36 s for 16 GiB).
node=$(hostname | cut -d. -f1 | tr -cd 'A-Za-z0-9_-' | cut -c1-32) # as gs_rundir_node_name
mkdir -p -m 700 "$BASE/mps-share/${node:-node}"
printf 'gsrun-status 1\n' >"$BASE/mps-share/${node:-node}/status"
truncate -s 4G "$BASE/mps-share/${node:-node}/status"
t0=$(date +%s%N)
"$GSRUN" status >"$OUT" 2>&1
ms=$((($(date +%s%N) - t0) / 1000000))
check "gsrun status beside a 4 GiB status file: done in $ms ms (under 2000)" [ "$ms" -lt 2000 ] || diag "$OUT"
rm -rf "$BASE/mps-share"
clean_share "a huge status file"

# 7. gsrun exec -h names the share options it takes.
"$GSRUN" exec -h >"$OUT" 2>&1
check "gsrun exec -h names --mps-share, --mps-linger and --mps-priority" \
    eval 'grep -q -- "--mps-share" "$OUT" && grep -q -- "--mps-linger" "$OUT" && grep -q -- "--mps-priority" "$OUT"'
finish
