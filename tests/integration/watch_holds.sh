#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/job/agent_watch.c, runtime/job/attach.c, runtime/agent/agent_fault.c, runtime/agent/agent_fault_word.c, runtime/gpu/gpu.c, runtime/gpu/mps.c, runtime/gpu/mps_health.c
# What gsrun says of a rank holds, and the fault grace never ends a job
# wrongly (issue 65), with the fakes (tests/fake: the fake NVML answers a
# listing too small for its processes as the real one does, with none of
# them) and tests/progs/ct_client (a CUDA program without MPI, so that one
# rank can end long before the others):
#   1. the grace: a faulted rank that exits 0 beside ranks on another GPU
#      is not ended; one that catches the error and sleeps on is, and named
#   2. fault lines forged into the job's own server log by a process of the
#      user's: naming a live non-client, the job's healthy clients, a rank's
#      wrapper shell, PID 1 (--mps-share=job and node)
#   3. NVML's listings read whole: 40 ranks without MPS on one GPU (job,
#      node); another user's 40 plain contexts beside the user's 2 ranks
#   4. PID reuse: an exited rank's PID taken by another user's context
#   5. forged client lines: ACTIVE for ranks without MPS, "not a valid GPU
#      ID" for healthy clients
#   6. mixed workers: a rank's 4 workers, 2 of them without MPS
#   7. the whole environment read (2 MB, the pipe var past 64 KiB); a
#      set-uid program's effective uid
# Another user (uid 4242) needs root: those cases skip without it.
# WATCH_ONLY="2 5" runs only those cases (while working on one).
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

CT=$B/tests/progs/ct_client
export FAKE_NVML_CTX_DIR=$TEST_TMP/ctx
mkdir -p "$FAKE_NVML_CTX_DIR"
OTHER=4242
ROOT=$([ "$(id -u)" = 0 ] && echo yes || echo no)
OTHER_PIDS=()
SUID_DIR=""

job() { bg_job "$@"; } # job NAME NGPUS args... (lib.sh)
ended() { wait_for "$OUT.$1.rc" . 1 "${2:-30}"; } # ended NAME [SECONDS]
# The ranks of job NAME hold their contexts (ct_client --until) until FILE
# has COUNT lines matching PATTERN (SECONDS at most): on a loaded machine
# the agent may take seconds to look, and a context gone before is no case.
release_when() { # release_when NAME FILE PATTERN COUNT SECONDS
    wait_for "$2" "$3" "$4" "$5"
    touch "$TEST_TMP/end.$1"
}
rc_of() { cat "$OUT.$1.rc" 2>/dev/null || echo none; }
skip() { ok "$1 # SKIP ${2:-needs root (another user, uid $OTHER)}"; } # skip WHAT [WHY]
# Whether this PID namespace lets root choose the next PID (case 4).
ns_last_pid_ok() {
    [ $ROOT = yes ] && echo "$(cat /proc/sys/kernel/ns_last_pid)" >/proc/sys/kernel/ns_last_pid 2>/dev/null
}
pid_of_rank() { # pid_of_rank NAME RANK: the PID ct_client printed
    sed -n "s/^rank=$2 pid=\([0-9]*\) .*/\1/p" "$OUT.$1" | head -1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# A process of another user, alive SECONDS, its PID in $!; ended by cleanup.
as_other() { # as_other SECONDS
    setpriv --reuid=$OTHER --regid=$OTHER --clear-groups sleep "$1" &
    OTHER_PIDS+=($!)
}
cleanup_other() {
    local p
    for p in "${OTHER_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${OTHER_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    OTHER_PIDS=()
}
# The shared agents of this test's jobs gone (--mps-share=node, linger 0).
share_gone() {
    local p i
    for ((i = 0; i < 100; i++)); do
        local n=0
        for p in $(pgrep -x gsrun-share); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "GS_TEST_MARK=$TEST_TMP" && n=$((n + 1))
        done
        [ $n = 0 ] && return 0
        sleep 0.05
    done
    return 1
}
# `gsrun status --json` of this test's only job: a field of its GPU 0
# ("daemon_pid", "pipe_dir", "server_pid"), or its rank PIDs ("pids"); the
# first that is set (under --mps-share=node the job's entry has no daemon
# of its own: the shared agent's entry has it).
status_field() { # status_field FIELD
    "$GSRUN" status --json 2>/dev/null | tr ',{}' '\n\n\n' |
        sed -n "s/^\"$1\":\"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p" | grep -v '^0\{0,1\}$' | head -1
}
# env by its path: in the Debian 13 suite (Open MPI 5) a 40-rank job's
# ranks once got a PATH cut after its first entries (not found: 127).
ENV=$(command -v env)
only() { [ -z "${WATCH_ONLY:-}" ] || [[ " $WATCH_ONLY " == *" $1 "* ]]; }
trap 'cleanup_other; [ -n "$SUID_DIR" ] && rm -rf "$SUID_DIR"' EXIT

# --- 1. the grace ends a job only while a faulted rank still runs ------------
if only 1; then
# 4 ranks over 2 GPUs (ranks 0-1 on GPU 0, 2-3 on GPU 1): rank 0 faults
# GPU 0's server once every rank is a client; MPS ends ranks 0 and 1's
# contexts.
# A: both exit 0 half a second after the fault (a program that ends on its
# error); ranks 2-3 on GPU 1 run on 4 s more: the job is not ended (before: ended
# at fault + grace, status 75, "while 3 ranks still ran").
job ga 2 --mps-fault-grace=2 -np 4 "$CT" --sleep 30000 --until "$TEST_TMP/end.ga" --fault-rank 0 \
    --fault-when "$TEST_TMP/go.a" --on-fault exit:500
wait_for "$OUT.ga" 'client=ok' 4 20 || diag "$OUT.ga" "$ERR.ga"
touch "$TEST_TMP/go.a"
wait_for "$OUT.ga" ' fault$' 2
sleep 4 # ranks 2-3 run on 4 s past the fault (2 s past the grace)
touch "$TEST_TMP/end.ga"
ended ga
check "1a. a faulted rank that exits 0 beside ranks on another GPU: the job ends $(rc_of ga) (0), not at the grace" \
    [ "$(rc_of ga)" = 0 ] || diag "$ERR.ga"
check "  ... its ranks 0-1 saw the fault ($(grep -c ' fault$' "$OUT.ga") of 2)" \
    [ "$(grep -c ' fault$' "$OUT.ga")" = 2 ] || diag "$OUT.ga"
check "  ... nothing said of running ranks ended: $(grep -o 'still ran.*\|ended them.*' "$ERR.ga" | head -1)" \
    eval "! grep -q 'still ran\|ended them' '$ERR.ga'"
check_clean "1a."
# B: rank 0 catches the error and sleeps on (holds its context), rank 1
# exits 0 after it, ranks 2-3 run on: ended at the grace, 75, rank 0 named.
job gb 2 --mps-fault-grace=2 -np 4 "$CT" --sleep 30000 --fault-rank 0 --fault-when "$TEST_TMP/go.b" \
    --on-fault exit:300 --on-fault-rank 0 hold
wait_for "$OUT.gb" 'client=ok' 4 20 || diag "$OUT.gb" "$ERR.gb"
touch "$TEST_TMP/go.b"
wait_for "$OUT.gb" ' fault$' 1
t0=$(now_ms)
ended gb 40
t=$(($(now_ms) - t0))
line=$(grep 'GPU fault' "$ERR.gb" | grep 'still r' | tail -1)
check "1b. a faulted rank that sleeps on: ended $t ms after the fault (2 s grace), status $(rc_of gb) (75)" \
    [ "$(rc_of gb)" = 75 -a $t -lt 15000 ] || diag "$ERR.gb"
check "  ... the line names rank 0 as still running, not rank 1 (exited): $line" \
    eval "grep -q '\brank 0 still r' <<<\"\$line\" && ! grep -q 'ranks [0-9,-]* still r' <<<\"\$line\""
check_clean "1b."
fi

# --- 2. fault lines forged into the job's server log --------------------------
# A process of the user's appends a fault's lines (runtime/gpu/mps_health.h)
# to the log of the server its job's ranks are clients of, naming
#   a. a live process that is no client (a sleep of the user's);
#   b. then, in the log now followed, the job's live, healthy clients;
#   c. the ranks' wrapper shells (sh -c 'prog; echo done'), which MPS never lists;
#   d. PID 1.
# None is a fault of the job: no server retired (its control daemon the
# same), no job told, the job ends 0, PID 1 never "a process of the user's"
# (before: a: retired and told; b: confirmed by the fresh daemon, which has
# no clients to contradict it; c: the shell mapped to its rank; d: retired).
forge() { # forge LOG SERVER PID...: the lines MPS writes for a fault that ended PID...
    local t p
    t=$(date '+%Y-%m-%d %H:%M:%S.000')
    {
        echo "[$t Server $2] Client {PID: $3, Context: 1} encountered a fatal GPU error."
        echo "[$t Server $2] Server is handling a fatal GPU error."
        echo "[$t Server $2] The following client process have a sticky error set:"
        for p in "${@:3}"; do echo "[$t Server $2] $p"; done
    } >>"$1"
}
log_now() { # the control.out of the server GPU 0's ranks are given now
    local pipe
    pipe=$(status_field pipe_dir)
    if [ -n "$pipe" ] && [ -f "$pipe.log/control.out" ]; then
        echo "$pipe.log/control.out"
    elif [ "$1" = node ]; then
        ls -t "$TMPDIR"/gsrun-*/mps-share/*/g0*.log/control.out 2>/dev/null | head -1
    else
        ls -t "$TMPDIR"/gsrun.*/*/g0*.log/control.out 2>/dev/null | head -1
    fi
}
if only 2; then
    sleep 60 &
    spid=$!
    for share in job node; do
        n=f$share
        job $n 1 --mps-share=$share -v -np 2 sh -c '"$0" "$@"; echo done' "$CT" --sleep 60000 \
            --until "$TEST_TMP/end.$n"
        wait_for "$OUT.$n" 'client=ok' 2 20 || diag "$OUT.$n" "$ERR.$n"
        for ((i = 0; i < 100; i++)); do # the shared server's daemon, once the job's status has it
            d0=$(status_field daemon_pid)
            [ "${d0:-0}" -gt 0 ] && break
            sleep 0.05
        done
        shells=$(status_field pids | sed 's/[0-9]*://g')
        clients=$(sed -n 's/^rank=[0-9]* pid=\([0-9]*\) .*client=ok.*/\1/p' "$OUT.$n" | tr '\n' ' ')
        for sub in a b c d; do
            case $sub in
            a) pids=$spid what="a live non-client (sleep, pid $spid)" ;;
            b) pids=$clients what="the job's healthy clients ($clients)" ;;
            c) pids=$shells what="the ranks' wrapper shells ($shells)" ;;
            d) pids=1 what="PID 1" ;;
            esac
            log=$(log_now $share)
            # shellcheck disable=SC2086
            [ -n "$log" ] && forge "$log" "$(status_field server_pid)" $pids
            # A fault is told at once; one not taken is said in the job's
            # report, at its end (-v): the agent has answered within 0.2 s.
            sleep 1.5
            dnow=$(status_field daemon_pid)
            "$GSRUN" status >"$OUT.st2$sub" 2>&1
            check "2$sub. ($share) a fault forged in $log naming $what: no server retired (control daemon $dnow, was $d0)" \
                eval '[ -n "$log" ] && [ "${d0:-0}" -gt 0 ] && [ "$dnow" = "$d0" ] && ! grep -q "faulted server retired\|is retired" "$ERR.$n" && ! grep -q FAULT "$OUT.st2$sub"' ||
                diag "$ERR.$n" "$OUT.st2$sub"
            check "  ... and no job told of a fault: $(grep -o 'hit a fatal GPU fault.*' "$ERR.$n" | tail -1)" \
                eval '! grep -q "hit a fatal GPU fault" "$ERR.$n"'
        done
        touch "$TEST_TMP/end.$n"
        ended $n
        check "2. ($share) the job ends $(rc_of $n) (0), each rank's shell said done ($(grep -c '^done' "$OUT.$n") of 2)" \
            [ "$(rc_of $n)" = 0 -a "$(grep -c '^done' "$OUT.$n")" = 2 ] || diag "$ERR.$n"
        check "  ... PID 1 never named a process of the user's: $(grep -o "a process of the user.s ([^)]*pid 1)" "$ERR.$n" "$OUT".st2* | head -1)" \
            eval "! grep -q \"a process of the user.s ([^)]*pid 1)\" '$ERR.$n' '$OUT'.st2*"
        [ $share = job ] && check "  ... (-v) each forged fault said not taken as a fault ($(grep -c 'not taken as a fault' "$ERR.$n") of 4)" \
            [ "$(grep -c 'not taken as a fault' "$ERR.$n")" = 4 ]
        share_gone
        check_clean "2. ($share)"
    done
    kill $spid
    wait $spid 2>/dev/null
fi

# --- 3. NVML's listings read whole ---------------------------------------------
# 40 ranks whose wrapper drops the pipe var, on one GPU, their contexts
# made together: 40 contexts in the compute listing, more than gsrun asked room for at first (NVML then fills
# nothing: tests/fake). Each rank told, the summary counts 40 (before: the
# array NVML did not fill was read; none told).
told_plain() { grep -c 'ran on GPU 0 without MPS' "$ERR.$1"; }
diag_rest() { grep -v 'ran on GPU 0 without MPS: its program was started without' "$1" | diag; } # not 40 of them
if only 3; then
    for share in job node; do
        n=n$share
        job $n 1 --mps-share=$share -v -np 40 "$ENV" -u CUDA_MPS_PIPE_DIRECTORY "$CT" --sleep 30000 \
            --until "$TEST_TMP/end.$n" --start-when "$TEST_TMP/go.$n"
        # Their contexts made at once, all 40 there before the agent looks.
        wait_for "$OUT.$n" ' start$' 40 20 || diag "$ERR.$n"
        touch "$TEST_TMP/go.$n"
        release_when $n "$ERR.$n" 'ran on GPU 0 without MPS' 40 12
        ended $n 60
        check "3. ($share) 40 ranks without MPS on one GPU: each told ($(told_plain $n) of 40), the job ends $(rc_of $n)" \
            [ "$(told_plain $n)" = 40 -a "$(rc_of $n)" = 0 ] || diag_rest "$ERR.$n"
        check "  ... the summary: $(grep -o 'served [^:]*\|no rank of the [0-9]* used the GPU' "$ERR.$n" | head -1)" \
            grep -q 'served 0 of 40 ranks as MPS clients; 40 ran on the GPU without MPS' "$ERR.$n"
        check "  ... the GPUs' answer read: $(grep -o 'could not tell the GPUs.*' "$ERR.$n" | head -1)" \
            eval "! grep -q 'could not tell the GPUs' '$ERR.$n'"
        share_gone
        check_clean "3. ($share)"
    done
    # Another user's 40 plain contexts on the GPU beside the user's 2 ranks
    # without MPS (before: the user's ranks were past the first 32 listed).
    if [ $ROOT = yes ]; then
        for ((i = 0; i < 40; i++)); do
            as_other 60
            echo "0 plain" >"$FAKE_NVML_CTX_DIR/$!"
        done
        job o 1 -v -np 2 "$ENV" -u CUDA_MPS_PIPE_DIRECTORY "$CT" --sleep 30000 --until "$TEST_TMP/end.o"
        release_when o "$ERR.o" 'ran on GPU 0 without MPS' 2 12
        ended o
        check "3. another user's 40 plain contexts on the GPU: the user's 2 ranks without MPS told ($(told_plain o) of 2)" \
            [ "$(told_plain o)" = 2 ] || diag "$ERR.o"
        check "  ... the summary: $(grep -o 'served [^:]*\|no rank of the [0-9]* used the GPU' "$ERR.o" | head -1)" \
            grep -q 'served 0 of 2 ranks as MPS clients; 2 ran on the GPU without MPS' "$ERR.o"
        cleanup_other
        check_clean "3. another user's contexts"
    else
        skip "3. another user's 40 plain contexts on the GPU"
    fi
fi

# --- 4. PID reuse ----------------------------------------------------------------
# Rank 0 exits at once; its PID is then taken by another user's process
# holding a plain context (ns_last_pid set to the PID before it, as root).
# Ranks 1-2 are clients; rank 3 starts CUDA without a context (so the agent
# keeps asking NVML). Rank 0 is nobody now: nothing is told of it, nor
# counted (before: "rank 0 ... without MPS: it runs as uid 4242").
if only 4 && ns_last_pid_ok; then
    export FAKE_NVML_PROCS_LOG=$TEST_TMP/listings
    job r 1 -v -np 4 "$CT" --sleep 30000 --until "$TEST_TMP/end.r" --quit-rank 0 --bare-rank 3
    wait_for "$OUT.r" '^rank=0 pid=[0-9]* quit' 1 20 || diag "$OUT.r" "$ERR.r"
    p0=$(pid_of_rank r 0)
    for ((i = 0; i < 100; i++)); do # gone and reaped
        [ -n "$p0" ] && [ ! -e "/proc/$p0" ] && break
        sleep 0.02
    done
    q=""
    for ((i = 0; i < 300 && ${p0:-0} > 1; i++)); do
        echo $((p0 - 1)) >/proc/sys/kernel/ns_last_pid 2>/dev/null || break
        as_other 30
        q=$!
        [ "$q" = "$p0" ] && break
        kill -9 "$q" 2>/dev/null
    done
    [ "$q" = "$p0" ] && echo "0 plain" >"$FAKE_NVML_CTX_DIR/$q"
    # The ranks end after 2 of NVML's listings since (rank 3, CUDA without a
    # context, keeps the agent asking), 15 s at most.
    release_when r "$FAKE_NVML_PROCS_LOG" . $(($(wc -l 2>/dev/null <"$FAKE_NVML_PROCS_LOG" || echo 0) + 2)) 15
    unset FAKE_NVML_PROCS_LOG
    check "4. rank 0's PID ($p0) reused by uid $OTHER's process holding a plain context (pid $q, try $((i + 1)))" \
        [ -n "$p0" -a "$q" = "$p0" ]
    ended r
    check "  ... nothing told of rank 0: $(grep -o 'rank 0 (.*' "$ERR.r" | head -1)" \
        eval "! grep -q 'rank 0 (.*without MPS\|runs as uid $OTHER' '$ERR.r'" || diag "$ERR.r"
    check "  ... nor counted: $(grep -o 'served [^:]*' "$ERR.r")" \
        eval "grep -q 'served 2 of 4 ranks as MPS clients' '$ERR.r' && ! grep 'served [0-9]' '$ERR.r' | grep -q 'without MPS'"
    check "  ... the job ends $(rc_of r) (0)" [ "$(rc_of r)" = 0 ]
    cleanup_other
    check_clean "4."
elif only 4 && [ $ROOT = yes ]; then
    skip "4. an exited rank's PID reused by another user" "/proc/sys/kernel/ns_last_pid cannot be written here"
elif only 4; then
    skip "4. an exited rank's PID reused by another user"
fi

# --- 5. forged client lines ------------------------------------------------------
# The ranks wait before CUDA starts until a process of the user's has
# appended client lines for them to their server's log.
#   a. two ranks without MPS, "Status of client {PID: P, Context ID: 1} is
#      ACTIVE" for each: still told without MPS (before: served 2 of 2);
#   b. two healthy clients, "Client requested 1 which is not a valid GPU
#      ID" for each: served 2 of 2 (before: told "found no device").
if only 5; then
    job sa 1 -v -np 2 "$ENV" -u CUDA_MPS_PIPE_DIRECTORY "$CT" --sleep 30000 --until "$TEST_TMP/end.sa" \
        --start-when "$TEST_TMP/go.sa"
    wait_for "$OUT.sa" ' start$' 2 20 || diag "$OUT.sa" "$ERR.sa"
    log=$(log_now job)
    t=$(date '+%Y-%m-%d %H:%M:%S.000')
    for r in 0 1; do
        echo "[$t Server $(status_field server_pid)] Status of client {PID: $(pid_of_rank sa $r), Context ID: 1} is ACTIVE"
    done >>"$log"
    touch "$TEST_TMP/go.sa"
    release_when sa "$ERR.sa" 'ran on GPU 0 without MPS' 2 12
    ended sa
    check "5a. forged ACTIVE lines for 2 ranks without MPS ($log): both told ($(told_plain sa) of 2)" \
        [ -n "$log" -a "$(told_plain sa)" = 2 ] || diag "$ERR.sa"
    check "  ... the summary: $(grep -o 'served [^:]*' "$ERR.sa")" \
        grep -q 'served 0 of 2 ranks as MPS clients; 2 ran on the GPU without MPS' "$ERR.sa"
    check_clean "5a."
    job sb 1 -v -np 2 "$CT" --sleep 5000 --start-when "$TEST_TMP/go.sb"
    wait_for "$OUT.sb" ' start$' 2 20 || diag "$OUT.sb" "$ERR.sb"
    log=$(log_now job)
    t=$(date '+%Y-%m-%d %H:%M:%S.000')
    for r in 0 1; do
        echo "[$t Client $(pid_of_rank sb $r)] Client requested 1 which is not a valid GPU ID in the MPS visible set of devices"
    done >>"$log"
    touch "$TEST_TMP/go.sb"
    ended sb
    check "5b. forged 'not a valid GPU ID' lines for 2 healthy clients ($log): $(grep -o 'served [^:]*' "$ERR.sb")" \
        eval "[ -n '$log' ] && grep -q 'served 2 of 2 ranks as MPS clients' '$ERR.sb'" || diag "$ERR.sb"
    check "  ... no rank told it found no device ($(grep -c 'found no device' "$ERR.sb"))" \
        eval "! grep -q 'found no device' '$ERR.sb'"
    check_clean "5b."
fi

# --- 6. mixed workers --------------------------------------------------------------
# A rank forks 4 workers: 2 MPS clients, 2 contexts without MPS (before:
# "served", the 2 without MPS never told).
if only 6; then
    job m 1 --mps=on -v -np 1 "$CT" --workers-mixed --sleep 30000 --until "$TEST_TMP/end.m"
    release_when m "$ERR.m" 'without MPS' 1 12
    ended m
    check "6. a rank whose 4 workers hold 2 contexts without MPS: $(grep -o 'rank 0 (.*without MPS' "$ERR.m" | head -1)" \
        grep -q '2 of its 4 GPU contexts ran on GPU 0 without MPS' "$ERR.m" || diag "$OUT.m" "$ERR.m"
    check "  ... counted without MPS: $(grep -o 'served [^:]*' "$ERR.m")" \
        grep -q 'served 0 of 1 ranks as MPS clients; 1 ran on the GPU without MPS' "$ERR.m"
    check "  ... the job ends $(rc_of m) (0)" [ "$(rc_of m)" = 0 ]
    check_clean "6."
fi

# --- 7. the causes ------------------------------------------------------------------
# a. The program runs with an environment of about 2 MB whose
#    CUDA_MPS_PIPE_DIRECTORY=/some/other/dir comes after 1.9 MB of other
#    variables (before: only the first 64 KiB was read: "started without").
# b. A set-uid program (a copy owned by uid 4242, mode 4755): real uid the
#    user's, effective 4242 (before: "why is unknown").
if only 7; then
    job e 1 --mps=on -v -np 1 "$CT" --big-env /some/other/dir --sleep 30000 --until "$TEST_TMP/end.e"
    release_when e "$ERR.e" 'without MPS' 1 12
    ended e
    size=$(sed -n 's/^rank=0 .* bigenv=\([0-9]*\) .*/\1/p' "$OUT.e")
    check "7a. the pipe var past ${size:-?} bytes of environment: $(grep -o 'without MPS: .*' "$ERR.e" | cut -c1-110)" \
        eval "[ ${size:-0} -gt 1000000 ] && grep -q 'started with CUDA_MPS_PIPE_DIRECTORY=/some/other/dir, not the' '$ERR.e' && ! grep -q 'started without' '$ERR.e'" ||
        diag "$OUT.e" "$ERR.e"
    check_clean "7a."
    if [ $ROOT = yes ]; then
        SUID_DIR=$(mktemp -d /tmp/gswh.XXXXXX)
        chmod 755 "$SUID_DIR"
        mkdir -p "$SUID_DIR/progs" "$SUID_DIR/fake/cuda" "$SUID_DIR/ctx"
        chmod 1777 "$SUID_DIR/ctx"
        cp "$CT" "$SUID_DIR/progs/ct_client"
        cp "$B/tests/fake/cuda/libcuda.so.1" "$SUID_DIR/fake/cuda/"
        chown $OTHER:$OTHER "$SUID_DIR/progs/ct_client"
        chmod 4755 "$SUID_DIR/progs/ct_client"
        (
            export FAKE_NVML_CTX_DIR=$SUID_DIR/ctx
            job u 1 --mps=on -v -np 1 "$SUID_DIR/progs/ct_client" --sleep 30000 --until "$SUID_DIR/end"
        )
        wait_for "$ERR.u" 'without MPS' 1 12
        touch "$SUID_DIR/end"
        ended u
        check "7b. a set-uid program (effective uid $OTHER): $(grep -o 'without MPS: .*' "$ERR.u" | cut -c1-110)" \
            grep -q "runs as uid $OTHER" "$ERR.u" || diag "$OUT.u" "$ERR.u"
        check_clean "7b."
        rm -rf "$SUID_DIR"
        SUID_DIR=""
    else
        skip "7b. a set-uid program"
    fi
fi

finish
