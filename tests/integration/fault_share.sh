#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/mps_health.c, runtime/agent/agent_fault.c, runtime/agent/agent_fault_word.c, runtime/agent/daemons.c, runtime/job/agent_lease.c, runtime/job/agent_lease_watch.c, runtime/agent/agent_publish.c, runtime/files/status.c, runtime/service/agent_share_tell.c
# A GPU fault on an MPS server (issue 51), with the fake control daemon's
# fault (tests/fake: a client that says "fault" makes it print the lines a
# real server prints and refuse new clients with 807 while a client of the
# fault lives). On the user's shared servers (the default outside a Slurm
# step): every job the fault ended is told once, in its own output and
# without -v, who MPS ended (1); a job that starts while the faulting
# process still holds the faulted server gets a fresh server and all its
# clients (2); `gsrun status` and its JSON show the fault and who holds it,
# and a job still on the server (K) its fresh daemon (3); the faulted
# server ends with its last client and nothing is left (4). The same with
# a job's own servers (--mps-share=job) (5, 6). Fault lines another
# process of the user's writes into a server's log retire nothing and are
# told to no job (7).
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

job() { local n=$1; shift; bg_job "$n" 1 "$@"; } # job NAME args...: one GPU (lib.sh)
controls() { # this test's fake control daemons (not their servers or clients)
    local p n=0
    for p in $(pgrep -f -- "$FAKE_CONTROL -f"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "GS_TEST_MARK=$TEST_TMP" &&
            [ "$(ps -o comm= -p "$(ps -o ppid= -p "$p" | tr -d ' ')")" != nvidia-cuda-mps ] && n=$((n + 1))
    done
    echo $n
}
TOLD='the MPS server this job shared with the user.s other jobs hit a fatal GPU fault at'

# --- the user's shared servers ---------------------------------------------
# A: two ranks, clients of the shared server, that end (status 2, their
# program's own) when their server faults, as CUDA programs do.
job A --mps-share=node -np 2 "$PROG" --mps-victim --sleep 8000
wait_for "$OUT.A" 'client=ok' 2 || diag "$ERR.A"
# K: one rank on the same server that never starts CUDA: the fault ends
# nothing of it, and it hears the server renewed (3).
job K --mps-share=node -np 1 "$PROG" --sleep 12000
for _ in $(seq 200); do
    "$GSRUN" status 2>/dev/null | grep "pipe $TMPDIR/" | grep -q 'jobs [^ ]*:[0-9]* [^ ]*:[0-9]*' && break
    sleep 0.05
done
# B: one rank that faults the server and lives on 15 s, holding the fault
# through 2 and 3 (5 s once ran out beside two busy loops: C took 6.4 s);
# its linger (the last lease's) keeps the shared agent after it (4).
job B --mps-share=node --mps-linger=30 -np 1 "$PROG" --mps-fault 0 --sleep 15000
wait_for "$OUT.A.rc" . 1
bpid=$(sed -n 's/^rank=0 .* pid=\([0-9]*\) .*/\1/p' "$OUT.B" | head -1)
told_a=$(grep -c "$TOLD" "$ERR.A")
check "1. job A (its ranks ended by B's fault): status $(cat "$OUT.A.rc") (2, its program's), told once without -v ($told_a)" \
    [ "$(cat "$OUT.A.rc")" = 2 -a "$told_a" = 1 ] || diag "$ERR.A"
check "  ... A's line names its own ranks and B's rank with its PID: $(grep -o 'MPS ended every client on it: .*' "$ERR.A")" \
    grep -q "MPS ended every client on it: .*this job's ranks 0-1.*job gsrun\.[A-Za-z0-9]*'s rank 0 (rank_report, pid $bpid)" "$ERR.A"

# 2. C starts while B still holds the faulted server: a fresh server, every
# client taken (before: refused with 807, the faulted server handed out).
t0=$(date +%s%N)
gsrun_fake 1 --mps-share=node --mps-linger=30 -v -np 2 "$PROG" --mps-client >"$OUT.C" 2>"$ERR.C"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
alive_b=$([ -n "$bpid" ] && kill -0 "$bpid" 2>/dev/null && echo yes || echo no)
check "2. job C while B (pid $bpid, alive: $alive_b) holds the faulted server: status $rc (0) in $ms ms, $(grep -c 'client=ok' "$OUT.C") of 2 clients" \
    [ $rc = 0 -a "$(grep -c 'client=ok' "$OUT.C")" = 2 -a "$alive_b" = yes ] || diag "$ERR.C" "$OUT.C"
check "  ... on the fresh server's own pipe dir ($(sed -n 's/.* pipe=\([^ ]*\) .*/\1/p' "$OUT.C" | sort -u | tr '\n' ' '))" \
    eval "[ \"\$(sed -n 's/.* pipe=\([^ ]*\) .*/\1/p' '$OUT.C' | grep -c '/g0\.1$')\" = 2 ]"
check "  ... and C is told of no fault" eval "! grep -q 'GPU fault' '$ERR.C'"

# 3. gsrun status shows the fault and who holds it, in text and JSON.
"$GSRUN" status >"$OUT.st" 2>&1
"$GSRUN" status --json >"$OUT.json" 2>&1
check "3. gsrun status while B lives: $(grep -o 'FAULT: .*' "$OUT.st" | head -1)" \
    grep -q "FAULT: GPU fault at .* still held by job gsrun\.[A-Za-z0-9]*'s rank 0 (rank_report, pid $bpid)" "$OUT.st" ||
    diag "$OUT.st"
check "  ... the JSON's shared server has its \"fault\"" \
    grep -q "\"fault\":\"GPU fault at [^\"]*held by job gsrun" "$OUT.json" || diag "$OUT.json"
# A job that leases the renewed server names its fresh daemon, as the
# node service does (it read the status before the service wrote the
# fresh one once: the retired daemon's PID, gone with B's end).
on_fresh=$(grep "pipe $TMPDIR/[^ ]*/g0\.1," "$OUT.st")
pids=$(echo "$on_fresh" | grep -o ' daemon [0-9]*' | sort -u | tr -d '\n')
check "  ... every line on the fresh server ($(echo "$on_fresh" | grep -c .): the service's and its jobs') names one daemon:$pids" \
    eval '[ "$(echo "$on_fresh" | grep -c .)" -ge 2 ] && [ "$(echo "$pids" | wc -w)" = 2 ]' || diag "$OUT.st"
wait_for "$OUT.K.rc" . 1 30
check "  ... job K (on the server, no CUDA): status $(cat "$OUT.K.rc") (0), told of no fault" \
    eval '[ "$(cat "$OUT.K.rc")" = 0 ] && ! grep -q "$TOLD" "$ERR.K"' || diag "$ERR.K"
wait_for "$OUT.B.rc" . 1 30
told_b=$(grep -c "$TOLD" "$ERR.B")
check "  ... job B (the faulting one): status $(cat "$OUT.B.rc") (0, its program's), told once ($told_b), its rank named" \
    eval "[ '$(cat "$OUT.B.rc")' = 0 -a '$told_b' = 1 ] && grep -q \"on it: .*this job's rank 0\" '$ERR.B'" || diag "$ERR.B"

# 4. The faulted server ends with its last client, while the shared agent
# (the last lease's linger) keeps the fresh one; then nothing is left.
for _ in $(seq 100); do [ "$(controls)" = 1 ] && break; sleep 0.05; done
check "4. once B has exited the faulted server has ended, the fresh one serves on ($(controls) control daemon)" \
    [ "$(controls)" = 1 ]
for p in $(pgrep -x gsrun-share); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "GS_TEST_MARK=$TEST_TMP" && kill -TERM "$p"
done
for _ in $(seq 100); do [ -z "$(pgrep -x gsrun-share)" ] && break; sleep 0.05; done
check_clean "a fault on the shared server"

# --- 5. a job's own servers --------------------------------------------------
# Rank 0 faults its job's server; every rank is a victim.
gsrun_fake 1 --mps-share=job -np 3 "$PROG" --mps-fault 0 --mps-victim --sleep 5000 >"$OUT.D" 2>"$ERR.D"
rc=$?
told=$(grep -c "this job's MPS server hit a fatal GPU fault at" "$ERR.D")
check "5. a job's own server faulted: status $rc (2, its program's), told once ($told): $(grep -o 'MPS ended every client on it: .*' "$ERR.D")" \
    eval "[ $rc = 2 -a $told = 1 ] && grep -q \"MPS ended every client on it: this job's ranks 0-2\" '$ERR.D'" || diag "$ERR.D"
check_clean "a fault on a job's own server"

# 6. A job's own server faulted and held by its ranks: a fresh server beside
# the retired one, and the job's status names the ranks holding the fault.
(gsrun_fake 1 --mps-share=job -np 2 "$PROG" --mps-fault 0 --sleep 3000 >"$OUT.E" 2>"$ERR.E"; echo $? >"$OUT.E.rc") &
wait_status "$OUT.st6" "FAULT: .*held by this job's rank 0 (rank_report, pid [0-9]*), this job's rank 1"
check "6. a job's own faulted server held by its ranks: status names them ($(grep -o 'FAULT: .*' "$OUT.st6"))" \
    grep -q "still held by this job's rank 0 (rank_report, pid [0-9]*), this job's rank 1 (rank_report" "$OUT.st6" ||
    diag "$OUT.st6"
check "  ... the retired server and a fresh one beside it ($(controls) control daemons)" [ "$(controls)" = 2 ]
wait_for "$OUT.E.rc" . 1
check "  ... the job ends with its program's status ($(cat "$OUT.E.rc"))" [ "$(cat "$OUT.E.rc")" = 0 ]
check_clean "a held fault on a job's own server"

# 7. Fault lines written into a server's log by another process of the
# user's (issue 58; the log is the user's to write): the control daemon
# says its server is ACTIVE, so nothing is retired and no job is told
# (before: the job was told its ranks hit a fatal GPU fault, the good
# server was retired and a fresh one started).
forge() { # forge LOG PID...: the lines MPS writes for a fault that ended PID...
    local t p
    t=$(date '+%Y-%m-%d %H:%M:%S.000')
    {
        echo "[$t Server 99999] Client {PID: $2, Context: 1} encountered a fatal GPU error."
        echo "[$t Server 99999] Server is handling a fatal GPU error."
        echo "[$t Server 99999] The following client process have a sticky error set:"
        for p in "${@:2}"; do echo "[$t Server 99999] $p"; done
    } >>"$1"
}
pids_of() { sed -n 's/^rank=[0-9]* .* pid=\([0-9]*\) .*/\1/p' "$1" | tr '\n' ' '; }
for share in node job; do
    rm -f "$OUT.F.rc"
    job F --mps-share=$share --mps-linger=0 -np 2 "$PROG" --mps-victim --sleep 3000
    wait_for "$OUT.F" 'client=ok' 2 || diag "$ERR.F"
    if [ $share = node ]; then
        log=$(ls "$TMPDIR"/gsrun-*/mps-share/*/g0.log/control.out 2>/dev/null | head -1)
    else
        log=$(ls "$TMPDIR"/gsrun.*/*/g0.log/control.out 2>/dev/null | head -1)
    fi
    pids=$(pids_of "$OUT.F")
    # shellcheck disable=SC2086
    [ -n "$log" ] && [ -n "$pids" ] && forge "$log" $pids
    check "7. --mps-share=$share: the forged lines name the job's 2 ranks by PID ($pids)" \
        [ "$(wc -w <<<"$pids")" -eq 2 ] || diag "$OUT.F"
    sleep 1
    "$GSRUN" status >"$OUT.st7" 2>&1
    n=$(controls)
    wait_for "$OUT.F.rc" . 1
    check "  ... fault lines forged into its server's log ($log): the job ends $(cat "$OUT.F.rc") (0), told of no fault" \
        eval '[ -n "$log" ] && [ "$(cat "$OUT.F.rc")" = 0 ] && ! grep -q "hit a fatal GPU fault" "$ERR.F"' || diag "$ERR.F"
    check "  ... no server retired ($n control daemon), no FAULT in gsrun status" \
        eval '[ "$n" = 1 ] && ! grep -q FAULT "$OUT.st7"' || diag "$OUT.st7"
    [ $share = job ] && check "  ... the job's own agent says the control daemon denied it" \
        grep -q "its MPS log says a fatal GPU fault at .*, but the MPS control daemon reports its server ACTIVE and a process the lines name still runs: not taken as a fault" "$ERR.F"
    for _ in $(seq 100); do [ -z "$(pgrep -x gsrun-share)" ] && break; sleep 0.05; done
    check_clean "forged fault lines (--mps-share=$share)"
done

finish
