#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/agent/agent_fault.c, runtime/gpu/mps_health.c, runtime/agent/daemons.c with real MPS (GPU machine)
# A GPU fault on an MPS server with real MPS (issue 51; not run by CI).
#
#   tests/gpu/fault_share.sh BUILD_DIR
#
# Under the default (the user's jobs share one server a GPU) and under
# --mps-share=job, both with --mps=on (a one-rank job alone needs no MPS),
# on one GPU (pinned: on a node of several the jobs would be spread):
# 1. Job A (2 ranks running kernels) and job B (1 rank that writes through
#    a bad pointer 1.5 s after its context is up and then lives on 12 s,
#    holding the faulted server): shared, A's ranks are ended by B's fault
#    and A's output says so in one line (without -v); with --mps-share=job,
#    A ends 0 and is told nothing.
# 2. Job C while B still lives: every client up, status 0, its start within
#    1 s of the same job's start beside A before the fault.
# 3. `gsrun status` shows the fault and who holds the faulted server.
# 4. Once B has exited the faulted server ends (shared: the fresh one stays
#    for the linger); then no MPS process and no run directory is left.
# 5. Fault lines written into the server's log by another process of the
#    user's: no job told, nothing retired (both sharing modes).
# Ends with N passed, N failed.
set -u
# Each check ends with nothing of MPS left: the shared servers' default
# linger (auto: 60 s) would keep them; the linger has checks of its own.
export GSRUN_MPS_LINGER=${GSRUN_MPS_LINGER:-0}
b=$1
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
. "$(dirname "$0")/procs.sh"
pin_one_gpu
G=$b/launcher/gsrun
F=$b/examples/gpu_fault
T=$(mktemp -d /tmp/gsf.XXXXXX)
base=$GS_ROOT/gsrun-$(id -u)
mps_procs() { live_procs 'nvidia-cuda-mps*'; }
controls() { mps_controls; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
wait_for() { # wait_for FILE PATTERN COUNT: up to 30 s
    local c
    for _ in $(seq 300); do
        c=$(grep -c "$2" "$1" 2>/dev/null)
        [ "${c:-0}" -ge "$3" ] && return 0
        sleep 0.1
    done
    return 1
}
clean() { share_clean "$1" "$base"; } # "what"
TOLD='the MPS server this job shared with the user.s other jobs hit a fatal GPU fault at'
echo "# $(nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | head -1), $(nproc) cores"

for share in node job; do
    echo "# --- --mps-share=$share"
    # A: kernels for 8 s on 2 ranks.
    "$G" --mps-share=$share --mps=on -np 2 "$F" --work 8000 >"$T/oA" 2>"$T/eA" &
    ja=$!
    wait_for "$T/oA" 'context up' 2 || echo "# A's contexts did not come up"
    # The baseline start: the same job as C, beside A, before any fault.
    t0=$(date +%s%N)
    "$G" --mps-share=$share --mps=on -np 2 "$F" --work 300 >"$T/oC0" 2>"$T/eC0"
    r0=$? c0=$(ms "$t0")
    # B: faults 1.5 s after its context is up, then holds it 12 s; its
    # linger keeps the shared servers 5 s after it (4).
    "$G" --mps-share=$share --mps-linger=5 --mps=on -np 1 "$F" --fault-after 1500 --hold 12000 >"$T/oB" 2>"$T/eB" &
    jb=$!
    wait $ja
    ra=$?
    wait_for "$T/oB" 'faulted' 1
    bpid=$(sed -n 's/^gpu_fault: pid=\([0-9]*\) faulted.*/\1/p' "$T/oB" | head -1)
    echo "# job A (status $ra):"; sed 's/^/#   /' "$T/oA"; grep -v '^gsrun: node [^:]*: GPU [0-9]* (.*): local' "$T/eA" | sed 's/^/#   /' | tail -6
    told=$(grep -c "$TOLD" "$T/eA")
    if [ $share = node ]; then
        [ $ra -ne 0 ] && [ "$told" -eq 1 ] && grep -q "work failed" "$T/oA" &&
            ok "1. shared: job A's ranks ended by B's fault (status $ra, its program's) and A is told once: $(grep -o 'MPS ended every client on it: .*' "$T/eA")" ||
            notok "1. shared: A status $ra, told $told"
    else
        [ $ra -eq 0 ] && [ "$told" -eq 0 ] && [ "$(grep -c 'work ok' "$T/oA")" -eq 2 ] &&
            ok "1. --mps-share=job: job A runs on (status 0) beside B's fault, told nothing" ||
            notok "1. --mps-share=job: A status $ra, told $told"
    fi
    # 2. C while B holds the faulted server.
    t0=$(date +%s%N)
    "$G" --mps-share=$share --mps=on -v -np 2 "$F" --work 300 >"$T/oC" 2>"$T/eC"
    rc=$? c1=$(ms "$t0")
    alive=$([ -n "$bpid" ] && kill -0 "$bpid" 2>/dev/null && echo yes || echo no)
    echo "# job C (status $rc, $c1 ms; the same job before the fault: status $r0, $c0 ms):"
    sed 's/^/#   /' "$T/oC"
    [ $rc -eq 0 ] && [ "$(grep -c 'mps=1 context up' "$T/oC")" -eq 2 ] && [ "$(grep -c 'work ok' "$T/oC")" -eq 2 ] &&
        [ "$alive" = yes ] && [ $r0 -eq 0 ] && [ $((c1 - c0)) -le 1000 ] &&
        ok "2. job C while B (pid $bpid) holds the faulted server: status 0, 2 of 2 MPS clients up, start $c1 ms (before the fault: $c0 ms)" ||
        { notok "2. job C: status $rc, B alive $alive, $c1 ms vs $c0 ms"; tail -5 "$T/eC"; }
    # 3. gsrun status while B lives.
    "$G" status >"$T/st" 2>&1
    echo "# gsrun status while B lives:"; sed 's/^/#   /' "$T/st"
    grep -q "FAULT: .*$bpid" "$T/st" && [ "$alive" = yes ] &&
        ok "3. gsrun status shows the fault and B's process holding it ($(grep -o 'FAULT: .*' "$T/st" | head -1))" ||
        notok "3. gsrun status shows no fault held by $bpid"
    "$G" status --json | grep -q '"fault":"GPU fault' &&
        ok "  ... and its JSON" || notok "  ... the JSON has no fault"
    wait $jb
    rb=$?
    echo "# job B (status $rb):"; sed 's/^/#   /' "$T/oB"; grep -v '^gsrun: node [^:]*: GPU [0-9]* (.*): local' "$T/eB" | sed 's/^/#   /' | tail -4
    [ $rb -eq 3 ] && ok "  ... job B ends with its program's status (3)" || notok "  ... job B status $rb (3)"
    if [ $share = node ]; then
        for _ in $(seq 50); do [ "$(controls)" = 1 ] && break; sleep 0.1; done
        [ "$(controls)" = 1 ] &&
            ok "4. the faulted server ended with B; the fresh one stays for the linger (1 control daemon)" ||
            notok "4. $(controls) control daemons after B (1: the fresh one)"
    fi
    clean "4. --mps-share=$share, after B"
done

# 5. Fault lines another process of the user's writes into the server's
# log (issue 58): the control daemon reports its server ACTIVE and serving
# the clients named, so no job is told and nothing is retired.
for share in node job; do
    "$G" --mps-share=$share --mps=on -np 2 "$F" --work 6000 >"$T/oF" 2>"$T/eF" &
    jf=$!
    wait_for "$T/oF" 'context up' 2 || echo "# F's contexts did not come up"
    if [ $share = node ]; then
        log=$(ls "$base"/mps-share/*/g0.log/control.out 2>/dev/null | head -1)
    else
        log=$(ls "$GS_ROOT"/gsrun.*/*/g0.log/control.out 2>/dev/null | head -1)
    fi
    pids=$(sed -n 's/^gpu_fault: pid=\([0-9]*\) .*context up.*/\1/p' "$T/oF" | tr '\n' ' ')
    n0=$(controls)
    t=$(date '+%Y-%m-%d %H:%M:%S.000')
    if [ -n "$log" ] && [ -n "$pids" ]; then
        {
            echo "[$t Server 99999] Client {PID: ${pids%% *}, Context: 1} encountered a fatal GPU error."
            echo "[$t Server 99999] Server is handling a fatal GPU error."
            echo "[$t Server 99999] The following client process have a sticky error set:"
            for p in $pids; do echo "[$t Server 99999] $p"; done
        } >>"$log"
    fi
    sleep 1
    "$G" status >"$T/st5" 2>&1
    n1=$(controls)
    wait $jf
    rf=$?
    [ -n "$log" ] && [ $rf -eq 0 ] && [ "$(grep -c 'work ok' "$T/oF")" -eq 2 ] && ! grep -q 'hit a fatal GPU fault' "$T/eF" &&
        ok "5. --mps-share=$share: fault lines forged into $log naming $pids: the job ends 0, both ranks' work ok, told of no fault" ||
        { notok "5. --mps-share=$share: forged lines: status $rf, log '$log'"; sed 's/^/#   /' "$T/oF" "$T/eF" | tail -8; }
    [ "$n0" = 1 ] && [ "$n1" = 1 ] && ! grep -q FAULT "$T/st5" &&
        ok "  ... no server retired ($n0 control daemon, then $n1), no FAULT in gsrun status" ||
        { notok "  ... $n0 then $n1 control daemons"; sed 's/^/#   /' "$T/st5"; }
    [ $share = job ] && grep 'not taken as a fault' "$T/eF" | sed 's/^/# /'
    clean "5. --mps-share=$share, forged lines"
done

rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
