#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: gsrun on several hosts: ompi/shim.c, runtime/rank/node.c, runtime/agent/ on each host
# Multi-node gsrun on a simulated cluster of 3 hosts (tests/cluster/cluster.sh):
# real mpirun launching orted on the other hosts through its rsh path, the
# stand-in MPS daemon and NVML on every host. TAP output.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
. "$GS_TOP_SRCDIR/tests/cluster/cluster.sh"
. "$GS_TOP_SRCDIR/tests/cluster/jobs.sh"

cluster_test_up 3
# What a user's login would give mpirun on host1, plus the test's stand-ins.
JOBENV="export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
OMPI_MCA_plm_rsh_agent='$(cluster_rsh_agent)' PRTE_MCA_plm_ssh_agent='$(cluster_rsh_agent)' \
PRTE_MCA_hwloc_default_binding_policy=none LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 \
GSRUN_MPS_SHARE=job OMPI_MCA_rtc_gsrun_mps_share=job;"
# Open MPI 4's per-host daemon is orted; Open MPI 5's (PRRTE's) prted, which
# reads its remote shell from plm_ssh_agent (and would bind 4 ranks to the
# 2 cores of a host here: an error, not a warning as in Open MPI 4).
# mpirun is prterun there, and prted runs as two processes (the oldest is
# the one the launcher started).
DAEMON="-x orted" LAUNCHER="-x mpirun"
mpirun --version 2>/dev/null | grep -q "Open MPI) 4" || DAEMON="-o -x prted" LAUNCHER="-x prterun"
MPIARGS="-x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -host host1:4,host2:4,host3:4 -np 12"

job() { # job OUTNAME GSRUN-ARGS... : runs gsrun on host1, output in $J/OUTNAME.{out,err}
    local name=$1
    shift
    on_host host1 "$JOBENV $GSRUN --mps-control=$FAKE_CONTROL $* >$J/$name.out 2>$J/$name.err"
}
bg_job() { # bg_job OUTNAME ARGS...: the same in the background; gsrun's PID in $J/OUTNAME.pid
    local name=$1
    shift
    # An earlier job's files must not stand for this one's: a wait on them
    # would end at once, before this job has even started.
    rm -f "$J/$name.out" "$J/$name.err" "$J/$name.pid"
    on_host host1 "$JOBENV echo \$\$ >$J/$name.pid; exec $GSRUN --mps-control=$FAKE_CONTROL $* \
        >$J/$name.out 2>$J/$name.err" &
}
# --- 3 hosts x 4 ranks: each rank set up for its own host ------------------
job ok -v --mps-memory-limit=1G $MPIARGS $PROG
rc=$?
check "3 hosts x 4 ranks: status 0" [ $rc -eq 0 ]
check "  ... 12 ranks ran" [ "$(grep -c '^rank=' $J/ok.out)" -eq 12 ]
for h in $HOSTS; do
    lines=$(grep "host=$h " $J/ok.out)
    check "  ... $h: 4 ranks, local ranks 0-3 of 4" [ "$(echo "$lines" | grep -c 'local=[0-3]/4 ')" -eq 4 \
        -a "$(echo "$lines" | sed -n 's/.*local=\([0-9]*\).*/\1/p' | sort -u | wc -l)" -eq 4 ]
    check "  ... $h: MPS on, 50%, its own node's pipe dir in its /dev/shm, gsrun's memory limit" \
        [ "$(echo "$lines" | grep -c "mps=1 pipe=/dev/shm/gsrun\.[A-Za-z0-9]*/$h/g0 .* pct=50 .*memlimit=0=1024MB ")" -eq 4 ]
    check "  ... $h: exactly one MPS control daemon" \
        [ "$(grep -c "node $h: GPU 0 (.*MPS control daemon [0-9]* on" $J/ok.err)" -eq 1 ]
    check "  ... summary names $h" grep -Eq "gsrun: node $h: (served 4 of 4 ranks|no rank of the 4 used the GPU [^;]*); stopping MPS: every rank has exited" $J/ok.err
done
check "  ... one job dir name on every host" [ "$(sed -n 's|.*pipe=/dev/shm/\(gsrun\.[^/]*\)/.*|\1|p' $J/ok.out | sort -u | wc -l)" -eq 1 ]
check "  ... nothing left on any host" [ -z "$(leftovers)" ]

job quiet $MPIARGS $PROG
rc=$?
# Only gsrun's lines count: under load Open MPI's rsh launcher itself may warn
# ("plm:rsh: Warning: setpgid(...) failed in parent with errno=Permission
# denied", its race with the child's exec), as under plain mpirun.
check "without -v: status $rc (0), no gsrun line at all" eval '[ $rc -eq 0 ] && ! grep -q gsrun "$J/quiet.err"' ||
    diag $J/quiet.err

# --- exit status as with plain mpirun -----------------------------------------
for case in "--exit 5 3" "--kill 6" "--segv 10"; do
    job st $MPIARGS $PROG $case
    rc=$?
    on_host host1 "$JOBENV mpirun $MPIARGS $PROG $case >/dev/null 2>&1"
    prc=$?
    check "rank fails ($case): status $rc, plain mpirun $prc" [ $rc -eq $prc -a $rc -ne 0 ]
    check "  ... nothing left on any host" clean_within 2000 "$(date +%s%N)"
done

# --- the job ends whole --------------------------------------------------------
kill_target() { # kill_target HOST PGREP-ARGS|gsrun NAME: SIGKILLs it (gsrun: the job's, by its PID file)
    if [ "$2" = gsrun ]; then
        T0=$(date +%s%N)
        KILLED=$(cat $J/$3.pid)
        on_host "$1" "kill -KILL $KILLED"
    else
        kill_pid "$1" "$2"
    fi
}
kill_test() { # kill_test WHAT HOST PGREP-ARGS MS-OURS MS-ALL [MS-AFTER-RANKS]
    # gsrun's part on OURS_HOSTS (default: all) within MS-OURS; with OURS_HOSTS
    # and MS-AFTER-RANKS, on every host within that after the last rank there
    # ended (Open MPI ends the other hosts' ranks); everything in MS-ALL.
    local what=$1 host=$2 pat=$3
    bg_job kt -v $MPIARGS $PROG --sleep 60000
    local bgpid=$!
    if ! wait_lines $J/kt.out 12; then
        not_ok "$what: the job did not start"; diag $J/kt.err; kill $bgpid; return
    fi
    local counts
    counts="$(cluster_count_exe host1 "$FAKE_CONTROL") $(cluster_count_exe host2 "$FAKE_CONTROL") $(cluster_count_exe host3 "$FAKE_CONTROL")"
    check "$what: one daemon per host before (host1-3: $counts)" [ "$counts" = "1 1 1" ]
    kill_target $host "$pat" kt
    if clean_within "$4" "$T0" ours; then
        ok "$what (pid $KILLED on $host): no rank, agent, MPS daemon or run dir left on ${OURS_HOSTS:-any host} after $ELAPSED ms"
    else
        not_ok "$what (pid $KILLED on $host): still left after $ELAPSED ms"
    fi
    if [ -n "${6:-}" ]; then
        local ranks_ms
        OURS_HOSTS="host[123]" clean_within 5000 "$T0" ranks
        ranks_ms=$ELAPSED
        if OURS_HOSTS="host[123]" clean_within $((ranks_ms + $6)) "$T0" ours; then
            ok "  ... and on every host: the last rank ended after $ranks_ms ms (Open MPI's), the rest of gsrun's part $((ELAPSED - ranks_ms)) ms later"
        else
            not_ok "  ... gsrun's part still left on some host $((ELAPSED - ranks_ms)) ms after the last rank ended ($ranks_ms ms)"
        fi
    fi
    if clean_within "$5" "$T0"; then
        ok "  ... nothing at all of the job (mpirun, orted, gsrun) left after $ELAPSED ms"
    else
        not_ok "  ... the job still has processes after $ELAPSED ms"
    fi
    wait $bgpid 2>/dev/null
    grep "problem" $J/kt.err | diag
}
# Open MPI's own teardown (mpirun, orted and its remote shells) can take
# longer than gsrun's part: about 3 s after ranks die on one host, with plain
# mpirun too.
kill_test "SIGKILL of mpirun" host1 "$LAUNCHER" 2000 5000
kill_test "SIGKILL of gsrun" host1 gsrun 2000 5000

# A lost orted makes mpirun abort the job: the other hosts' orteds end their
# ranks, after a pause of their own (odls_base_sigkill_timeout, 1 s: 1.2 s
# after the kill here, once 2.1 s on CI), so how soon those go is Open MPI's; the
# rest of gsrun's part there (agent, daemon, dirs) must follow within 1 s.
# The killed orted's node is gsrun's alone to clean.
OURS_HOSTS=host2 kill_test "SIGKILL of host2's ${DAEMON##* }" host2 "$DAEMON" 2000 5000 1000
# Ranks dying on one host make mpirun abort the job: the other hosts' ranks
# are Open MPI's to end (about 3 s here, as with plain mpirun); host3's
# share is the guard's.
OURS_HOSTS=host3 kill_test "SIGKILL of host3's node agent" host3 "-o -f gsrun-agent" 2000 5000
check "  ... its guard reported it" grep -q "problem: node host3: the node agent died during the job; its guard ended 4 ranks" $J/kt.err

# --- plain mpirun with the Open MPI component (no gsrun) --------------------------
if [ -f "$B/ompi/mca/mca_rtc_gsrun.so" ]; then
    RTC="--mca mca_base_component_path SYS_DEFAULT:$B/ompi/mca --mca rtc_gsrun_agent $B/launcher/gsrun-agent \
--mca rtc_gsrun_mps_control $FAKE_CONTROL --mca rtc_gsrun_verbose 1"
    on_host host1 "$JOBENV mpirun $RTC $MPIARGS $PROG >$J/rtc.out 2>$J/rtc.err"
    rc=$?
    t0=$(date +%s%N)
    check "component, 3 hosts x 4 ranks: status 0" [ $rc -eq 0 ]
    for h in $HOSTS; do
        check "  ... $h: 4 ranks under MPS at 50%, pipe dir in its own /tmp" \
            [ "$(grep -c "^rank=.* mps=1 pipe=/dev/shm/gsrun\.[A-Za-z0-9]*/$h/g0 .* pct=50 .*host=$h " $J/rtc.out)" -eq 4 ]
        check "  ... $h: exactly one MPS control daemon" \
            [ "$(grep -c "node $h: GPU 0 (.*MPS control daemon [0-9]* on" $J/rtc.err)" -eq 1 ]
    done
    check "  ... nothing left on any host" clean_within 2000 "$t0"
    on_host host1 "$JOBENV exec mpirun $RTC $MPIARGS $PROG --sleep 60000 >$J/rtck.out 2>&1" &
    bgpid=$!
    if wait_lines $J/rtck.out 12; then
        kill_pid host2 "-x orted"
        if OURS_HOSTS=host2 clean_within 2000 "$T0" ours; then
            ok "  ... SIGKILL of host2's orted: host2 clean after $ELAPSED ms"
        else
            not_ok "  ... SIGKILL of host2's orted: host2 not clean after $ELAPSED ms"
        fi
        check "  ... and nothing of the job on any host within 5 s" clean_within 5000 "$T0"
    else
        not_ok "  ... the job to kill did not start"; diag $J/rtck.out
    fi
    wait $bgpid 2>/dev/null
fi

# --- two concurrent 3-host jobs of one user -----------------------------------
bg_job c1 $MPIARGS $PROG --sleep 1500
p1=$!
bg_job c2 $MPIARGS $PROG --sleep 1500
p2=$!
wait $p1
r1=$?
wait $p2
r2=$?
check "two concurrent 3-host jobs: both status 0 ($r1, $r2)" [ $r1 -eq 0 -a $r2 -eq 0 ]
check "  ... 12 ranks each" [ "$(grep -c '^rank=.*mps=1 ' $J/c1.out)" -eq 12 -a "$(grep -c '^rank=.*mps=1 ' $J/c2.out)" -eq 12 ]
d1=$(sed -n 's|.*pipe=/dev/shm/\(gsrun\.[^/]*\)/.*|\1|p' $J/c1.out | sort -u)
d2=$(sed -n 's|.*pipe=/dev/shm/\(gsrun\.[^/]*\)/.*|\1|p' $J/c2.out | sort -u)
check "  ... each with its own run dirs ($d1, $d2)" [ -n "$d1" -a -n "$d2" -a "$d1" != "$d2" ]
check "  ... nothing left on any host (within 5 s)" clean_within 5000 "$(date +%s%N)"
finish
