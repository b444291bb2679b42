#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/batch/keeper.c, runtime/core/cgroup.c, runtime/core/proctree.c, runtime/batch/endjob.c
# Nothing a job's user starts outlives root's epilog (issue 37): code the
# user runs in the tree root's prolog started for the job (here the stand-in
# MPS daemon runs it, in a session of its own) tries a fork chain with no
# pause between hops, a thread group whose leader has exited (state Z) with
# a child, and a fork bomb up to the user's process limit. Root's epilog
# ends each within its bound, exits 0, and leaves nothing of it running,
# not even under PID 1: through the job's cgroup v2 where one can be made
# (this machine and CI: the hybrid layout's /sys/fs/cgroup/unified), and
# through the keeper's process tree where none can (GSRUN_CGROUP_ROOT=none,
# as on a host without cgroup v2). Users: nobody (a job's user) and games
# (the bomb's, alone: its process limit counts every process of the user).
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

if [ "$(id -u)" != 0 ] || ! getent passwd nobody games >/dev/null; then
    echo "1..0 # SKIP needs root and the users nobody and games"
    rm -rf "$TEST_TMP"
    exit 0 # a TAP plan of 0 with SKIP; 77 would count as an error
fi
chmod 755 "$TEST_TMP"
BASE=$TEST_TMP/base
export LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1
CTL=--mps-control=$FAKE_CONTROL
H=$B/tests/progs/hostile_user
GAMES=$(id -u games)
mkdir -m 1777 "$TEST_TMP/esc"
# The bound root's epilog is held to, whole (the agent's stop, the keeper's
# end of the job, 5 s at most by GS_WAIT_ENDJOB_MS, the sessions' pass).
BOUND_MS=10000

running() { # running NAME: how many processes named NAME run (a zombie leader with threads does)
    if [ "$1" = gsesc-chain ]; then
        # Each hop lives microseconds: no process list sees one. The chain
        # runs while its hop count grows: written every 256 hops, which took
        # over 0.3 s on a loaded 2-core machine (a fixed 0.3 s apart said
        # "0 running" of a live chain in 4 of 15 runs), so up to 3 s.
        local a b
        a=$(cat "$TEST_TMP/esc/hops" 2>/dev/null)
        for _ in $(seq 30); do
            sleep 0.1
            b=$(cat "$TEST_TMP/esc/hops" 2>/dev/null)
            [ -n "$b" ] && [ "$a" != "$b" ] && { echo 1; return; }
        done
        echo 0
        return
    fi
    ps -eo stat=,nlwp=,comm= | awk -v n="$1" '$3 == n && ($1 !~ /^Z/ || $2 > 1)' | wc -l
}
under_init() { # under_init NAME: how many processes named NAME PID 1 holds, zombies too
    ps -eo ppid=,comm= | awk -v n="$1" '$1 == 1 && $2 == n' | wc -l
}
wait_running() { # wait_running NAME N SECONDS: until N of them run
    for _ in $(seq $(($3 * 10))); do
        [ "$(running "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# The job's cgroups under gsrun's (sorted; none where there is no cgroup v2).
cgroups_of() { [ -n "${cg2:-}" ] && ls -d "$cg2"/gsrun/job-$1.* 2>/dev/null | sort; }

# escape MODE JOB USER NAME N WHAT: a job of USER whose tree runs WHAT (a
# hostile_user command), N processes named NAME awaited; then root's epilog.
escape() {
    local mode=$1 job=$2 user=$3 name=$4 n=$5 what=$6 cg=
    [ "$mode" = tree ] && cg=none
    rm -f "$TEST_TMP/esc/pids" "$TEST_TMP/esc/hops" "$TEST_TMP/esc/cgroup" "$TEST_TMP/esc/err"
    # Another run's cgroup of the same job name (a run killed midway) is
    # not this one's to remove: only those made from here on count.
    local stale
    stale=$(cgroups_of "$job")
    GSRUN_CGROUP_ROOT=$cg FAKE_MPS_ESCAPE=$TEST_TMP/esc/pids FAKE_MPS_ESCAPE_EXEC="cat /proc/self/cgroup >$TEST_TMP/esc/cgroup; exec $H $what 2>$TEST_TMP/esc/err" \
        "$GSRUN" prolog --job "$job" --user "$user" --dir "$BASE" $CTL 2>"$ERR"
    local rc=$?
    wait_running "$name" "$n" 60
    local seen
    seen=$(running "$name")
    local where
    where=$(grep '^0::' "$TEST_TMP/esc/cgroup" 2>/dev/null)
    check "$mode: a job of $user's whose tree runs '${what%% *} ...': prolog $rc (0), $seen processes running (at least $n)" \
        [ $rc -eq 0 -a "$seen" -ge "$n" ] ||
        { diag "$ERR" "$TEST_TMP/esc/err"; echo "# $user: $(ps -u "$user" -o stat=,comm= | sort | uniq -c | head -5 | tr '\n' ' ')"; }
    if [ "$mode" = cgroup ]; then
        check "  ... all in the job's cgroup ($where)" eval '[[ "$where" == */gsrun/job-$job.* ]]'
    else
        check "  ... in no job cgroup of gsrun's (${where:-no cgroup line written})" \
            eval '[ -n "$where" ] && [[ "$where" != */gsrun/* ]]'
    fi
    local t0 ms
    t0=$(date +%s%N)
    GSRUN_CGROUP_ROOT=$cg "$GSRUN" epilog --job "$job" --dir "$BASE" >"$OUT" 2>"$ERR"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    sleep 0.2 # what escaped would show itself now
    local left init
    left=$(running "$name")
    init=$(under_init "$name")
    check "  ... root's epilog: status $rc (0) in $ms ms (under $BOUND_MS), $left running, $init under PID 1" \
        [ $rc -eq 0 -a "$ms" -lt $BOUND_MS -a "$left" -eq 0 -a "$init" -eq 0 ] ||
        { diag "$ERR"; ps -eo pid,ppid,stat,comm | awk -v n="$name" '$4 == n' | head -5 | diag; }
    check "  ... says how many it ended, no warning" eval \
        'grep -q "process.* of the job.s agent ended by root" "$ERR" && ! grep -q warning "$ERR"' || diag "$ERR"
    local made
    made=$(comm -13 <(echo "$stale") <(cgroups_of "$job") | tr '\n' ' ')
    check "  ... the job's dir, its keeper file and its cgroup gone (${made:-none left}${stale:+; kept, from another run: $(echo $stale)})" eval \
        '[ -z "$(ls -A "$BASE" | grep "job-$job")" ] && [ -z "$made" ]' ||
        ls -la "$BASE" | diag
    # Should a check fail: nothing of the test outlives it.
    pkill -9 -x "$name" 2>/dev/null
    [ "$user" = games ] && setpriv --reuid="$GAMES" --regid="$GAMES" --clear-groups kill -9 -1 2>/dev/null
}

# A cgroup2 hierarchy root can write (not in a chroot without /sys, nor in
# a container whose /sys/fs/cgroup is read-only): the cgroup cases run.
modes=tree
cg2=$(awk '$0 ~ / - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
[ -n "$cg2" ] && [ -w "$cg2" ] && modes="cgroup tree"
pid_max=$(cat /proc/sys/kernel/pid_max)
# The bomb at the user's limit: 1,500 processes a core, 9,000 at most, where
# the PIDs allow it. A 9,000-process bomb froze a 2-core machine (kernel
# 6.18) for 17 s without gsrun: no process list, not the epilog's pass, ran.
N=$(($(nproc) * 1500))
[ $N -gt 9000 ] && N=9000
[ $((pid_max / 3)) -lt $N ] && N=$((pid_max / 3))
for mode in $modes; do
    escape $mode 801 nobody gsesc-chain 1 "chain gsesc-chain 120 $TEST_TMP/esc/hops"
    escape $mode 802 nobody gsesc-leader 2 "leader gsesc-leader 120"
    escape $mode 803 games gsesc-bomb $((N - 100)) "bomb gsesc-bomb $N 120"
done
[ "$modes" = tree ] && ok "# SKIP the same through the job's cgroup: no writable cgroup v2 here"

rm -rf "$BASE"
check_clean "escapes from a job's end"
finish
