#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/mps.c, runtime/agent/daemons.c with real MPS (GPU machine)
# Faults with real MPS on a GPU machine (not run by CI).
#
#   tests/gpu/faults.sh BUILD_DIR
#
# 1. A rank SIGKILLed while its kernels run: the job ends as mpirun ends it,
#    MPS is torn down, and the next job runs under MPS normally.
# 2. A rank that faults on the GPU (write through an invalid pointer).
# 3. The node agent told to stop (SIGTERM) while clients are alive: quit
#    with clients attached.
# 4. The node agent SIGKILLed: its daemon does not outlive it, its guard ends
#    the ranks.
# 5. mpirun SIGKILLed, 6. gsrun SIGKILLed, while 4 ranks run kernels under
#    MPS: within 2 s no rank, no MPS process and no run directory is left.
# After each: no MPS process and no run directory left. Ends with N passed, N failed.
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
mps_procs() { live_procs 'nvidia-cuda-mps*'; }
live_ranks() { live_procs small_kernels; }
clean() { # clean "what": waits up to 10 s for MPS and run dirs to go
    local i
    for i in $(seq 100); do
        [ -z "$(mps_procs)" ] && ! ls -d /tmp/gsrun.* /dev/shm/gsrun.* >/dev/null 2>&1 && break
        sleep 0.1
    done
    if [ -z "$(mps_procs)" ] && ! ls -d /tmp/gsrun.* /dev/shm/gsrun.* >/dev/null 2>&1; then
        ok "$1: no MPS process and no run directory left"
    else
        notok "$1: left: $(mps_procs) $(ls -d /tmp/gsrun.* /dev/shm/gsrun.* 2>/dev/null)"
    fi
}
next_job_ok() {
    "$b/launcher/gsrun" --mps=on -np 4 "$b/examples/mps_probe" --expect-mps >/tmp/gsf.next 2>&1 &&
        [ "$(grep -c 'mps=1 ' /tmp/gsf.next)" -eq 4 ] && ok "$1: the next job runs under MPS" ||
        { notok "$1: the next job failed"; sed 's/^/#   /' /tmp/gsf.next | tail -8; }
    clean "$1: next job"
}

# 1. SIGKILL a rank mid-kernel (the ranks run about 20 s of kernels).
"$b/launcher/gsrun" -v --mps=on -np 4 "$b/examples/small_kernels" --kernels 20000 >/tmp/gsf.out 2>&1 &
g=$!
victim=""
for _ in $(seq 200); do
    # Ranks after exec are named small_kernels (the shim and mpirun are not).
    [ "$(pgrep -xc small_kernels)" -ge 4 ] && victim=$(pgrep -x small_kernels | sort -n | sed -n 3p) && break
    sleep 0.1
done
sleep 3
kill -9 "$victim"
wait $g
rc=$?
echo "# gsrun status after SIGKILL of rank pid $victim while its kernels ran: $rc"
sed 's/^/#   /' /tmp/gsf.out | grep -v "^#   $" | tail -12
[ $rc -ne 0 ] && ok "SIGKILLed rank: the job fails (status $rc)" || notok "SIGKILLed rank: status 0"
clean "SIGKILLed rank"
next_job_ok "after SIGKILL"

# 2. A GPU fault in rank 1.
GSRUN_FAULTS_ONLY=${GSRUN_FAULTS_ONLY:-}
[ "$GSRUN_FAULTS_ONLY" = 1 ] && { echo "$pass passed, $fail failed"; [ $fail -eq 0 ]; exit; }
"$b/launcher/gsrun" -v --mps=on -np 4 "$b/examples/mps_probe" --fault 1 >/tmp/gsf.out 2>&1
rc=$?
echo "# gsrun status with a GPU fault in rank 1: $rc"
sed 's/^/#   /' /tmp/gsf.out | tail -25
[ $rc -ne 0 ] && ok "GPU fault: the job fails (status $rc)" || notok "GPU fault: status 0"
clean "GPU fault"
next_job_ok "after a GPU fault"

# 3. SIGTERM to the node agent while 4 clients hold contexts.
"$b/launcher/gsrun" -v --mps=on -np 4 "$b/examples/mps_probe" --sleep 4000 >/tmp/gsf.out 2>&1 &
g=$!
for _ in $(seq 100); do [ "$(grep -c 'mps=1' /tmp/gsf.out)" -ge 4 ] && break; sleep 0.1; done
agent=$(pgrep -o -f launcher/gsrun-agent) # the oldest: the agent, not its guard
kill -TERM $agent
wait $g
rc=$?
echo "# SIGTERM to the agent ($agent) with clients alive: gsrun status $rc"
sed 's/^/#   /' /tmp/gsf.out | tail -10
clean "quit with clients alive"
next_job_ok "after quit with clients alive"

# 4. SIGKILL to the node agent.
"$b/launcher/gsrun" --mps=on -np 4 "$b/examples/mps_probe" --sleep 4000 >/tmp/gsf.out 2>&1 &
g=$!
for _ in $(seq 100); do [ "$(grep -c 'mps=1' /tmp/gsf.out)" -ge 4 ] && break; sleep 0.1; done
agent=$(pgrep -o -f launcher/gsrun-agent)
kill -KILL $agent
sleep 1
echo "# 1 s after SIGKILL of the agent: MPS processes: [$(mps_procs)]"
wait $g
echo "# gsrun status: $?"
sed 's/^/#   /' /tmp/gsf.out | tail -6
clean "agent SIGKILLed"
next_job_ok "after the agent was SIGKILLed"

# 5, 6. SIGKILL to mpirun, then to gsrun, while 4 ranks run kernels.
for target in mpirun gsrun; do
    "$b/launcher/gsrun" -v --mps=on -np 4 "$b/examples/small_kernels" --kernels 20000 >/tmp/gsf.out 2>&1 &
    g=$!
    for _ in $(seq 200); do [ "$(pgrep -xc small_kernels)" -ge 4 ] && break; sleep 0.1; done
    sleep 2
    if [ $target = gsrun ]; then victim=$g; else victim=$(pgrep -P $g -x 'mpirun|prterun'); fi
    t0=$(date +%s%N)
    kill -KILL "$victim"
    # Until nothing is left, 3 s at most; zombies (no exe link) do not count:
    # reaping orphans is init's business.
    t_r="" t_m="" t_d=""
    while :; do
        r=$(live_ranks) m=$(mps_procs) d=$(ls -d /tmp/gsrun.* /dev/shm/gsrun.* 2>/dev/null)
        ms=$((($(date +%s%N) - t0) / 1000000))
        [ -z "$r" ] && [ -z "$t_r" ] && t_r=$ms
        [ -z "$m" ] && [ -z "$t_m" ] && t_m=$ms
        [ -z "$d" ] && [ -z "$t_d" ] && t_d=$ms
        left="$m$r$d"
        [ -z "$left" ] || [ $ms -ge 3000 ] && break
        sleep 0.02
    done
    echo "# ranks gone at ${t_r:-?} ms, MPS at ${t_m:-?} ms, run dir at ${t_d:-?} ms"
    wait $g 2>/dev/null
    echo "# SIGKILL of $target ($victim) with 4 ranks under MPS: gone after $ms ms"
    sed 's/^/#   /' /tmp/gsf.out | grep -E "problem|stopping|shut down" | tail -6
    [ -z "$left" ] && [ $ms -lt 2000 ] && ok "SIGKILL of $target: ranks, MPS and run dirs gone in $ms ms" ||
        notok "SIGKILL of $target: after $ms ms left: $left"
    pkill -KILL -x small_kernels 2>/dev/null
    clean "SIGKILL of $target"
    next_job_ok "after SIGKILL of $target"
done

# 7. The faulted rank exits 0; the others are not hung and are not ended.
t0=$(date +%s%N)
"$b/launcher/gsrun" -v --mps=on --mps-share=job --mps-fault-grace=3 -np 4 sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then "$0" --fault-after 500; exit 0; else sleep 8; fi' \
    "$b/examples/gpu_fault" >/tmp/gsf.out 2>&1
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "# a faulted rank that exits 0 beside 3 ranks that run on: status $rc after $ms ms"
grep -E "fatal GPU fault|still ran|faulted|grace" /tmp/gsf.out | sed 's/^/#   /' | head -6
grep -q 'hit a fatal GPU fault' /tmp/gsf.out && ok "faulted rank that exits 0: the fault told" ||
    notok "faulted rank that exits 0: the fault not told"
[ $rc = 0 ] && [ $ms -ge 8000 ] && ! grep -q 'still ran' /tmp/gsf.out &&
    ok "faulted rank that exits 0: the job not ended by the grace (status $rc, $ms ms)" ||
    notok "faulted rank that exits 0: status $rc after $ms ms (the grace ended it?)"
clean "faulted rank that exits 0"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
