#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: launcher/exec_main.c, runtime/rank/jobkey.c, runtime/batch/provision.c, pmix/discover_env.c
# The rank prefix, `gsrun exec`, under launchers gsrun does not start: plain
# mpirun with the prefix in front of the program, and a launcher of the
# test's own that sets only GSRUN_LOCAL_RANK/_SIZE. One daemon per job and
# node, every rank's environment, exit status as without the prefix, the
# end of a killed launcher, and nothing left.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
REC=$TEST_TMP/record
export LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1
export GSRUN_MPS_CONTROL=$FAKE_CONTROL
LEFTOVER_EXES=$B/launcher/gsrun-shim
base=$TMPDIR/gsrun-$(id -u)
jobs_left() { ls -A "$base" 2>/dev/null | tr '\n' ' '; }
# No launcher waits for the node agent: it quits MPS and removes the job's
# dir just after the last rank has exited, while the launcher may already
# have returned. Waits (5 s at most) until that is done.
settle() {
    for _ in $(seq 100); do
        [ -z "$(leftover_procs)" ] && [ -z "$(jobs_left)" ] && return 0
        sleep 0.05
    done
    return 1
}

# Plain mpirun, the prefix in front of each rank.
FAKE_MPS_RECORD=$REC mpirun -np 4 "$GSRUN" exec -- "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "mpirun -np 4 gsrun exec -- prog: status 0" [ $rc -eq 0 ] || diag "$ERR"
check "every rank has MPS at 50 % (4 ranks on one GPU)" \
    [ "$(grep -c 'mps=1 pipe=/.*/g0 .*pct=50 ' "$OUT")" -eq 4 ]
check "local ranks 0-3 each once" [ "$(grep -o 'local=[0-9]*/4' "$OUT" | sort -u | wc -l)" -eq 4 ]
check "one MPS control daemon for the job" [ "$(grep -c '^start ' "$REC")" -eq 1 ]
check "its run dir is in the user's private base ($base)" grep -q "pipe=$base/exec-" "$REC"
check "the base is the user's, mode 0700" [ "$(stat -c '%u %a' "$base")" = "$(id -u) 700" ]
check "the job's dir is gone (within 5 s of mpirun's return)" settle || echo "# left: $(jobs_left)"
check "nothing printed to stderr without -v" [ ! -s "$ERR" ] || diag "$ERR"
settle
rm -rf "$base"
check_clean "mpirun with the prefix"

# Several servers through the prefix (2 clients each: 5 ranks, 3 servers).
FAKE_MPS_RECORD=$REC.s mpirun -np 5 "$GSRUN" exec --mps-clients-per-server=2 -- "$PROG" --mps-client \
    >"$OUT" 2>"$ERR"
rc=$?
check "gsrun exec --mps-clients-per-server=2, 5 ranks: status 0, three servers, every rank a client" \
    [ $rc -eq 0 -a "$(grep -c '^start ' "$REC.s")" -eq 3 -a "$(grep -c 'client=ok' "$OUT")" -eq 5 ] ||
    diag "$ERR"
settle
rm -rf "$base"
check_clean "the prefix, three servers"

# `gsrun status` lists the prefix's jobs (in the user's private base).
mpirun -np 2 "$GSRUN" exec -- "$PROG" --sleep 4000 >"$OUT" 2>"$ERR" &
job=$!
wait_status "$TEST_TMP/st" "^job exec-[^ ]* (uid $(id -u)): .*MPS on, 2 of 2 ranks registered"
check "gsrun status lists a gsrun exec job, MPS on, its ranks" \
    grep -q "^job exec-[^ ]* (uid $(id -u)): .*MPS on, 2 of 2 ranks registered" "$TEST_TMP/st" ||
    diag "$TEST_TMP/st"
wait $job
settle
rm -rf "$base"
check_clean "status of a gsrun exec job"

# Another user made this user's base first ($TMPDIR/gsrun-<uid>): the ranks
# agree on the next name, say so once, and still get MPS.
if [ "$(id -u)" = 0 ] && getent passwd nobody >/dev/null; then
    mkdir -m 700 "$base" && chown nobody "$base"
    mpirun -np 3 "$GSRUN" exec --mps=on -- "$PROG" >"$OUT" 2>"$ERR"
    rc=$?
    check "$base taken by nobody: status $rc (0), every rank under MPS in $base.1" \
        [ $rc -eq 0 -a "$(grep -c "mps=1 pipe=$base\.1/exec-" "$OUT")" -eq 3 ] || diag "$OUT" "$ERR"
    check "  ... one warning naming the owner and the name used" \
        [ "$(grep -c "warning: run directory '$base' is owned by uid 65534, not by you; using $base.1 instead" "$ERR")" -eq 1 ] ||
        diag "$ERR"
    check "  ... the planted directory left as it was" [ "$(stat -c '%U %a' "$base")" = "nobody 700" ]
    for _ in $(seq 100); do
        [ -z "$(ls -A "$base.1" 2>/dev/null)" ] && [ -z "$(leftover_procs)" ] && break
        sleep 0.05
    done
    rm -rf "$base" "$base.1"
    check_clean "a user's base taken by another user"

    # Issue 37: nobody holds $base and makes and removes $base.1 in a loop
    # while 20 jobs start, so that a rank looking at $base.1 may find it
    # nobody's, absent, or gone between two looks. The node's first rank
    # chooses, the others find where it went: no job fails or waits out a
    # timeout, every job's ranks share one pipe dir.
    chmod 755 "$TEST_TMP"
    chmod 1777 "$TMPDIR"
    mkdir -m 700 "$base" && chown nobody "$base"
    setpriv --reuid=65534 --regid=65534 --clear-groups \
        sh -c "while :; do mkdir '$base.1' 2>/dev/null; rmdir '$base.1' 2>/dev/null; done" &
    flapper=$!
    bad=0 slow=0 split=0 worst=0
    for i in $(seq 20); do
        t0=$(date +%s%N)
        mpirun -np 4 "$GSRUN" exec --mps=auto -- "$PROG" >"$OUT" 2>"$ERR"
        rc=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        [ $ms -gt $worst ] && worst=$ms
        [ $rc -ne 0 ] && bad=$((bad + 1)) && diag "$ERR"
        [ $ms -gt 20000 ] && slow=$((slow + 1))
        [ "$(grep -o 'mps=1 pipe=[^ ]*' "$OUT" | sort -u | wc -l)" -eq 1 ] &&
            [ "$(grep -c 'mps=1 pipe=' "$OUT")" -eq 4 ] || { split=$((split + 1)) && diag "$OUT"; }
    done
    kill $flapper 2>/dev/null
    wait $flapper 2>/dev/null
    check "20 jobs while nobody flaps $base.1: $bad failed, $split with ranks apart or without MPS, slowest $worst ms" \
        [ $bad -eq 0 -a $split -eq 0 -a $slow -eq 0 ]
    for _ in $(seq 100); do [ -z "$(leftover_procs)" ] && break; sleep 0.05; done
    rm -rf "$base".* # the bases of ours the jobs made (.1, .2, ...)
    # Every guessable name nobody's: the ranks meet in a base nobody could
    # take first, <base>.x<random> (issue 52; before: 71 under --mps=on, no
    # MPS under auto).
    for k in $(seq 16); do mkdir -m 700 "$base.$k" && chown nobody "$base.$k"; done
    for mps in on auto; do
        mpirun -np 4 "$GSRUN" exec --mps=$mps -- "$PROG" >"$OUT" 2>"$ERR"
        rc=$?
        check "every name taken, --mps=$mps: status $rc (0), the 4 ranks on one server in $base.x*" \
            [ $rc -eq 0 -a "$(grep -o "mps=1 pipe=$base\.x[A-Za-z0-9]\{6\}/[^ ]*" "$OUT" | sort -u | wc -l)" -eq 1 -a \
                "$(grep -c 'mps=1 pipe=' "$OUT")" -eq 4 ] || diag "$OUT" "$ERR"
    done
    for _ in $(seq 100); do [ -z "$(leftover_procs)" ] && break; sleep 0.05; done
    rm -rf "$base" "$base".*
    check_clean "a user's base fought over by another user"
fi

# The prefix as the site's (or user's) fork agent: plain mpirun, nothing in
# front of the program on the command line, the setting in the environment
# or a parameter file, as doc/openmpi.md tells a user or a site. Open MPI 4
# reads orte_fork_agent, Open MPI 5 (PRRTE) odls_base_exec_agent; each
# ignores the other's name.
agent_case() { # agent_case WHAT [VAR=VALUE...]: plain mpirun -np 4 with those set
    local what=$1
    shift
    rm -f "$REC"
    env "$@" FAKE_MPS_RECORD="$REC" mpirun -np 4 "$PROG" >"$OUT" 2>"$ERR"
    rc=$?
    check "the prefix as fork/exec agent from $what (plain mpirun -np 4 prog): status 0 ($rc)" \
        [ $rc -eq 0 ] || diag "$ERR"
    check "  ... every rank has MPS at 50 %, one daemon" \
        eval '[ "$(grep -c "mps=1 pipe=/.*/g0 .*pct=50 " "$OUT")" -eq 4 ] && [ "$(grep -c "^start " "$REC")" -eq 1 ]' ||
        diag "$OUT"
    settle
    rm -rf "$base"
    check_clean "the prefix from $what"
}
agent_case "the environment" OMPI_MCA_orte_fork_agent="$GSRUN exec" PRTE_MCA_odls_base_exec_agent="$GSRUN exec"
# A user's file (Open MPI 4: ~/.openmpi/mca-params.conf; 5, PRRTE:
# ~/.prte/mca-params.conf) always; the site's file only where the test may
# change it (GSRUN_TEST_SITE_PARAMS: tests/ompi5/check.sh sets it in its
# Debian 13 root).
if mpirun --version 2>/dev/null | grep -q "Open MPI) 4"; then
    ufile=.openmpi/mca-params.conf pline="orte_fork_agent = $GSRUN exec"
else
    ufile=.prte/mca-params.conf pline="odls_base_exec_agent = $GSRUN exec"
fi
mkdir -p "$TEST_TMP/home/${ufile%/*}"
echo "$pline" >"$TEST_TMP/home/$ufile"
agent_case "the user's ~/$ufile" HOME="$TEST_TMP/home"
if [ -n "${GSRUN_TEST_SITE_PARAMS:-}" ]; then
    cp "$GSRUN_TEST_SITE_PARAMS" "$TEST_TMP/site.saved"
    # Debian's file may end without a newline: the line must stand alone.
    printf '\n%s\n' "$pline" >>"$GSRUN_TEST_SITE_PARAMS"
    agent_case "the site's $GSRUN_TEST_SITE_PARAMS"
    cp "$TEST_TMP/site.saved" "$GSRUN_TEST_SITE_PARAMS"
fi

# The exit status comes through as without the prefix.
mpirun -np 2 sh -c 'exit 3' >/dev/null 2>&1
plain=$?
mpirun -np 2 "$GSRUN" exec -- sh -c 'exit 3' >"$OUT" 2>"$ERR"
check "a failing rank: the same status as plain mpirun ($plain)" [ $? -eq $plain ]
settle
rm -rf "$base"
check_clean "a failing rank"

# Two jobs at once get two daemons and two dirs. The second starts once the
# first one's daemon runs: two Open MPI 4 mpiruns started in the same
# instant can race making their session dirs ("ompi.<host>.0: File exists",
# orte_init fails: Open MPI's own, seen once in 15 pairs under load).
rm -f "$REC"
FAKE_MPS_RECORD=$REC mpirun -np 2 "$GSRUN" exec -- "$PROG" --sleep 1500 >"$OUT.1" 2>&1 &
a=$!
for _ in $(seq 200); do [ "$(grep -sc '^start ' "$REC")" = 1 ] && break; sleep 0.05; done
FAKE_MPS_RECORD=$REC mpirun -np 2 "$GSRUN" exec -- "$PROG" >"$OUT.2" 2>&1
wait $a
check "two jobs at once: two daemons, in two job dirs" \
    [ "$(grep '^start ' "$REC" | grep -o "pipe=$base/exec-[^/]*" | sort -u | wc -l)" -eq 2 ]
check "  ... and each job's ranks all had MPS" \
    [ "$(cat "$OUT.1" "$OUT.2" | grep -c 'mps=1 .*pct=100 ')" -eq 4 ] || diag "$OUT.1" "$OUT.2"
settle
rm -rf "$base"
check_clean "two jobs at once"

# A launcher of our own: only GSRUN_LOCAL_RANK/_SIZE, the ranks' common
# parent names the job (this shell's subshell).
(
    for r in 0 1 2; do
        GSRUN_LOCAL_RANK=$r GSRUN_LOCAL_SIZE=3 "$GSRUN" exec -- sh -c \
            'echo "rank $GSRUN_LOCAL_RANK mps=$GSRUN_MPS_ACTIVE pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"' &
    done
    wait
) >"$OUT" 2>"$ERR"
check "GSRUN_LOCAL_RANK/_SIZE by hand: 3 ranks with MPS at 66.6667 %" \
    [ "$(grep -c 'mps=1 pct=66.6667' "$OUT")" -eq 3 ] || { diag "$OUT"; diag "$ERR"; }
settle
rm -rf "$base"
check_clean "a launcher of our own"

# The agent's socket against the job user's own processes: a second
# registration of a local rank is refused naming both PIDs, and 20 idle
# connections delay no rank (each was read with a 2 s deadline, one after
# the other: the next rank waited 40 s).
(
    GSRUN_JOB_KEY=k$$ GSRUN_LOCAL_RANK=0 GSRUN_LOCAL_SIZE=2 "$GSRUN" exec -- sh -c \
        'echo "rank 0 mps=$GSRUN_MPS_ACTIVE"; sleep 3' &
    for _ in $(seq 100); do
        sock=$(ls "$base"/exec-*/*/agent.sock 2>/dev/null | head -1)
        [ -S "$sock" ] && grep -q "^rank 0 mps=1" "$OUT" && break
        sleep 0.05
    done
    "$B/tests/progs/hostile_user" hello "$sock" "hello 0 -" >"$OUT.dup"
    "$B/tests/progs/hostile_user" idle "$sock" 20 8 >"$OUT.idle" &
    sleep 0.3
    t0=$(date +%s%N)
    GSRUN_JOB_KEY=k$$ GSRUN_LOCAL_RANK=1 GSRUN_LOCAL_SIZE=2 "$GSRUN" exec -- sh -c \
        'echo "rank 1 mps=$GSRUN_MPS_ACTIVE"'
    echo "rank 1 after $((($(date +%s%N) - t0) / 1000000)) ms"
    wait
) >"$OUT" 2>"$ERR"
check "a second 'hello 0' while rank 0 runs: refused, naming both PIDs" \
    grep -q "answer: error local rank 0 is already registered by PID [0-9]* (this is PID [0-9]*)" "$OUT.dup" ||
    diag "$OUT.dup"
check "  ... 20 idle connections open" grep -q "idle: 20 of 20 connections open" "$OUT.idle"
ms=$(sed -n 's/^rank 1 after \([0-9]*\) ms$/\1/p' "$OUT")
check "  ... rank 1 registers at once all the same ($ms ms), both ranks under MPS" \
    [ "${ms:-99999}" -lt 2000 -a "$(grep -c 'mps=1' "$OUT")" -eq 2 ] || diag "$OUT" "$ERR"
settle
rm -rf "$base"
check_clean "the agent's socket against its own user"

# No launcher variables at all: one line that names what to set.
"$GSRUN" exec -- true >"$OUT" 2>"$ERR"
rc=$?
check "no launcher variables: a non-zero status ($rc) and a message naming GSRUN_LOCAL_RANK" \
    eval '[ $rc -ne 0 ] && grep -q "GSRUN_LOCAL_RANK and GSRUN_LOCAL_SIZE" "$ERR"' || diag "$ERR"
settle
rm -rf "$base"
check_clean "no launcher variables"

# Under gsrun (the shim already ran): the prefix adds nothing.
rm -f "$REC"
FAKE_MPS_RECORD=$REC gsrun_fake 1 -np 2 "$GSRUN" exec -- "$PROG" >"$OUT" 2>"$ERR"
check "inside a gsrun job: status 0, one daemon (gsrun's), every rank with MPS" \
    eval '[ $? -eq 0 ] && [ "$(grep -c "^start " "$REC")" -eq 1 ] && [ "$(grep -c "mps=1 " "$OUT")" -eq 2 ]'
check "  ... and no job dir of the prefix" [ -z "$(ls -d "$base"/exec-* 2>/dev/null)" ]
check_clean "the prefix under gsrun"

# --mps=off runs the program alone; a bad option is refused before it runs.
mpirun -np 2 "$GSRUN" exec --mps=off -- sh -c 'echo "mps=${GSRUN_MPS_ACTIVE:-unset}"' >"$OUT" 2>"$ERR"
check "--mps=off: the program runs without gsrun's environment" [ "$(grep -c 'mps=unset' "$OUT")" -eq 2 ]
"$GSRUN" exec --mps=sometimes -- true >"$OUT" 2>"$ERR"
rc=$?
check "--mps=sometimes: status 2 ($rc) and the accepted values" \
    eval '[ $rc -eq 2 ] && grep -q "auto, on or off" "$ERR"' || diag "$ERR"
"$GSRUN" exec --launcher=x -- true >"$OUT" 2>"$ERR"
rc=$?
check "--launcher: no such option here (status $rc)" eval '[ $rc -eq 2 ] && grep -q "unknown option" "$ERR"' ||
    diag "$ERR"
"$GSRUN" exec >"$OUT" 2>"$ERR"
rc=$?
check "no program: status 2 ($rc) and says so" eval '[ $rc -eq 2 ] && grep -q "no program" "$ERR"' || diag "$ERR"

# A killed launcher: the agent ends the node's ranks and MPS.
rm -f "$REC"
FAKE_MPS_RECORD=$REC mpirun -np 2 "$GSRUN" exec -- sleep 61.5 >"$OUT" 2>&1 &
m=$!
for _ in $(seq 200); do
    [ "$(grep -sc '^start ' "$REC")" = 1 ] && [ "$(pgrep -fc 'sleep 61.5')" = 2 ] && break
    sleep 0.05
done
sleep 0.3
kill -KILL $m
t0=$(date +%s%N)
gone() { [ -z "$(leftover_procs)" ] && [ -z "$(jobs_left)" ] && [ "$(pgrep -fc 'sleep 61.5')" = 0 ]; }
for _ in $(seq 100); do gone && break; sleep 0.05; done
ms=$((($(date +%s%N) - t0) / 1000000))
check "mpirun SIGKILLed: ranks, agent, MPS and the job dir gone within 5 s ($ms ms)" gone
pkill -KILL -f 'sleep 61.5' 2>/dev/null
wait $m 2>/dev/null
settle
rm -rf "$base"
check_clean "a killed launcher"
finish
