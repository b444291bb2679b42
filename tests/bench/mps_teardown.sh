#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# How fast can MPS go away, and does pinning its server slow the clients?
# For a GPU machine (not CI).
#
#   tests/bench/mps_teardown.sh [--build DIR] [--reps K] [--np N]
#   (RAW=FILE keeps the raw times, WAYS="..." picks the ways, PINNING= skips
#   the pinning runs)
#
# Teardown: a daemon with a pre-started server (start_server), either idle
# (no client ever: a CPU-only job) or after N clients ran (examples/
# small_kernels under mpirun), is stopped K times in each way, the ways
# interleaved:
#   quit      echo quit to the control daemon
#   shutdown  "shutdown_server <pid> -f" (forced), then quit
#   kill      SIGKILL to the server, then quit
#   shut      "shutdown_server <pid>" (waits for clients), then SIGTERM to the
#             control daemon
#   term      "shutdown_server <pid> -f", then SIGTERM to the control daemon
#   termonly  SIGTERM to the control daemon alone
# and prints the median ms from the first command until the server is gone
# and until the daemon is gone, and any line the daemon logged after it.
#
# Pinning: time until N small_kernels ranks have each run their first kernel
# (the program's first_kernel, from mpirun's start), on a pre-started daemon that is unpinned, or
# pinned to the last core (daemon and, by inheritance, its server).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/gpu/procs.sh"
pin_one_gpu
build=$top/_build reps=5 np=16
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--reps K] [--np N]" >&2; exit 2 ;;
    esac
done
control=$(command -v nvidia-cuda-mps-control) || { echo "$0: no nvidia-cuda-mps-control" >&2; exit 1; }
prog=$build/examples/small_kernels
[ -x "$prog" ] || { echo "$0: $prog is missing; build first" >&2; exit 1; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
res=$(mktemp)
trap 'rm -f "$res"' EXIT
now() { echo $(($(date +%s%N) / 1000)); } # microseconds
# Gone: no process, or a zombie whose every thread has exited (a leader
# shows Z while its other threads still tear down the GPU context).
gone() {
    [ ! -e "/proc/$1" ] ||
        { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ] && [ "$(ls "/proc/$1/task" 2>/dev/null | wc -l)" -le 1 ]; }
}
waitgone() { # waitgone PID: until gone, 5 s at most (then SIGKILL; prints "stuck")
    local t=$(($(now) + 5000000))
    while ! gone "$1"; do
        [ "$(now)" -lt $t ] && continue
        kill -KILL "$1" 2>/dev/null
        echo stuck >&2
        t=$(($(now) + 5000000))
    done
}
ctl() { echo "$2" | CUDA_MPS_PIPE_DIRECTORY=$1/p "$control"; }

up() { # up DIR [CORE]: daemon + server; prints the server's PID
    mkdir -p "$1/p" "$1/l"
    if [ -n "${2:-}" ]; then
        CUDA_MPS_PIPE_DIRECTORY=$1/p CUDA_MPS_LOG_DIRECTORY=$1/l taskset -c "$2" "$control" -d
    else
        CUDA_MPS_PIPE_DIRECTORY=$1/p CUDA_MPS_LOG_DIRECTORY=$1/l "$control" -d
    fi
    while [ ! -S "$1/p/control" ]; do sleep 0.001; done
    ctl "$1" "start_server -uid $(id -u)" >/dev/null
    ctl "$1" get_server_list | head -1
}
clients() { # clients DIR: N ranks of small_kernels on the daemon; prints s to the first kernel
    local t0 line
    t0=$(date +%s.%N)
    line=$(CUDA_MPS_PIPE_DIRECTORY=$1/p CUDA_MPS_LOG_DIRECTORY=$1/l mpirun -x CUDA_MPS_PIPE_DIRECTORY \
        -x CUDA_MPS_LOG_DIRECTORY -np "$np" "$prog" 2>&1 | grep -m1 "^small_kernels: .*ok=1")
    [ -n "$line" ] || { echo "$0: small_kernels failed on the daemon" >&2; echo 0; return; }
    echo "$line" | sed -n 's/.* first_kernel=\([0-9.]*\).*/\1/p' | awk -v a="$t0" '{ printf "%.3f", $1 - a }'
}
stop() { # stop DIR SERVER WAY: records ms to server gone and to daemon gone
    local d=$1 spid=$2 way=$3 dpid t0 ts td
    dpid=$(cat "$d/p/nvidia-cuda-mps-control.pid")
    local mark
    mark=$(cat "$d"/l/control.log 2>/dev/null | wc -l)
    t0=$(now)
    case $way in
    quit) ctl "$d" quit >/dev/null ;;
    shutdown) ctl "$d" "shutdown_server $spid -f" >/dev/null ;;
    kill) kill -KILL "$spid" ;;
    term) ctl "$d" "shutdown_server $spid -f" >/dev/null ;;
    shut) ctl "$d" "shutdown_server $spid" >/dev/null ;;
    termonly) kill -TERM "$dpid" ;;
    esac
    waitgone "$spid"
    ts=$(now)
    case $way in
    quit | termonly) ;;
    term | shut) kill -TERM "$dpid" ;;
    *) ctl "$d" quit >/dev/null ;;
    esac
    waitgone "$dpid"
    td=$(now)
    echo "$way $(((ts - t0) / 1000)) $(((td - t0) / 1000))" >>"$res.$4"
    [ "$i" = 1 ] && [ "$4" != scratch ] && tail -n +$((mark + 1)) "$d"/l/control.log 2>/dev/null | head -4 | sed "s/^/    $4 $way: /" >>"$res.log"
}

ways=${WAYS:-quit shutdown kill shut term termonly}
: >"$res.idle"
: >"$res.used"
: >"$res.first"
: >"$res.log"
for i in $(seq 1 "$reps"); do
    for w in $ways; do
        d=$(mktemp -d /tmp/gsq.XXXXXX)
        s=$(up "$d")
        sleep 0.2
        stop "$d" "$s" "$w" idle
        rm -rf "$d"
        d=$(mktemp -d /tmp/gsq.XXXXXX)
        s=$(up "$d")
        clients "$d" >/dev/null
        stop "$d" "$s" "$w" used
        rm -rf "$d"
    done
    for pin in ${PINNING-unpinned pinned}; do
        d=$(mktemp -d /tmp/gsq.XXXXXX)
        if [ $pin = pinned ]; then s=$(up "$d" $(($(nproc) - 1))); else s=$(up "$d"); fi
        echo "$pin $(clients "$d") $(taskset -pc "$s" | sed 's/.*: //')" >>"$res.first"
        stop "$d" "$s" quit scratch
        rm -rf "$d"
    done
done
echo "MPS teardown: $reps runs per way, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores"
for s in idle used; do
    awk -v s=$s -v list="$ways" '
    function median(a, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { n[$1]++; sv[$1, n[$1]] = $2; dv[$1, n[$1]] = $3 }
    END {
        k = split(list, w, " ")
        for (j = 1; j <= k; j++) {
            for (i = 1; i <= n[w[j]]; i++) { a[i] = sv[w[j], i]; b[i] = dv[w[j], i] }
            printf "  %-5s server %-9s server gone %5.1f ms, daemon gone %5.1f ms (medians; all daemon: ", s, w[j], median(a, n[w[j]]), median(b, n[w[j]])
            for (i = 1; i <= n[w[j]]; i++) printf "%s%d", (i > 1 ? " " : ""), dv[w[j], i]
            printf ")\n"
        }
    }' "$res.$s"
done
awk '{ n[$1]++; v[$1] = v[$1] " " $2; m[$1] = $3 }
     END { for (p in n) printf "  first kernel, %d ranks, server %s (cpus %s): first_s%s\n", '"$np"', p, m[p], v[p] }' "$res.first"
echo "control.log lines after the first command (first rep of each way):"
cat "$res.log"
[ -n "${RAW:-}" ] && cat "$res".idle "$res".used "$res".first >"$RAW"
rm -f "$res".*
