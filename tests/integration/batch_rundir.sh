#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: launcher/batch_main.c, runtime/files/rundir_root.c, runtime/batch/provision.c
# Root's batch commands (gsrun prolog, epilog, task-prolog; gsrun status)
# against what other local users plant: the job's dir lives in a base only
# root can write and is made by root for the job's user; nothing a user put
# anywhere is followed, trusted, removed by root, or makes root's prolog or
# epilog fail or hang. Users: nobody (65534) and daemon (1), a job's user
# each; root's own jobs too. Stand-in MPS daemon and NVML. Needs root.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

if [ "$(id -u)" != 0 ] || ! getent passwd nobody daemon >/dev/null; then
    echo "1..0 # SKIP needs root and the users nobody and daemon"
    rm -rf "$TEST_TMP"
    exit 0 # a TAP plan of 0 with SKIP; 77 would count as an error
fi
chmod 755 "$TEST_TMP"  # the jobs' users must reach the base
chmod 1777 "$TMPDIR"   # a shared /tmp, where anyone may plant a name
BASE=$TEST_TMP/base             # root's base (GS_ROOT_RUNDIR on a real node)
node=$(hostname | cut -d. -f1)
export LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1
G="$GSRUN" # shorter lines below
CTL=--mps-control=$FAKE_CONTROL
as() { # as UID CMD...: CMD as that uid (its own group), with this environment
    local u=$1
    shift
    setpriv --reuid="$u" --regid="$u" --clear-groups "$@"
}
agent_of() { # the pid of job dir $1's running agent on this node (not its guard), or nothing
    local p
    for p in $(pgrep -f -- "gsrun-agent --job-dir $1 "); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = gsrun-agent ] && echo $p
    done
}

# --- the job's dir: made by root, for the job's user, where only root writes --
"$G" prolog --job 777 --user nobody --dir "$BASE" $CTL 2>"$ERR"
rc=$?
check "root's prolog for nobody's job: status $rc (0)" [ $rc -eq 0 ] || diag "$ERR"
check "  ... the base is root's, 0755; the job's dir nobody's, 0700" \
    [ "$(stat -c '%u %a' "$BASE")" = "0 755" -a "$(stat -c '%u %a' "$BASE/job-777")" = "65534 700" ]
check "  ... its agent runs as nobody" [ "$(stat -c %u /proc/$(agent_of "$BASE/job-777")/status 2>/dev/null)" = 65534 ]
as 65534 mkdir "$BASE/job-778" 2>/dev/null
check "a user cannot make a name in the base" [ $? -ne 0 -a ! -e "$BASE/job-778" ]
as 65534 mv "$BASE/job-777" "$BASE/x" 2>/dev/null
check "  ... nor move its own job's dir away (to swap in a link)" [ $? -ne 0 -a -d "$BASE/job-777" ]
SLURM_JOB_ID=777 SLURM_STEP_ID=0 SLURM_LOCALID=1 SLURM_STEP_TASKS_PER_NODE=4 SLURM_NODEID=0 \
    as 65534 "$G" task-prolog --dir "$BASE" >"$OUT" 2>"$ERR"
check "nobody's task prolog: export lines with its job's pipe dir, 50%" eval \
    'grep -qx "export CUDA_MPS_PIPE_DIRECTORY=$BASE/job-777/$node/g0" "$OUT" &&
     grep -qx "export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" "$OUT"' || diag "$OUT" "$ERR"

# A step with more tasks on the GPU than one server takes (here 2, set for
# the step): the job's agent starts the missing servers when its tasks ask
# (all at once, as Slurm runs them), and deals the tasks over them.
for t in 0 1 2 3 4; do
    SLURM_JOB_ID=777 SLURM_STEP_ID=1 SLURM_LOCALID=$t SLURM_STEP_TASKS_PER_NODE=5 SLURM_NODEID=0 \
        as 65534 "$G" task-prolog --mps-clients-per-server=2 --dir "$BASE" >"$OUT.$t" 2>"$ERR.$t" &
done
wait
pipes=$(for t in 0 1 2 3 4; do sed -n "s|^export CUDA_MPS_PIPE_DIRECTORY=$BASE/job-777/$node/||p" "$OUT.$t"; done |
    sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
check "5 tasks of a step, 2 clients a server: the job's agent adds 2 servers, the tasks dealt over 3 ($pipes)" \
    eval 'case "$pipes" in "g0x1 g1x2 g2x2 " | "g0x2 g1x2 g2x1 " | "g0x2 g1x1 g2x2 ") true ;; *) false ;; esac' ||
    diag "$ERR.0" "$ERR.4" "$OUT.4"
check "  ... its status lists 3 MPS daemons, each running" eval \
    '[ "$(grep -c "^gpu\.[0-9]*\.daemon_pid [1-9]" "$BASE/job-777/$node/status")" -eq 3 ] &&
     for p in $(sed -n "s/^gpu\.[0-9]*\.daemon_pid //p" "$BASE/job-777/$node/status"); do kill -0 $p || p=dead; [ $p != dead ] || break; done; [ "$p" != dead ]' ||
    diag "$BASE/job-777/$node/status"
SLURM_JOB_ID=777 SLURM_STEP_ID=2 SLURM_LOCALID=1 SLURM_STEP_TASKS_PER_NODE=2 SLURM_NODEID=0 \
    as 65534 "$G" task-prolog --dir "$BASE" >"$OUT" 2>"$ERR"
check "  ... a later step of 2 tasks uses the first server alone, at 100%" eval \
    'grep -qx "export CUDA_MPS_PIPE_DIRECTORY=$BASE/job-777/$node/g0" "$OUT" &&
     grep -qx "export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100" "$OUT"' || diag "$OUT" "$ERR"

# The job-long agent reads every connection without blocking (one event
# loop): 60 connections of the user's own that say nothing do not hold up a
# step's request for servers (one blocking 2 s read each: 17 s, issue 37).
as 65534 "$B/tests/progs/hostile_user" idle "$BASE/job-777/$node/agent.sock" 60 20 >"$OUT.slow" 2>&1 &
slow=$!
for _ in $(seq 100); do grep -q "connections open" "$OUT.slow" && break; sleep 0.05; done
t0=$(date +%s%N)
for t in 0 1 2 3 4 5 6; do
    SLURM_JOB_ID=777 SLURM_STEP_ID=3 SLURM_LOCALID=$t SLURM_STEP_TASKS_PER_NODE=7 SLURM_NODEID=0 \
        as 65534 "$G" task-prolog --mps-clients-per-server=2 --dir "$BASE" >"$OUT.$t" 2>"$ERR.$t" &
done
wait $(jobs -p | grep -vx "$slow")
ms=$((($(date +%s%N) - t0) / 1000000))
kill $slow 2>/dev/null
wait $slow 2>/dev/null
pipes=$(for t in 0 1 2 3 4 5 6; do sed -n "s|^export CUDA_MPS_PIPE_DIRECTORY=$BASE/job-777/$node/||p" "$OUT.$t"; done |
    sort -u | tr '\n' ' ')
check "60 silent connections open: a 7-task step gets its 4th server in $ms ms (under 6000), tasks on g0-g3 ($pipes)" \
    eval '[ $ms -lt 6000 ] && [ "$pipes" = "g0 g1 g2 g3 " ] && grep -q "idle: 60 of 60" "$OUT.slow"' ||
    diag "$OUT.slow" "$ERR.0" "$ERR.6"

# --- S2: a task never takes another user's dir --------------------------------
SLURM_JOB_ID=777 SLURM_STEP_ID=0 SLURM_LOCALID=1 SLURM_STEP_TASKS_PER_NODE=4 SLURM_NODEID=0 \
    as 1 "$G" task-prolog --dir "$BASE" >"$OUT" 2>"$ERR"
rc=$?
check "another user's task prolog for that job id: status $rc (0), nothing exported, says why" eval \
    '[ $rc -eq 0 ] && [ ! -s "$OUT" ] && grep -q "not a private directory of uid 1" "$ERR"' || diag "$ERR"
SLURM_JOB_ID=777 SLURM_STEP_ID=0 SLURM_LOCALID=1 SLURM_STEP_TASKS_PER_NODE=4 SLURM_NODEID=0 \
    as 1 "$G" task-prolog --mps=on --dir "$BASE" >"$OUT" 2>"$ERR"
check "  ... with --mps=on: status 71" [ $? -eq 71 -a ! -s "$OUT" ]

# --- the old predictable names are nobody's business now ----------------------
as 65534 mkdir -m 777 "$TMPDIR/gsrun.job-779" "/tmp/gsrun.job-779.$$"
"$G" prolog --job 779 --user root --dir "$BASE" $CTL 2>"$ERR"
rc=$?
check "dirs planted at the old names: root's prolog status $rc (0), they are left alone" eval \
    '[ $rc -eq 0 ] && [ "$(stat -c %u "$TMPDIR/gsrun.job-779")" = 65534 ]' || diag "$ERR"
rm -rf "$TMPDIR/gsrun.job-779" "/tmp/gsrun.job-779.$$"

# --- S1: a link planted in one's own job dir is never followed by root --------
as 65534 "$G" epilog --job 777 --dir "$BASE" 2>"$ERR"
rc=$?
# The epilog returns once the agent has released its lock, its last step
# before it exits: under load its process can be seen a moment longer.
for _ in $(seq 40); do [ -z "$(agent_of "$BASE/job-777")" ] && break; sleep 0.05; done
check "nobody's own epilog: status $rc (0), its agent gone, the dir stays for root" \
    [ $rc -eq 0 -a -z "$(agent_of "$BASE/job-777")" -a -d "$BASE/job-777" ] || diag "$ERR"
as 65534 ln -s "$BASE/job-779/$node" "$BASE/job-777/$node"
as 65534 ln -s "$BASE/job-779" "$BASE/job-777/deep"
"$G" epilog --job 777 --dir "$BASE" -v 2>"$ERR"
rc=$?
check "root's epilog of that job: status $rc (0), its dir gone" [ $rc -eq 0 -a ! -e "$BASE/job-777" ] || diag "$ERR"
check "  ... root's job 779 the links pointed at: still running, its dir whole" eval \
    '[ -n "$(agent_of "$BASE/job-779")" ] && [ -d "$BASE/job-779/$node/g0" ]'

# --- S3: a FIFO and a held lock do not hang root --------------------------------
"$G" prolog --job 780 --user nobody --dir "$BASE" $CTL 2>"$ERR"
as 65534 "$G" epilog --job 780 --dir "$BASE" 2>"$ERR"
as 65534 sh -c "mkdir '$BASE/job-780/$node' && mkfifo '$BASE/job-780/$node/state' '$BASE/job-780/$node/status'"
as 65534 flock "$BASE/job-780/$node" sleep 30 &
holder=$!
t0=$(date +%s%N)
timeout 60 "$G" status >"$OUT" 2>&1
check "root's gsrun status with a FIFO as a job's status: returns ($?)" [ $? -ne 124 ]
timeout 60 "$G" epilog --job 780 --dir "$BASE" 2>"$ERR"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "root's epilog with a FIFO as state and the dir's lock held: status $rc (0) after $ms ms, dir gone" \
    [ $rc -eq 0 -a $ms -lt 15000 -a ! -e "$BASE/job-780" ] || diag "$ERR"
kill $holder 2>/dev/null
wait $holder 2>/dev/null

# --- S5: what a user writes reaches root's terminal and JSON clean ---------------
fake=$TMPDIR/gsrun.Fake01
as 65534 mkdir -p "$fake/$node"
printf 'gsrun-status 1\nmps on\nmessage \033[31mred\033]0;title\007 \377bad\nagent_pid %d\ngpu.0.name \377\033[2J\nend\n' $$ |
    as 65534 tee "$fake/$node/status" >/dev/null
"$G" status >"$OUT" 2>&1
check "a user's status with escape sequences: root's gsrun status prints no control byte" eval \
    '! LC_ALL=C grep -q "[[:cntrl:]]" <(tr -d "\n" <"$OUT") && grep -q "?\[31mred" "$OUT"' || diag "$OUT"
"$G" status --json >"$OUT" 2>&1
json_ok() { # json_ok FILE [JOBS]: valid JSON in UTF-8 (with JOBS: that many jobs)
    python3 -c 'import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert len(sys.argv) < 3 or len(d["jobs"]) == int(sys.argv[2])' "$@"
}
if command -v python3 >/dev/null; then
    check "  ... and its --json is valid JSON in UTF-8" json_ok "$OUT" || diag "$OUT"
else
    ok "# SKIP --json checked as JSON (no python3 here)"
fi
rm -rf "$fake"
# F8: a byte that is not UTF-8 in TMPDIR itself.
odd=$TEST_TMP/$(printf 'odd\377dir')
mkdir -m 1777 "$odd"
as 65534 mkdir -p "$odd/gsrun.Fake02/$node"
printf 'gsrun-status 1\nmps on\nagent_pid %d\nend\n' $$ | as 65534 tee "$odd/gsrun.Fake02/$node/status" >/dev/null
TMPDIR=$odd "$G" status --json >"$OUT" 2>&1
if command -v python3 >/dev/null; then
    check "a TMPDIR with a 0xff byte: gsrun status --json is valid JSON in UTF-8, the job listed" \
        json_ok "$OUT" 1 || diag "$OUT"
else
    ok "# SKIP a TMPDIR with a 0xff byte: --json checked as JSON (no python3 here)"
fi
rm -rf "$odd"

# --- a user running prolog mode for itself: its own base, checked before use ----
mkdir -m 1777 "$TEST_TMP/pub"
as 65534 mkdir -m 700 "$TEST_TMP/pub/taken"
as 1 "$G" prolog --job 781 --dir "$TEST_TMP/pub/taken" $CTL 2>"$ERR"
rc=$?
check "a user's prolog in a base another user made first: status $rc (0), runs without MPS, says why" eval \
    '[ $rc -eq 0 ] && grep -q "owned by uid 65534, not by you.*the job runs without MPS" "$ERR"' || diag "$ERR"
as 1 "$G" prolog --mps=on --job 781 --dir "$TEST_TMP/pub/taken" $CTL 2>"$ERR"
check "  ... with --mps=on: status 71" [ $? -eq 71 ]
as 65534 touch "$TEST_TMP/pub/afile"
as 65534 ln -s "$TEST_TMP/pub/taken" "$TEST_TMP/pub/alink"
for plant in afile alink; do
    as 1 "$G" prolog --job 781 --dir "$TEST_TMP/pub/$plant" $CTL 2>"$ERR"
    rc=$?
    check "  ... a $plant planted at its base's name: status $rc (0), runs without MPS, nothing followed" eval \
        '[ $rc -eq 0 ] && grep -q "the job runs without MPS" "$ERR" && [ -z "$(ls -A "$TEST_TMP/pub/taken")" ]' ||
        diag "$ERR"
done
as 1 "$G" prolog --job 781 --dir "$TEST_TMP/pub/own" $CTL 2>"$ERR"
rc=$?
check "  ... in a base of its own: status $rc (0), private" \
    [ $rc -eq 0 -a "$(stat -c '%u %a' "$TEST_TMP/pub/own/job-781")" = "1 700" ] || diag "$ERR"
as 1 "$G" epilog --job 781 --dir "$TEST_TMP/pub/own" 2>"$ERR"
check "  ... its epilog: status 0, nothing left in its base" [ $? -eq 0 -a -z "$(ls -A "$TEST_TMP/pub/own")" ]
rm -rf "$TEST_TMP/pub"
# Without --dir its base is /dev/shm/gsrun-<uid> (/tmp/gsrun-<uid> where
# /dev/shm is not a usable shared directory), a name another user can take
# first; then the prolog takes the next free name of its own, and its task
# prolog and epilog find it there.
R=/dev/shm
[ -d /dev/shm ] && [ -k /dev/shm ] && [ -w /dev/shm ] || R=/tmp
if [ ! -e $R/gsrun-1 ] && [ ! -e $R/gsrun-1.1 ] && [ ! -e $R/gsrun-1.2 ]; then
    as 65534 mkdir -m 700 $R/gsrun-1
    as 65534 touch $R/gsrun-1.1
    as 1 "$G" prolog --job 785 $CTL 2>"$ERR"
    rc=$?
    check "a user's prolog whose $R/gsrun-1 and .1 another user took: status $rc (0), MPS in gsrun-1.2, says so" eval \
        "[ \$rc -eq 0 ] && [ -n \"\$(agent_of $R/gsrun-1.2/job-785)\" ] && grep -q 'owned by uid 65534.*; using $R/gsrun-1.2 instead' '$ERR'" ||
        diag "$ERR"
    SLURM_JOB_ID=785 SLURM_STEP_ID=0 SLURM_LOCALID=0 SLURM_STEP_TASKS_PER_NODE=2 SLURM_NODEID=0 \
        as 1 "$G" task-prolog >"$OUT" 2>"$ERR"
    check "  ... its task prolog finds the job there: export lines with its pipe dir" \
        grep -q "^export CUDA_MPS_PIPE_DIRECTORY=$R/gsrun-1.2/job-785/" "$OUT" || diag "$OUT" "$ERR"
    as 1 "$G" epilog --job 785 2>"$ERR"
    rc=$?
    check "  ... its epilog: status $rc (0), the agent gone, nothing left of the job" \
        [ $rc -eq 0 -a -z "$(agent_of $R/gsrun-1.2/job-785)" -a ! -e $R/gsrun-1.2/job-785 ] || diag "$ERR"
    rm -rf $R/gsrun-1 $R/gsrun-1.1 $R/gsrun-1.2
else
    ok "# SKIP a user's prolog whose $R/gsrun-1 another user took: $R/gsrun-1* exist here already"
    ok "# SKIP   ... its task prolog"
    ok "# SKIP   ... its epilog"
fi

# --- F7: two prologs of one job at once ------------------------------------------
"$G" prolog --job 782 --user nobody --dir "$BASE" $CTL 2>"$ERR.1" &
p1=$!
"$G" prolog --job 782 --user nobody --dir "$BASE" $CTL 2>"$ERR.2" &
p2=$!
wait $p1
r1=$?
wait $p2
r2=$?
check "two prologs of one job at once: both status 0 ($r1, $r2), one agent" eval \
    '[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ "$(agent_of "$BASE/job-782" | wc -l)" -eq 1 ]' || diag "$ERR.1" "$ERR.2"

# --- a user's tree that defeats recursion, and bytes on the socket -------------
H=$B/tests/progs/hostile_user
"$G" prolog --job 790 --user nobody --dir "$BASE" $CTL 2>"$ERR"
as 65534 mkdir "$BASE/job-790/deep" "$BASE/job-790/wide"
as 65534 "$H" deep "$BASE/job-790/deep" 25000 && as 65534 "$H" wide "$BASE/job-790/wide" 100000
check "nobody nests 25,000 directories and puts 100,000 entries in its job dir" [ $? -eq 0 ]
as 65534 ln -s / "$BASE/job-790/root-link"
t0=$(date +%s%N)
(ulimit -n 1024; "$G" epilog --job 790 --dir "$BASE") 2>"$ERR"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "  ... root's epilog with 1024 descriptors: status $rc (0), the job dir gone ($ms ms)" \
    [ $rc -eq 0 -a ! -e "$BASE/job-790" ] || diag "$ERR"
check "  ... the link in it removed, not followed" [ -d /etc -a -d /usr ]
others=$(leftover_procs | sort | tr '\n' ' ') # other jobs' (779, 782), still running
"$G" prolog --job 791 --user nobody --dir "$BASE" $CTL 2>"$ERR"
sock=$BASE/job-791/$node/agent.sock
as 65534 "$H" listen "$sock" 'gsrun: problem: \e[2J\e[31mred\e]0;title\a\n' >"$OUT.lis" &
lis=$!
# The agent's socket is nobody's too: wait until the listener says it took its place.
for _ in $(seq 50); do grep -q "^listening" "$OUT.lis" && break; sleep 0.1; done
"$G" epilog --job 791 --dir "$BASE" >"$OUT" 2>"$ERR"
check "a listener of the user's in place of agent.sock: the epilog prints its line cleaned" \
    eval 'grep -q "gsrun: problem: ?\[2J?\[31mred?\]0;title?" "$ERR" && ! grep -q "$(printf "\033")" "$ERR" "$OUT"' ||
    diag "$ERR"
check "  ... and root ended the agent it could not reach: nothing of the job left" \
    [ -z "$(agent_of "$BASE/job-791")" -a "$(leftover_procs | sort | tr '\n' ' ')" = "$others" -a ! -e "$BASE/job-791" ] ||
    { diag "$ERR"; for p in $(leftover_procs); do ps -o pid,sid,stat,args -p $p | tail -1; done | diag; }
# $! is the subshell of the function "as": the listener is its child.
pkill -f "hostile_user listen $sock" 2>/dev/null
kill $lis 2>/dev/null
wait $lis 2>/dev/null
# The socket removed and the agent stopped (SIGSTOP): root ends it all the same.
"$G" prolog --job 792 --user nobody --dir "$BASE" $CTL 2>"$ERR"
a792=$(agent_of "$BASE/job-792")
as 65534 rm "$BASE/job-792/$node/agent.sock"
as 65534 kill -STOP "$a792"
t0=$(date +%s%N)
"$G" epilog --job 792 --dir "$BASE" >"$OUT" 2>"$ERR"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "agent.sock removed and the agent stopped by its user: epilog status $rc (0) in $ms ms" \
    [ $rc -eq 0 ] || diag "$ERR"
check "  ... the agent, its daemons and its guard ended by root, the dir gone" \
    [ -z "$(agent_of "$BASE/job-792")" -a "$(leftover_procs | sort | tr '\n' ' ')" = "$others" -a ! -e "$BASE/job-792" ] ||
    { diag "$ERR"; for p in $(leftover_procs); do ps -o pid,sid,stat,args -p $p | tail -1; done | diag; }
check "  ... and said so" grep -q "process.* of the job's agent ended by root" "$ERR" || diag "$ERR"

# A child of the agent's that double-forks and calls setsid has left every
# session root could find; the job's keeper (root's, its subreaper) still
# holds it, and root's epilog ends it.
running() { ps -o stat= -p "$1" 2>/dev/null | grep -qv Z; } # a zombie is ended (PID 1 may not reap)
mkdir -m 1777 "$TEST_TMP/esc"
FAKE_MPS_ESCAPE=$TEST_TMP/esc/pids ROOT_SECRET=s3cret "$G" prolog --job 793 --user nobody --dir "$BASE" $CTL 2>"$ERR"
for _ in $(seq 50); do [ -s "$TEST_TMP/esc/pids" ] && break; sleep 0.1; done
e=$(head -1 "$TEST_TMP/esc/pids" 2>/dev/null)
a793=$(agent_of "$BASE/job-793")
keeper=$(ls -A "$BASE" | sed -n 's/^\.gs-keep-job-793\.\([0-9]*\)$/\1/p')
check "a process the agent's daemon left in a session of its own (double fork, setsid): pid ${e:-none}" \
    eval '[ -n "$e" ] && running "$e" && [ "$(ps -o sid= -p "$e")" != "$(ps -o sid= -p "$a793")" ] && [ "$(ps -o uid= -p "$e" | tr -d " ")" = 65534 ]' ||
    { diag "$ERR"; ps -o pid,ppid,sid,uid,args -p "${e:-1}" | diag; }
check "  ... held by the job's keeper: root's, its parent now (${keeper:-no keeper file})" \
    eval '[ -n "$keeper" ] && [ "$(ps -o ppid= -p "$e" | tr -d " ")" = "$keeper" ] && [ "$(ps -o uid= -p "$keeper" | tr -d " ")" = 0 ]' ||
    { ls -la "$BASE" | diag; ps -o pid,ppid,sid,uid,args -p "${e:-1}" | diag; }
tr '\0' '\n' <"/proc/$a793/environ" >"$OUT.env" 2>/dev/null
check "  ... the agent root started has a clean environment: nobody's basics, gsrun's settings, no root's secret" \
    eval 'grep -qx USER=nobody "$OUT.env" && grep -qx "HOME=$(getent passwd nobody | cut -d: -f6)" "$OUT.env" && grep -q "^GSRUN_MPS=" "$OUT.env" && ! grep -q ROOT_SECRET "$OUT.env" && ! grep -q "^OMPI_ALLOW_RUN_AS_ROOT" "$OUT.env"' ||
    diag "$OUT.env"
"$G" epilog --job 793 --dir "$BASE" >"$OUT" 2>"$ERR"
rc=$?
check "  ... root's epilog: status $rc (0), that process, the agent and the keeper gone, the dir too" \
    eval '[ $rc -eq 0 ] && ! running "$e" && [ -z "$(agent_of "$BASE/job-793")" ] && ! running "$keeper" && [ -z "$(ls -A "$BASE" | grep "job-793")" ]' ||
    { diag "$ERR"; ls -la "$BASE" | diag; }
check "  ... and said so" grep -q "process.* of the job's agent ended by root" "$ERR" || diag "$ERR"

# Names no terminal or log line shows as they are (issue 37): refused
# before anything is made, and the error line carries no control byte.
"$G" prolog --job 794 --user nobody --dir $'/run/gs-x\ny' $CTL >"$OUT" 2>"$ERR"
rc=$?
check "--dir with a newline: status $rc (2), one line, nothing made" \
    eval '[ $rc -eq 2 ] && [ "$(wc -l <"$ERR")" -eq 1 ] && ! ls -d /run/gs-x* 2>/dev/null | grep -q .' || diag "$ERR"
"$G" prolog --job $'79\n5' --user nobody --dir "$BASE" $CTL >"$OUT" 2>"$ERR"
rc=$?
check "--job with a newline: status $rc (2), one line" [ $rc -eq 2 -a "$(wc -l <"$ERR")" -eq 1 ] || diag "$ERR"
GSRUN_DISCOVERY=$'a\e[2Jb' "$G" -np 1 true >"$OUT" 2>"$ERR"
rc=$?
check "GSRUN_DISCOVERY with an escape sequence: status $rc (2), the line without the ESC byte" \
    eval '[ $rc -eq 2 ] && [ -s "$ERR" ] && ! grep -q $'"'"'\e'"'"' "$ERR"' || diag "$ERR"

for j in 779 782; do "$G" epilog --job $j --dir "$BASE" 2>>"$ERR"; done
check "every epilog done: nothing left in the base" [ -z "$(ls -A "$BASE")" ] || ls -la "$BASE" | diag
rm -rf "$BASE"
check_clean "batch jobs of several users"
finish
