# SPDX-License-Identifier: BSD-3-Clause
# Watching a job on the simulated cluster (source after cluster.sh, with
# HOSTS and J, a directory every host sees, set):
#
#   cluster_test_up N       a test's cluster of N hosts: skips the test (77)
#                           where none can run, ends the hosts when the test
#                           exits; sets HOSTS and J
#   wait_lines FILE N       until FILE has N rank lines (10 s at most)
#   leftovers               what is left on every host, "hostN: " in front
#   ours_left, ranks_left   of that, gsrun's part of a job (ranks, agents,
#                           shims, MPS daemons, the files OURS_FILES matches)
#                           or the ranks alone, on the hosts OURS_HOSTS matches
#   clean_within MS T0 [ours|ranks]
#                           polls until nothing (of that) is left, MS at most
#                           after T0 (date +%s%N); the time taken in ELAPSED
#   kill_pid HOST PGREP-ARGS
#                           SIGKILLs the one process pgrep finds on HOST; the
#                           time in T0, the PID in KILLED
OURS_PROCS='rank_report|hello_ranks|gsrun-agent|gsrun-shim|nvidia-cuda-mps'
OURS_FILES=${OURS_FILES:-'host[23]: file /(tmp|dev/shm)/gsrun'}

cluster_test_up() {
    local why
    if ! why=$(cluster_can_run); then
        echo "1..0 # SKIP simulated cluster: $why"
        rm -rf "$TEST_TMP"
        exit 0 # TAP: the plan says skip (77 would be an error)
    fi
    trap cluster_down EXIT
    trap 'exit 1' INT TERM HUP
    cluster_up "$1" || { echo "Bail out! cannot bring the cluster up"; exit 1; }
    HOSTS=$(seq -f "host%g" -s " " "$1")
    J=$GSC_DIR # seen by every host (each has its own /tmp)
}
wait_lines() {
    for _ in $(seq 100); do [ "$(grep -c '^rank' "$1" 2>/dev/null)" -ge "$2" ] && return 0; sleep 0.1; done
    return 1
}
leftovers() { # every host at once: one poll is one host's time, not three
    local h pids=""
    for h in $HOSTS; do cluster_leftovers $h | sed "s/^/$h: /" >$J/left.$h & pids="$pids $!"; done
    wait $pids
    for h in $HOSTS; do cat $J/left.$h; done
}
ours_left() {
    leftovers | grep -E "process [0-9]+: [^ ]*($OURS_PROCS)|$OURS_FILES" |
        grep -E "^${OURS_HOSTS:-host[123]}:"
}
ranks_left() {
    leftovers | grep -E "process [0-9]+: [^ ]*(rank_report|hello_ranks)" | grep -E "^${OURS_HOSTS:-host[123]}:"
}
clean_within() {
    local left
    while :; do
        case "${3:-}" in
        ours) left=$(ours_left) ;;
        ranks) left=$(ranks_left) ;;
        *) left=$(leftovers) ;;
        esac
        [ -z "$left" ] && break
        [ $((($(date +%s%N) - $2) / 1000000)) -ge "$1" ] && break
        sleep 0.05
    done
    ELAPSED=$((($(date +%s%N) - $2) / 1000000))
    [ -z "$left" ] || { echo "$left" | diag; return 1; }
}
kill_pid() {
    local pid
    pid=$(on_host $1 "pgrep $2")
    case "$pid" in "" | *[!0-9]*) echo "no single process to kill on $1 ($2): '$pid'" | diag; pid=0 ;; esac
    T0=$(date +%s%N)
    on_host "$1" "kill -KILL $pid"
    KILLED=$pid
}
