#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: several MPS servers per GPU with real MPS (GPU machine): runtime/plan/policy.c's
# dealing, runtime/agent/ (daemons, placer, publish), every front end, teardown
# Several MPS servers on one GPU, with the real daemon (not run by CI).
#
#   tests/gpu/servers.sh BUILD_DIR [NP]      (NP default 100: three servers of 48)
#
# 1. NP ranks of examples/mps_probe, each holding its context for a while so
#    that all are clients at once, through gsrun, the rank prefix under
#    plain mpirun (gsrun exec) and the Open MPI component: every rank under
#    MPS with a correct result, ceil(NP / 48) control daemons reported, exit
#    status 0, no MPS process and no run directory left. GPU memory in use is
#    sampled while they run: the context cost per client.
# 2. The context cost per client: free device memory as rank 0 sees it with
#    1 and with NP contexts, under gsrun and under plain mpirun.
# 3. SIGKILL of gsrun, mpirun, the node agent and one rank while NP ranks
#    hold the GPU (every rank a client, sleeping): the time until no rank,
#    agent, MPS process or run dir is left (polled every 10 ms, 30 s at most).
# GSRUN_SERVERS_FRONTS and GSRUN_SERVERS_KILLS choose the steps.
# Ends with "N passed, N failed".
set -u
# Each job's own servers (--mps-share=job, in every front end): the script
# counts the job's daemons, which the user's shared servers (the default,
# tests/gpu/share.sh) would hide.
export GSRUN_MPS_SHARE=job OMPI_MCA_rtc_gsrun_mps_share=job
build=$1
np=${2:-100}
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/gpu/procs.sh"
pin_one_gpu
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
servers=$(((np + 47) / 48))
probe=("$build/examples/mps_probe" --expect-mps --iters 20 --sleep 4000)
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1; }
leftovers() {
    echo "$(live_procs 'nvidia-cuda-mps*')$(live_procs mps_probe)$(live_procs 'gsrun-agent')$(ls -d /tmp/gsrun.* /tmp/gsrun-*/* /dev/shm/gsrun.* /dev/shm/gsrun-*/* 2>/dev/null | tr '\n' ' ')"
}

launch() { # launch FRONT: NP ranks of the probe through that front end
    case $1 in
    gsrun) "$build/launcher/gsrun" -v --mps=on -np "$np" --oversubscribe "${probe[@]}" ;;
    exec) mpirun -np "$np" --oversubscribe "$build/launcher/gsrun" exec -v --mps=on -- "${probe[@]}" ;;
    component)
        mpirun --mca mca_base_component_path "SYS_DEFAULT:$build/ompi/mca" \
            --mca rtc_gsrun_agent "$build/launcher/gsrun-agent" --mca rtc_gsrun_mps on \
            --mca rtc_gsrun_verbose 1 -np "$np" --oversubscribe "${probe[@]}"
        ;;
    esac
}

nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader
before=$(leftovers)
[ -z "$before" ] && ok "nothing of gsrun or MPS running before the test" ||
    notok "already running before the test: $before"
idle=$(mem_used)
fronts=${GSRUN_SERVERS_FRONTS:-gsrun exec component}
for front in $fronts; do
    out=$(mktemp)
    t0=$(date +%s.%N)
    launch "$front" >"$out" 2>&1 &
    job=$!
    peak=$idle
    while kill -0 $job 2>/dev/null; do
        m=$(mem_used)
        [ "$m" -gt "$peak" ] && peak=$m
        sleep 0.2
    done
    wait $job
    rc=$?
    t1=$(date +%s.%N)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    n_mps=$(grep -c "mps=1 .*result=ok" "$out")
    n_d=$(grep -c "MPS control daemon [0-9]* on" "$out")
    grep -E "MPS servers|MPS control daemon|problem|error" "$out" | head -8 | sed "s/^/# $front: /"
    [ $rc -eq 0 ] && ok "$front: $np ranks, exit status 0 ($wall s)" || notok "$front: exit status $rc"
    [ "$n_mps" -eq "$np" ] && ok "$front: $n_mps of $np ranks under MPS with a correct result" ||
        { notok "$front: $n_mps of $np ranks under MPS with a correct result"; grep -v "result=ok" "$out" | head -5 | sed 's/^/# /'; }
    [ "$n_d" -eq "$servers" ] && ok "$front: $n_d MPS control daemons (ceil($np / 48))" ||
        notok "$front: $n_d MPS control daemons, $servers expected"
    grep -o "pct=[0-9.]*" "$out" | sort | uniq -c | tr '\n' ' ' | sed "s/^/# $front: shares: /"
    echo
    echo "# $front: GPU memory in use: idle $idle MiB, peak $peak MiB: $(((peak - idle) / np)) MiB per client"
    sleep 0.5
    left=$(leftovers)
    [ "$left" = "$before" ] && ok "$front: nothing left" || notok "$front: left: $left"
    rm -f "$out"
done

# The context cost per client: the device's free memory seen from inside
# with 1 rank and with NP ranks holding their contexts, under gsrun (MPS)
# and plain mpirun (no MPS).
free_with() { # free_with LAUNCH N: the free MiB rank 0 saw with N contexts
    $1 -np "$2" --oversubscribe "$build/examples/mps_probe" --iters 1 --n 1024 --mem 2>/dev/null |
        sed -n 's/^mps_probe: .* free_mib=\([0-9]*\) .*/\1/p'
}
for how in gsrun plain; do
    if [ $how = gsrun ]; then l="$build/launcher/gsrun --mps=on"; else l=mpirun; fi
    f1=$(free_with "$l" 1) fn=$(free_with "$l" "$np")
    if [ -n "$f1" ] && [ -n "$fn" ]; then
        ok "$how: context cost $(((f1 - fn) / (np - 1))) MiB per client (free with 1 rank $f1 MiB, with $np ranks $fn MiB)"
    else
        notok "$how: no memory figures (1 rank: '$f1', $np ranks: '$fn')"
    fi
done

# Kills: the whole job's end with several servers, from each side.
kill_case() { # kill_case WHAT
    local out job victim t0 t1 n=0
    out=$(mktemp)
    "$build/launcher/gsrun" --mps=on -np "$np" --oversubscribe "$build/examples/mps_probe" \
        --iters 20 --sleep 30000 >"$out" 2>&1 &
    job=$!
    # Every rank has its context and sleeps (each prints first): the job
    # holds every server.
    until [ "$(grep -c 'mps=1 ' "$out")" -ge "$np" ] || [ $n -ge 1200 ] || ! kill -0 $job 2>/dev/null; do
        sleep 0.1
        n=$((n + 1))
    done
    nmps=$(live_procs 'nvidia-cuda-mps*' | wc -w)
    case $1 in
    gsrun) victim=$job ;;
    mpirun) victim=$(live_procs mpirun) ;;
    agent) victim=$(live_procs gsrun-agent) ;;
    rank) victim=$(live_procs mps_probe | awk '{print $1}') ;;
    esac
    if [ "$(grep -c 'mps=1 ' "$out")" -lt "$np" ] || [ -z "$victim" ] || ! kill -0 $victim 2>/dev/null; then
        notok "SIGKILL of $1: the job was not running with every rank a client (victim '$victim')"
        kill -9 $job 2>/dev/null
        sleep 5
        rm -f "$out"
        return
    fi
    t0=$(date +%s%N)
    kill -9 $victim
    n=0
    while [ -n "$(leftovers)" ] && [ $n -lt 3000 ]; do
        sleep 0.01
        n=$((n + 1))
    done
    t1=$(date +%s%N)
    wait $job 2>/dev/null
    left=$(leftovers)
    [ -z "$left" ] && ok "SIGKILL of $1 with $servers servers ($nmps MPS processes, $np clients): nothing left after $(((t1 - t0) / 1000000)) ms" ||
        notok "SIGKILL of $1 with $servers servers: left after 30 s: $left"
    rm -f "$out"
}
for what in ${GSRUN_SERVERS_KILLS:-gsrun mpirun agent rank}; do
    kill_case "$what"
done
echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
