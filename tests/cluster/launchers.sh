#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: launcher/exec_main.c under MPICH Hydra and Open MPI fork agents, pmix/discover_env.c
# The rank prefix (`gsrun exec`) under launchers that gsrun does not start,
# on the simulated cluster of 3 hosts x 4 ranks: MPICH's Hydra mpiexec
# (its proxies started on the other hosts through its rsh launcher and the
# cluster's remote shell), and Open MPI's plain mpirun with the prefix as
# its fork agent (Open MPI 4's orte_fork_agent, 5's odls_base_exec_agent; no
# wrapper). Each: every rank's
# environment, one MPS daemon per host, an MPI job, a failing rank's status
# as without the prefix, SIGKILL of the launcher, of one host's per-node
# process and of one rank, and nothing left. TAP output.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
. "$GS_TOP_SRCDIR/tests/cluster/cluster.sh"
. "$GS_TOP_SRCDIR/tests/cluster/jobs.sh"

cluster_test_up 3
# The prefix's job dirs are in the user's private base on each host (which
# stays, empty: cluster_leftovers lists what is in it).
OURS_FILES='file /dev/shm/gsrun-0/'

FAKE="export LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 GSRUN_MPS_CONTROL=$FAKE_CONTROL \
GSRUN_MPS_SHARE=job;"

# Checks a 3 x 4 job's output: each host's 4 ranks under its own daemon.
check_ranks() { # check_ranks WHAT OUT ERR
    local h lines
    check "$1: 12 ranks ran" [ "$(grep -c '^rank=' $2)" -eq 12 ] || diag $3
    for h in $HOSTS; do
        lines=$(grep "host=$h " $2)
        check "  ... $h: local ranks 0-3 of 4, each once" \
            [ "$(echo "$lines" | sed -n 's/.*local=\([0-3]\)\/4 .*/\1/p' | sort -u | wc -l)" -eq 4 ]
        check "  ... $h: MPS at 50%, the pipe dir in the user's private base in $h's /dev/shm" \
            [ "$(echo "$lines" | grep -c "mps=1 pipe=/dev/shm/gsrun-0/exec-[0-9a-f]*-[^/]*/$h/g0 .* pct=50 ")" -eq 4 ]
        check "  ... $h: one MPS control daemon" \
            [ "$(grep -c "node $h: GPU 0 (.*MPS control daemon [0-9]* on" $3)" -eq 1 ]
        check "  ... $h: all 4 ranks served" grep -Eq "gsrun: node $h: (served 4 of 4 ranks|no rank of the 4 used the GPU)" $3
    done
}

# A kill case: the job (LAUNCH --sleep 60000) started in the background
# on host1, one process SIGKILLed; gsrun's part on every host gone within 2 s
# of the launcher's own teardown of the ranks, everything within 5 s.
kill_case() { # kill_case WHAT HOST PGREP-ARGS LAUNCH-AND-PROGRAM
    local what=$1 host=$2 pat=$3 counts bgpid ranks_ms
    shift 3
    rm -f $J/kc.out $J/kc.err
    on_host host1 "$FAKE timeout 60 $* --sleep 60000 >$J/kc.out 2>$J/kc.err" &
    bgpid=$!
    if ! wait_lines $J/kc.out 12; then
        not_ok "$what: the job did not start"; diag $J/kc.err; kill $bgpid; wait $bgpid; return
    fi
    counts="$(cluster_count_exe host1 "$FAKE_CONTROL") $(cluster_count_exe host2 "$FAKE_CONTROL") $(cluster_count_exe host3 "$FAKE_CONTROL")"
    check "$what: one daemon per host before (host1-3: $counts)" [ "$counts" = "1 1 1" ]
    kill_pid $host "$pat"
    clean_within 5000 "$T0" ranks
    ranks_ms=$ELAPSED
    if clean_within $((ranks_ms + 2000)) "$T0" ours; then
        ok "  ... (pid $KILLED on $host): the last rank ended after $ranks_ms ms, the rest of gsrun's part (agents, daemons, job dirs) $((ELAPSED - ranks_ms)) ms later"
    else
        not_ok "  ... (pid $KILLED on $host): gsrun's part still left $((ELAPSED - ranks_ms)) ms after the last rank ended ($ranks_ms ms)"
    fi
    if clean_within 5000 "$T0"; then
        ok "  ... nothing at all of the job left on any host after $ELAPSED ms"
    else
        not_ok "  ... the job still has something on some host after $ELAPSED ms"
    fi
    wait $bgpid 2>/dev/null
}

# Each launcher's "run 12 ranks, 4 per host" and its per-node process.
HYDRA=$(command -v mpiexec.hydra)
cat >$J/rsh <<RSH
#!/bin/sh
exec $GSC_HOSTD rsh $GSC_DIR "\$@"
RSH
chmod +x $J/rsh
HYDRA_RUN="$HYDRA -launcher rsh -launcher-exec $J/rsh -hosts host1,host2,host3 -ppn 4 -n 12"
# Open MPI's plain mpirun with the prefix as its agent for every rank: Open
# MPI 4 reads orte_fork_agent, 5 (PRRTE: prterun, prted, plm_ssh_agent, and
# binding 4 ranks to a host's 2 cores is an error there) odls_base_exec_agent.
OMPI_ENV="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm_rsh_agent='$(cluster_rsh_agent)' \
PRTE_MCA_plm_ssh_agent='$(cluster_rsh_agent)' PRTE_MCA_hwloc_default_binding_policy=none"
if mpirun --version 2>/dev/null | grep -q "Open MPI) 4"; then
    OMPI="Open MPI 4, orte_fork_agent" AGENT=OMPI_MCA_orte_fork_agent LAUNCHER="-x mpirun" DAEMON="-x orted"
else
    OMPI="Open MPI 5, odls_base_exec_agent" AGENT=PRTE_MCA_odls_base_exec_agent LAUNCHER="-x prterun" DAEMON="-o -x prted"
fi
OMPI_RUN="$OMPI_ENV $AGENT='$GSRUN exec -v' mpirun -x LD_LIBRARY_PATH -x FAKE_NVML_GPUS \
-x GSRUN_MPS_SHARE \
-x GSRUN_MPS_CONTROL -host host1:4,host2:4,host3:4 -np 12"

# --- MPICH's Hydra ------------------------------------------------------------
# The test programs built with MPICH's own compiler wrapper: an Open MPI
# program under Hydra would see no launcher of its own (each rank a
# singleton that forks an orted).
# Installed but failing to build the programs is a failure, not a skip.
if [ -z "$HYDRA" ] || ! command -v mpicc.mpich >/dev/null; then
    ok "# SKIP MPICH's Hydra: needs mpiexec.hydra and mpicc.mpich (apt-get install mpich libmpich-dev)"
elif ! mpicc.mpich -I"$GS_TOP_SRCDIR" -o $J/rank_report "$GS_TOP_SRCDIR/tests/progs/rank_report.c" 2>$J/cc.err ||
    ! mpicc.mpich -o $J/hello_ranks "$GS_TOP_SRCDIR/examples/hello_ranks.c" 2>>$J/cc.err; then
    not_ok "MPICH's Hydra: the test programs do not build with mpicc.mpich"
    diag $J/cc.err
else
    HPROG=$J/rank_report
    # MPICH 4.0's mpiexec itself hangs now and then here (plain, without
    # gsrun too: after a failed rank, 1 run in about 50; once in 10 loaded
    # runs of the whole file, after its host1 proxy's "assert (!closed)
    # failed"): a run that hangs for 30 s is run once more, and says so.
    hydra_run() { # hydra_run COMMAND: on host1; the status in HRC, a note in HRETRY
        on_host host1 "$FAKE timeout 30 $1"
        HRC=$?
        if [ $HRC -eq 124 ]; then
            HRETRY="$HRETRY (mpiexec hung once, ran again)"
            on_host host1 "$FAKE timeout 30 $1"
            HRC=$?
        fi
    }
    HRETRY=""
    hydra_run "$HYDRA_RUN $GSRUN exec -v -- $HPROG >$J/hy.out 2>$J/hy.err"
    rc=$HRC
    t0=$(date +%s%N)
    check "Hydra mpiexec, 3 hosts x 4 ranks, gsrun exec: status 0 ($rc)$HRETRY" [ $rc -eq 0 ] || diag $J/hy.err
    check_ranks "  ..." $J/hy.out $J/hy.err
    check "  ... MPI ranks 0-11 of 12" [ "$(grep -o '^rank=[0-9]* size=12 ' $J/hy.out | sort -u | wc -l)" -eq 12 ]
    check "  ... found the local ranks in Hydra's variables" [ "$(grep -c "(local ranks from hydra)" $J/hy.err)" -eq 3 ]
    check "  ... nothing left on any host (within 5 s: Hydra does not wait for the agents)" clean_within 5000 "$t0"

    # The ranks talking across the hosts.
    HRETRY=""
    hydra_run "$HYDRA_RUN $GSRUN exec -- $J/hello_ranks >$J/hm.out 2>$J/hm.err"
    rc=$HRC
    t0=$(date +%s%N)
    check "MPICH MPI_Allreduce over 12 ranks on 3 hosts through the prefix: status 0 ($rc)$HRETRY" \
        [ $rc -eq 0 ] || diag $J/hm.err
    check "  ... every rank of 12 under MPS at 50%" \
        [ "$(grep -c "^rank [0-9]* of 12 on host[123]: local rank [0-3], MPS 1, .*thread percentage 50$" $J/hm.out)" -eq 12 ] ||
        diag $J/hm.out
    check "  ... nothing left" clean_within 5000 "$t0"

    # A failing rank: Hydra's own status for it is not the same from run to
    # run here, plain mpiexec's included: 3, 9, 15 or 255 for the same
    # "--exit 5 3" (whichever news comes first: the rank's code, the SIGKILL
    # Hydra sends the others, an MPI abort of a rank that lost its peer, or
    # the proxy's remote shell ending in error). So both must be a failure,
    # which both show. Failing ranks on host2 and host3: Hydra hangs more
    # often when one on its own host fails.
    for case in "--exit 5 3" "--kill 6" "--segv 10"; do
        HRETRY=""
        hydra_run "$HYDRA_RUN $GSRUN exec -- $HPROG --barrier $case >/dev/null 2>&1"
        rc=$HRC
        t0=$(date +%s%N)
        hydra_run "$HYDRA_RUN $HPROG --barrier $case >/dev/null 2>&1"
        prc=$HRC
        check "Hydra: a rank fails ($case): status $rc, plain mpiexec $prc (both a failure)$HRETRY" \
            [ $rc -ne 0 -a $prc -ne 0 ]
        check "  ... nothing left on any host" clean_within 5000 "$t0"
    done

    kill_case "Hydra: SIGKILL of mpiexec" host1 "-x mpiexec.hydra" "$HYDRA_RUN $GSRUN exec -v -- $HPROG"
    kill_case "Hydra: SIGKILL of host2's hydra_pmi_proxy" host2 "-x hydra_pmi_proxy" "$HYDRA_RUN $GSRUN exec -v -- $HPROG"
    kill_case "Hydra: SIGKILL of one rank on host3" host3 "-o -x rank_report" "$HYDRA_RUN $GSRUN exec -v -- $HPROG"
fi

# --- Open MPI's plain mpirun, the prefix as its fork (exec) agent ---------------
on_host host1 "$FAKE timeout 60 $OMPI_RUN $PROG >$J/om.out 2>$J/om.err"
rc=$?
t0=$(date +%s%N)
check "$OMPI='gsrun exec': plain mpirun, 3 hosts x 4 ranks: status 0 ($rc)" [ $rc -eq 0 ] || diag $J/om.err
check_ranks "  ..." $J/om.out $J/om.err
check "  ... nothing left on any host" clean_within 5000 "$t0"
on_host host1 "$FAKE timeout 60 $OMPI_RUN $PROG --exit 5 3 >/dev/null 2>&1"
rc=$?
on_host host1 "timeout 60 $OMPI_ENV mpirun -host host1:4,host2:4,host3:4 -np 12 $PROG --exit 5 3 >/dev/null 2>&1"
prc=$?
check "$OMPI: a rank fails: status $rc, plain mpirun $prc" [ $rc -eq $prc -a $rc -ne 0 ]
check "  ... nothing left on any host" clean_within 5000 "$(date +%s%N)"
kill_case "$OMPI: SIGKILL of mpirun" host1 "$LAUNCHER" "$OMPI_RUN $PROG"
kill_case "$OMPI: SIGKILL of host2's ${DAEMON##* }" host2 "$DAEMON" "$OMPI_RUN $PROG"
kill_case "$OMPI: SIGKILL of one rank on host3" host3 "-o -x rank_report" "$OMPI_RUN $PROG"
finish
