#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: MPS itself stuck or not gsrun's, with real MPS (GPU machine; issue 66)
# A job never hangs silently on MPS, on an NVIDIA GPU machine (not run by
# CI; passes on 1, 2 and 4 GPUs):
#
#   tests/gpu/stuck.sh [BUILD_DIR]        (default ./_build; built if missing)
#
#   1. the user's shared control daemons stopped (SIGSTOP) while warm: the
#      next job is told, runs on fresh ones (status 0, every rank an MPS
#      client), the stopped ones are gone;
#   2. the shared servers stopped: the same;
#   3. the job's own control daemon (--mps-share=job) stopped while its
#      ranks work before CUDA (1.5 s): the waiting ranks told within 5 s of
#      the job's start, a fresh daemon started, the job ends by itself, the
#      ranks counted as what they became;
#   4. ranks pointed by a wrapper at an MPS server started by hand (its own
#      CUDA_MPS_PIPE_DIRECTORY): told, never counted served by gsrun;
#   5. ranks that exit 127 before any CUDA: no "--mps=off" advice;
#   6. a control daemon stopped while a command's client is killed after
#      2 s (as gsrun bounds its commands): resumed, it lives and answers.
# Each case prints the ms from the job's start to gsrun's line and to the
# job's end. Ends with "N passed, N failed".
set -u
export GSRUN_MPS_LINGER=${GSRUN_MPS_LINGER:-0}
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
check() { local desc=$1; shift; if "$@"; then ok "$desc"; else notok "$desc"; return 1; fi; }

. "$(dirname "$0")/procs.sh"
gpu_ready "$top" "$build"
ngpus=$(nvidia-smi -L | grep -c '^GPU ')
echo "# $ngpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
G=$build/launcher/gsrun
P=$build/examples/mps_probe
T=$(mktemp -d /tmp/gsstuck.XXXXXX)
CTL=$(command -v nvidia-cuda-mps-control)

run() { # run NAME ARGS...: gsrun in the background, stderr lines stamped (ms)
    local n=$1
    shift
    (
        t0=$(date +%s%N)
        "$G" "$@" 2> >(while IFS= read -r l; do
            echo "$((($(date +%s%N) - t0) / 1000000)) $l"
        done >"$T/$n.err") >"$T/$n.out"
        rc=$?
        echo "$((($(date +%s%N) - t0) / 1000000))" >"$T/$n.end"
        echo $rc >"$T/$n.rc"
    ) &
}
waitrc() { for _ in $(seq 1200); do [ -s "$T/$1.rc" ] && sleep 0.3 && return 0; sleep 0.1; done; return 1; }
first_ms() { grep -m1 "$2" "$T/$1.err" | cut -d' ' -f1; }
rc_of() { cat "$T/$1.rc" 2>/dev/null || echo none; }
end_of() { cat "$T/$1.end" 2>/dev/null || echo none; }
show() { sed 's/^/#   /' "$T/$1.err" | cut -c1-400 | tail -${2:-12}; }
# MPS processes (comm "nvidia-cuda-mps": both daemon and server) whose
# parent's comm is PARENT.
children_named() { # children_named PARENT_COMM
    local p pp c
    for p in $(live_procs 'nvidia-cuda-mps'); do
        pp=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
        read -r c 2>/dev/null <"/proc/$pp/comm" || continue
        [ "$c" = "$1" ] && printf '%s ' "$p"
    done
}
servers_of() { # the MPS servers of the daemons given
    local p pp d
    for p in $(live_procs 'nvidia-cuda-mps'); do
        pp=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
        for d in "$@"; do [ "$pp" = "$d" ] && printf '%s ' "$p"; done
    done
}
all_gone() { # all_gone PID...: within 5 s
    local p left
    for _ in $(seq 50); do
        left=""
        for p in "$@"; do [ -e /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null && left="$left $p"; done
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    return 1
}
clean() {
    local left
    for _ in $(seq 100); do
        left=$(live_procs 'nvidia-cuda-mps*')
        [ -z "$left" ] && break
        sleep 0.1
    done
    check "  ... no MPS process left (${left:-none})" [ -z "$left" ]
}

# 1-2. The shared ones stopped between two jobs.
for what in daemon server; do
    run warm_$what --mps-linger=60 -np 2 "$P" --sleep 200
    waitrc warm_$what
    daemons=$(children_named gsrun-share)
    victims=$daemons
    [ $what = server ] && victims=$(servers_of $daemons)
    [ -n "$victims" ] && kill -STOP $victims
    run next_$what -v -np 2 "$P" --expect-mps --sleep 200
    waitrc next_$what
    told=$(first_ms next_$what "wedged")
    check "shared $what(s) ($victims) stopped: the next job told at ${told:-never} ms (under 5000), ended at $(end_of next_$what) ms, status $(rc_of next_$what) (0)" \
        eval '[ -n "$victims" ] && [ -n "$told" ] && [ "$told" -lt 5000 ] && [ "$(rc_of next_$what)" = 0 ]' ||
        show next_$what
    check "  ... every rank an MPS client of the fresh server (served 2 of 2)" \
        grep -q "served 2 of 2 ranks as MPS clients" "$T/next_$what.err" || show next_$what
    check "  ... the stopped ones are gone" all_gone $victims
    grep -m1 "wedged" "$T/next_$what.err" | cut -c1-400 | sed 's/^/#   /'
    clean
done

# 3. The job's own daemon stopped while its ranks work before CUDA (1.5 s).
run own -v --mps-share=job -np 2 sh -c 'sleep 1.5; exec "$0" "$@"' "$P" --sleep 500
own=""
for _ in $(seq 100); do
    own=$(children_named gsrun-agent)
    [ -n "$own" ] && [ -n "$(servers_of $own)" ] && break
    sleep 0.05
done
[ -n "$own" ] && kill -STOP $own
waitrc own
told=$(first_ms own "wedged")
check "the job's own daemon ($own) stopped before its ranks' CUDA (1500 ms): told at ${told:-never} ms (under 5000), ended by itself at $(end_of own) ms, status $(rc_of own)" \
    eval '[ -n "$own" ] && [ -n "$told" ] && [ "$told" -lt 5000 ] && [ "$(end_of own)" -lt 60000 ]' || show own
check "  ... a fresh daemon started, the stopped one gone" \
    eval 'grep -q "started a fresh one (control daemon [0-9]*)" "$T/own.err" && all_gone $own' || show own
check "  ... its end counts the ranks as what they became (not served, not still blocked, not without CUDA)" \
    eval '! grep -q "served [1-9]" "$T/own.err" && ! grep -q "mps=off" "$T/own.err" &&
          ! grep -q "blocked on" "$T/own.err"' || show own
grep -m1 "wedged" "$T/own.err" | cut -c1-400 | sed 's/^/#   /'
grep "rank" "$T/own.err" | tail -3 | cut -c1-300 | sed 's/^/#   /'
head -4 "$T/own.out" | cut -c1-200 | sed 's/^/#   rank output: /'
clean

# 4. A server started by hand, its pipe dir exported by a wrapper.
H=$T/hand
mkdir -p "$H/pipe" "$H/log"
CUDA_MPS_PIPE_DIRECTORY=$H/pipe CUDA_MPS_LOG_DIRECTORY=$H/log "$CTL" -d
run hand -v -np 2 env CUDA_MPS_PIPE_DIRECTORY="$H/pipe" "$P" --sleep 3000
waitrc hand
told=$(first_ms hand "$H/pipe")
check "ranks on a hand-started server: status $(rc_of hand) (0), told at ${told:-never} ms, ended at $(end_of hand) ms" \
    eval '[ "$(rc_of hand)" = 0 ] && [ -n "$told" ]' || show hand
check "  ... never counted served by gsrun's server (served 0 of 2)" \
    grep -q "served 0 of 2" "$T/hand.err" || show hand
grep "$H/pipe" "$T/hand.err" | head -1 | cut -c1-400 | sed 's/^/#   /'
grep "served" "$T/hand.err" | tail -1 | cut -c1-300 | sed 's/^/#   /'
echo quit | CUDA_MPS_PIPE_DIRECTORY=$H/pipe "$CTL"
clean

# 5. Ranks that never ran their program (exit 127 before any CUDA).
run gone -v -np 2 "$T/no-such-program"
waitrc gone
check "ranks that exit 127 before CUDA: status $(rc_of gone) (not 0), no --mps=off advice" \
    eval '[ "$(rc_of gone)" != 0 ] && ! grep -q "mps=off" "$T/gone.err"' || show gone
grep -E "before|never" "$T/gone.err" | tail -2 | cut -c1-300 | sed 's/^/#   /'
clean

# 6. gsrun bounds an MPS command at 2 s and kills its client (runtime/gpu/
# mps.c): a daemon stopped meanwhile, once resumed, answers into a closed
# connection. It must live on and answer the next command, or gsrun must
# leave the client to end by itself instead of killing it.
H6=$T/closed
mkdir -p "$H6/pipe" "$H6/log"
before=$(live_procs 'nvidia-cuda-mps')
CUDA_MPS_PIPE_DIRECTORY=$H6/pipe CUDA_MPS_LOG_DIRECTORY=$H6/log "$CTL" -d
sleep 0.5
d=""
for p in $(live_procs 'nvidia-cuda-mps'); do
    case " $before " in *" $p "*) ;; *) d="$d $p" ;; esac
done
d=${d# }
first=$(echo get_default_active_thread_percentage | CUDA_MPS_PIPE_DIRECTORY=$H6/pipe timeout 5 "$CTL")
[ -n "$d" ] && kill -STOP $d
echo get_default_active_thread_percentage | CUDA_MPS_PIPE_DIRECTORY=$H6/pipe timeout -s KILL 2 "$CTL" >/dev/null
krc=$?
[ -n "$d" ] && kill -CONT $d
sleep 1
alive=no
[ -n "$d" ] && [ -e "/proc/$d" ] && ! grep -q '^State:.*Z' "/proc/$d/status" && alive=yes
next=$(echo get_default_active_thread_percentage | CUDA_MPS_PIPE_DIRECTORY=$H6/pipe timeout 5 "$CTL")
check "a control daemon ($d, answered '$first') stopped while a command's client was killed at 2 s (status $krc, 137): resumed, it lives ($alive) and answers the next ('$next')" \
    eval '[ -n "$d" ] && [ $krc = 137 ] && [ $alive = yes ] && [ -n "$next" ] && [ "$next" = "$first" ]' ||
    tail -5 "$H6/log/control.log" | sed 's/^/#   /'
echo quit | CUDA_MPS_PIPE_DIRECTORY=$H6/pipe timeout 5 "$CTL"
[ -n "$d" ] && all_gone $d || kill -9 $d 2>/dev/null
clean

rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
