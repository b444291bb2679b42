#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/job/agent_lease.c, runtime/service/agent_share.c, runtime/batch/share_stop.c with real MPS (GPU machine; issue 58)
# The user's node service (the shared agent) stopped or ended, with real
# MPS (not run by CI; passes on 1, 2 and 4 GPUs):
#
#   tests/gpu/stop.sh [BUILD_DIR]        (default ./_build; built if missing)
#
#   1. three warm jobs (2 ranks of mps_probe --expect-mps) on the running
#      service: their wall times;
#   2. the service SIGSTOPped while a job runs on it: the same job ends 0,
#      both ranks MPS clients (of servers of the job's own), it names the
#      stopped agent, and its time is within 1.5 s of the warm ones'
#      median; resumed, the service starts no server for it (two clients a
#      server: it would need one more), and the running job ends 0;
#   3. gsrun stop under a running job: a job meanwhile runs on servers of
#      its own; gsrun stop returns once the running job has ended; nothing
#      of MPS is left;
#   4. gsrun stop --now on a lingering service: nothing of MPS left, and
#      how long it took;
#   5. the service killed between a job's two ranks (gsrun exec): the
#      second is an MPS client of a server of the job's own, and told.
# Ends with "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; return 1; fi; }

. "$(dirname "$0")/procs.sh"
gpu_ready "$top" "$build"
echo "# $(nvidia-smi -L | grep -c '^GPU ') GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
unset GSRUN_MPS_SHARE GSRUN_MPS_LINGER
G=$build/launcher/gsrun
P=$build/examples/mps_probe
T=$(mktemp -d /tmp/gsstop.XXXXXX)
base=$GS_ROOT/gsrun-$(id -u)
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
job() { # job NAME ARGS...: a 2-rank job of mps_probe; its status in NAME.rc, wall ms in NAME.ms
    local n=$1 t0
    shift
    t0=$(date +%s%N)
    "$G" -v --mps-linger=60 "$@" -np 2 "$P" --expect-mps >"$T/$n.out" 2>"$T/$n.err"
    echo $? >"$T/$n.rc"
    ms "$t0" >"$T/$n.ms"
}
mps_count() { live_procs 'nvidia-cuda-mps*' | wc -w; } # control daemons and servers alike (comm is cut)
# Two clients a server: a 2-rank job fills one, so that a job beside a
# running one needs a server more.
export GSRUN_MPS_CLIENTS_PER_SERVER=2

# 1. Warm jobs on the running service.
job w0
for i in 1 2 3; do job "w$i"; done
warm=$(for i in 1 2 3; do cat "$T/w$i.ms"; done | sort -n | sed -n 2p)
check "warm jobs on the service: status $(cat "$T"/w[123].rc | tr '\n' ' ')(0 0 0), $(cat "$T"/w[123].ms | tr '\n' ' ')ms (median $warm)" \
    [ "$(cat "$T"/w[0-3].rc | tr -d '\n')" = 0000 ]

# 2. The service stopped while job A holds its server: job S's lease would
# need a server more.
"$G" --mps-linger=60 -np 2 "$P" --expect-mps --sleep 6000 >"$T/a.out" 2>"$T/a.err" &
a=$!
sleep 2
sp=$(live_procs gsrun-share | tr -d ' ')
kill -STOP $sp
job s
n_before=$(mps_count)
check "the service ($sp) SIGSTOPped: the job's status $(cat "$T/s.rc") (0) in $(cat "$T/s.ms") ms, within 1500 ms of the warm median ($warm)" \
    [ "$(cat "$T/s.rc")" = 0 -a "$(cat "$T/s.ms")" -lt $((warm + 1500)) ] || sed 's/^/# /' "$T/s.err"
check "  ... both ranks MPS clients ($(grep -o 'served [0-9]* of [0-9]* ranks as MPS clients' "$T/s.err"))" \
    grep -q "served 2 of 2 ranks as MPS clients" "$T/s.err"
check "  ... it names the stopped agent and what to do" \
    grep -q "shared MPS agent on this node (PID $sp, .*) is stopped .*kill -CONT $sp" "$T/s.err"
kill -CONT $sp
sleep 2
check "  ... resumed, the service starts no server for the job that gave up ($n_before MPS processes, then $(mps_count))" \
    [ "$(mps_count)" -le "$n_before" ]
wait $a
arc=$?
check "  ... job A, on the service all along: status $arc (0), both ranks MPS clients" \
    [ $arc -eq 0 -a "$(grep -c 'mps=1 ' "$T/a.out")" -eq 2 ]

# 3. gsrun stop under a running job.
"$G" --mps-linger=60 -np 2 "$P" --expect-mps --sleep 5000 >"$T/a.out" 2>"$T/a.err" &
a=$!
sleep 2
t0=$(date +%s%N)
"$G" stop >"$T/stop.out" 2>&1 &
stopper=$!
sleep 0.5
job b
check "gsrun stop under a running job: a job meanwhile ends $(cat "$T/b.rc") (0), on servers of its own" \
    eval '[ "$(cat "$T/b.rc")" = 0 ] && grep -q "refused the job: it stops (gsrun stop)" "$T/b.err"' || sed 's/^/# /' "$T/b.err"
wait $a
arc=$?
wait $stopper
src=$?
check "  ... gsrun stop returns $src (0) after the running job ($arc, 0), in $(ms "$t0") ms" [ $src -eq 0 -a $arc -eq 0 ] ||
    sed 's/^/# /' "$T/stop.out"
share_clean "gsrun stop" "$base"

# 4. gsrun stop --now on a lingering service.
job l
t0=$(date +%s%N)
"$G" stop --now >"$T/now.out" 2>&1
rc=$?
check "gsrun stop --now, the service lingering: status $rc (0) in $(ms "$t0") ms" [ $rc -eq 0 ] || sed 's/^/# /' "$T/now.out"
sed 's/^/# /' "$T/now.out"
share_clean "gsrun stop --now" "$base"

# 5. The service killed (its process group: agent, guard, daemons) after it
# answered a job's lease, before the job's second rank came (a launcher of
# its own, through the rank prefix): that rank is an MPS client of a server
# of the job's own, and the job says so.
(
    export GSRUN_JOB_KEY=gpu$$ GSRUN_LOCAL_SIZE=2
    GSRUN_LOCAL_RANK=0 "$G" exec --mps-share=node --mps-linger=60 -- "$P" --sleep 3000 \
        >"$T/k0.out" 2>"$T/k0.err" &
    sleep 2
    sp=$(live_procs gsrun-share | tr -d ' ')
    echo "$sp" >"$T/k.sp"
    [ -n "$sp" ] && kill -9 -- "-$(ps -o pgid= "$sp" | tr -d ' ')"
    sleep 0.5
    GSRUN_LOCAL_RANK=1 "$G" exec --mps-share=node --mps-linger=60 -- "$P" --expect-mps \
        >"$T/k1.out" 2>"$T/k1.err"
    echo $? >"$T/k1.rc"
    wait
)
# The job's report comes on rank 0's stderr at the agent's end, once it has
# stopped the job's servers.
said="ended before 1 of the job's 2 ranks were told their servers: this job runs MPS servers of its own"
for _ in $(seq 200); do
    grep -q "$said" "$T/k0.err" && break
    sleep 0.1
done
check "the service ($(cat "$T/k.sp")) killed between a job's two ranks: rank 1 ends $(cat "$T/k1.rc") (0) as an MPS client" \
    [ "$(cat "$T/k1.rc")" = 0 ] || sed 's/^/# /' "$T/k1.out" "$T/k1.err"
check "  ... on a server of the job's own, said in one line" \
    [ "$(grep -c "$said" "$T/k0.err")" -eq 1 ] || sed 's/^/# /' "$T/k0.err" "$T/k1.err"
sed 's/^/# rank 0: /' "$T/k0.out" "$T/k0.err"
sed 's/^/# rank 1: /' "$T/k1.out"
rm -rf "$base/mps-share" # the killed service's dir (the next one takes it over)
share_clean "the service killed between a job's ranks" "$base"

rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
