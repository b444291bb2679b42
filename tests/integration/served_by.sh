#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/job/agent_watch.c, runtime/job/agent_watch_end.c, runtime/job/attach.c, runtime/agent/agent_publish.c, runtime/agent/report.c, runtime/files/status_end.c, launcher/reports.c, runtime/gpu/mps.c
# "Served" means by gsrun's own server, and the job's last words are true
# (issue 66, items 4 and 5), with the fakes (tests/fake) and
# tests/progs/ct_client:
#   1. ranks whose wrapper exports the pipe dir of a second, hand-started
#      control daemon: NVML lists their contexts as MPS clients, gsrun's
#      daemon does not; each told during the job (the pipe dir its program
#      saw, the one gsrun gave), `gsrun status` and its JSON show them as
#      other, the summary says "served 0 of 4" and counts them apart
#      (--mps-share=job and node; before: "served 4 of 4")
#   2. ranks that exit 127 before any CUDA (a missing library): the summary
#      says they exited before using the GPU, with the job's status, and
#      gives no --mps=off advice (before: "a program without CUDA runs as
#      well with --mps=off")
#   3. ranks without CUDA that end 0: the advice still comes (mpirun's
#      status known); through `gsrun exec` (status unknown) only for a job
#      that ended well
#   4. a healthy job: served 4 of 4, nothing else counted; the shared
#      server's line names its PIDs, never "starting" at the job's end
# SERVED_ONLY="1 3" runs only the cases named.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

CT=$B/tests/progs/ct_client
ENV=$(command -v env)
export FAKE_NVML_CTX_DIR=$TEST_TMP/ctx
mkdir -p "$FAKE_NVML_CTX_DIR"
HAND=$TEST_TMP/hand # the hand-started daemon's dirs: outside TMPDIR, not gsrun's

job() { bg_job "$@"; } # job NAME NGPUS args... (lib.sh)
ended() { wait_for "$OUT.$1.rc" . 1 "${2:-30}"; } # ended NAME [SECONDS]
rc_of() { cat "$OUT.$1.rc" 2>/dev/null || echo none; }
summary() { grep -o 'served [^:]*\|no rank of the [0-9]* used the GPU.*' "$ERR.$1" | head -1; }
# The shared agents of this test's jobs gone (--mps-share=node, linger 0).
share_gone() {
    local p i
    for ((i = 0; i < 100; i++)); do
        local n=0
        for p in $(pgrep -x gsrun-share); do
            tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "GS_TEST_MARK=$TEST_TMP" && n=$((n + 1))
        done
        [ $n = 0 ] && return 0
        sleep 0.05
    done
    return 1
}
hand_ctl() { CUDA_MPS_PIPE_DIRECTORY=$HAND/pipe "$FAKE_CONTROL" "$@"; }
hand_quit() {
    [ -S "$HAND/pipe/control" ] && echo quit | hand_ctl >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do
        [ -S "$HAND/pipe/control" ] || break
        sleep 0.05
    done
}
only() { [ -z "${SERVED_ONLY:-}" ] || [[ " $SERVED_ONLY " == *" $1 "* ]]; }
trap 'hand_quit' EXIT

# --- 1. clients of a server gsrun did not give them ----------------------------
if only 1; then
    mkdir -p "$HAND/pipe" "$HAND/log"
    # Not marked as the jobs' (check_clean would take it for their
    # leftover): quit at the case's end, and by the trap.
    env -u GS_TEST_MARK CUDA_MPS_PIPE_DIRECTORY="$HAND/pipe" CUDA_MPS_LOG_DIRECTORY="$HAND/log" \
        "$FAKE_CONTROL" -d
    for ((i = 0; i < 100; i++)); do
        [ -S "$HAND/pipe/control" ] && break
        sleep 0.05
    done
    for share in job node; do
        n=o$share
        job $n 1 --mps-share=$share -v -np 4 "$ENV" CUDA_MPS_PIPE_DIRECTORY="$HAND/pipe" "$CT" \
            --sleep 30000 --until "$TEST_TMP/end.$n"
        told='is an MPS client of a server gsrun did not give it'
        wait_for "$ERR.$n" "$told" 4 15
        ntold=$(grep -c "$told" "$ERR.$n")
        "$GSRUN" status >"$OUT.st.$n" 2>&1
        "$GSRUN" status --json >"$OUT.js.$n" 2>&1
        touch "$TEST_TMP/end.$n"
        ended $n
        clients=$(grep -c "client=ok" "$OUT.$n")
        check "1. ($share) 4 ranks, clients ($clients of 4) of a hand-started daemon: each told during the job ($ntold of 4)" \
            [ "$clients" = 4 -a "$ntold" = 4 ] || diag "$OUT.$n" "$ERR.$n"
        gpipe=$(sed -n 's/.*not the \([^ ]*\) gsrun gave it.*/\1/p' "$ERR.$n" | head -1)
        check "  ... naming the pipe dir its program saw and gsrun's ($gpipe)" \
            eval "grep -q 'its program saw CUDA_MPS_PIPE_DIRECTORY=$HAND/pipe (a wrapper.s or a hand-started daemon.s), not the /[^ ]* gsrun gave it' '$ERR.$n' && [ -n '$gpipe' ] && [ '$gpipe' != '$HAND/pipe' ]"
        check "  ... the summary: $(summary $n)" \
            grep -q 'served 0 of 4 ranks as MPS clients; 4 were MPS clients of a server gsrun did not give them (ranks 0-3); ' "$ERR.$n"
        check "  ... gsrun status: $(grep -o 'MPS clients [^,]*' "$OUT.st.$n" | head -1)" \
            grep -q 'MPS clients 0/4 0:other 1:other 2:other 3:other' "$OUT.st.$n" || diag "$OUT.st.$n"
        check "  ... its JSON: $(grep -o '"clients":"[^"]*"' "$OUT.js.$n" | head -1)" \
            grep -q '"clients":"0/4 0:other 1:other 2:other 3:other"' "$OUT.js.$n"
        check "  ... the job ends $(rc_of $n) (0)" [ "$(rc_of $n)" = 0 ]
        share_gone
        check_clean "1. ($share)"
    done
    hand_quit
    check "1. the hand-started daemon quit" [ ! -S "$HAND/pipe/control" ]
fi

# --- 2. ranks that exit 127 before any CUDA ---------------------------------------
if only 2; then
    gsrun_fake 1 -v -np 4 sh -c 'echo "app: error while loading shared libraries: libmissing.so.1" >&2; exit 127' \
        >"$OUT.x" 2>"$ERR.x"
    rc=$?
    check "2. ranks that exit 127 before CUDA: gsrun exits $rc (127)" [ $rc = 127 ] || diag "$ERR.x"
    check "  ... the summary: $(summary x)" \
        grep -q 'no rank of the [0-9] used the GPU (MPS saw no client, NVML no context of theirs): CUDA never started in ranks\{0,1\} [0-9,-]*: \(they\|it\) exited before using the GPU (the job ended with status 127: see its output); stopping MPS' "$ERR.x"
    check "  ... no --mps=off advice: $(grep -o '[^(]*--mps=off[^)]*' "$ERR.x" | head -1)" \
        eval "! grep -q 'mps=off' '$ERR.x'"
    check_clean "2."
fi

# --- 3. ranks without CUDA that end 0 ----------------------------------------------
if only 3; then
    gsrun_fake 1 -v -np 4 true >"$OUT.t" 2>"$ERR.t"
    rc=$?
    check "3. ranks without CUDA that end 0 (status $rc): $(summary t)" \
        grep -q 'no rank of the 4 used the GPU (MPS saw no client, NVML no context of theirs): CUDA never started in ranks 0-3: they exited before using the GPU (the job ended with status 0: a program without CUDA runs as well with --mps=off); stopping MPS' "$ERR.t"
    # Through the rank prefix, as a launcher gsrun does not start: the
    # agent tells rank 0's stderr, and does not know the job's status.
    env GSRUN_LOCAL_RANK=0 GSRUN_LOCAL_SIZE=1 GSRUN_JOB_KEY=served-exec GSRUN_VERBOSE=1 GSRUN_MPS=on \
        LD_LIBRARY_PATH="$FAKE_LIB" FAKE_NVML_GPUS=1 GSRUN_MPS_CONTROL="$FAKE_CONTROL" \
        "$GSRUN" exec -- true >"$OUT.e" 2>"$ERR.e"
    wait_for "$ERR.e" 'stopping MPS' 1 10 # the agent's lines come after the rank's end
    check "  ... through gsrun exec (status unknown): $(summary e)" \
        grep -q 'no rank of the 1 used the GPU (MPS saw no client, NVML no context of theirs): CUDA never started in rank 0: it exited before using the GPU (if the job ended well, a program without CUDA runs as well with --mps=off)' "$ERR.e" ||
        diag "$ERR.e"
    check "  ... no mark left unfilled" eval "! grep -q '{job-status' '$ERR.t' '$ERR.e'"
    check_clean "3."
fi

# --- 4. a healthy job ----------------------------------------------------------------
if only 4; then
    for share in job node; do
        n=h$share
        gsrun_fake 1 --mps-share=$share -v -np 4 "$CT" --sleep 1500 >"$OUT.$n" 2>"$ERR.$n"
        rc=$?
        check "4. ($share) a healthy job (status $rc): $(summary $n)" \
            eval "[ $rc = 0 ] && grep -q 'served 4 of 4 ranks as MPS clients; \(stopping\|leaving\)' '$ERR.$n'" ||
            diag "$ERR.$n"
        check "  ... nothing told: $(grep -c 'gsrun: node [^:]*: rank' "$ERR.$n")" \
            eval "! grep -q 'gsrun: node [^:]*: rank' '$ERR.$n'"
        check "  ... its GPU's line never says starting: $(grep -o 'MPS server [0-9]* ([^)]*)' "$ERR.$n" | head -1)" \
            eval "! grep -q 'starting)' '$ERR.$n'"
        share_gone
        check_clean "4. ($share)"
    done
fi

finish
