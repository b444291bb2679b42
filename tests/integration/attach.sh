#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/job/attach.c, runtime/job/agent_watch.c, runtime/gpu/mps_health.c, runtime/agent/report.c, runtime/files/status_format.c
# Every rank's MPS state known, told and shown (issue 57), with the fake MPS
# and NVML: a rank of the fakes' is an MPS client only when it reaches its
# server's pipe dir (the fake daemon then prints the real server's lines),
# else a context without MPS (the fake NVML lists it in its compute listing
# only), and a CUDA_VISIBLE_DEVICES that names no device of its server is
# refused with the real client's log line (tests/progs/rank_report,
# tests/fake). Each case must be told while the job runs, not at its end:
#   1. a wrapper that removes CUDA_MPS_PIPE_DIRECTORY (own and shared servers)
#   2. a wrapper that sets CUDA_VISIBLE_DEVICES per rank (2 GPUs)
#   3. a program without CUDA
#   4. a GPU fault in an MPI job whose ranks then hang: told at once, the
#      job ended after --mps-fault-grace with status 75 and its last line
#   5. a plain job: every rank a client (status and summary)
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

export FAKE_NVML_CTX_DIR=$TEST_TMP/ctx
mkdir -p "$FAKE_NVML_CTX_DIR"

job() { bg_job "$@"; } # job NAME NGPUS args... (lib.sh)
running() { [ ! -s "$OUT.$1.rc" ]; } # the job has not ended yet

# --- 1. the pipe dir removed by a wrapper ------------------------------------
for share in job node; do
    job p$share 1 --mps-share=$share -v -np 4 env -u CUDA_MPS_PIPE_DIRECTORY "$PROG" --mps-client --sleep 6000
    wait_for "$ERR.p$share" 'ran on GPU 0 without MPS' 4
    alive=$(running p$share && echo yes || echo no)
    check "1. ($share) a wrapper removed the pipe dir: each of the 4 ranks told while the job runs ($alive): $(grep -c 'without MPS' "$ERR.p$share")" \
        [ "$(grep -c 'ran on GPU 0 without MPS' "$ERR.p$share")" = 4 -a $alive = yes ] || diag "$ERR.p$share"
    check "  ... with the cause: $(grep -m1 -o 'without MPS: .*' "$ERR.p$share")" \
        grep -q "without MPS: its program was started without CUDA_MPS_PIPE_DIRECTORY (gsrun set " "$ERR.p$share"
    wait_status "$OUT.st" "MPS clients 0/4"
    check "  ... gsrun status: $(grep -o 'MPS clients.*' "$OUT.st" | head -1)" \
        grep -q "MPS clients 0/4 0:no-mps 1:no-mps 2:no-mps 3:no-mps" "$OUT.st" || diag "$OUT.st"
    "$GSRUN" status --json >"$OUT.json" 2>&1
    check "  ... and its JSON" grep -q '"clients":"0/4 0:no-mps' "$OUT.json" || diag "$OUT.json"
    wait_for "$OUT.p$share.rc" . 1
    check "  ... the summary serves none of them: $(grep -o 'served [^:]*' "$ERR.p$share")" \
        grep -q "served 0 of 4 ranks as MPS clients; 4 ran on the GPU without MPS (ranks 0-3)" "$ERR.p$share"
    check "  ... each told once, the job's status its own ($(cat "$OUT.p$share.rc"))" \
        [ "$(grep -c 'without MPS: its' "$ERR.p$share")" = 4 -a "$(cat "$OUT.p$share.rc")" = 0 ]
    check_clean "1. ($share)"
done

# --- 2. a per-rank GPU wrapper ------------------------------------------------
# A site's affinity script: device (local rank % 2). Under MPS each rank sees
# one device, 0: ranks 1 and 3 find none and fail as CUDA does (100).
job w 2 -np 4 sh -c 'CUDA_VISIBLE_DEVICES=$((OMPI_COMM_WORLD_LOCAL_RANK % 2)) exec "$0" "$@"' \
    "$PROG" --mps-client --sleep 3000
wait_for "$OUT.w.rc" . 1 20
check "2. a per-rank CUDA_VISIBLE_DEVICES wrapper: 2 ranks told they found no device ($(grep -c 'found no device' "$ERR.w"))" \
    [ "$(grep -c 'its CUDA found no device' "$ERR.w")" = 2 ] || diag "$ERR.w"
check "  ... ranks 1 and 3, with the cause and what to do" \
    eval "grep -q 'rank 1 (.*its CUDA found no device: .*device 0' '$ERR.w' && grep -q 'rank 3 (.*its CUDA found no device' '$ERR.w'"
check "  ... the job failed as its program did (status $(cat "$OUT.w.rc"), not 0)" [ "$(cat "$OUT.w.rc")" != 0 ]
check_clean "2."

# --- 3. a program without CUDA ------------------------------------------------
gsrun_fake 1 -v -np 4 "$PROG" --sleep 1500 >"$OUT.c" 2>"$ERR.c"
rc=$?
check "3. a program without CUDA: said once (-v) that no rank used the GPU, not 'served' ($(grep -c 'used the GPU' "$ERR.c"))" \
    eval "[ $rc = 0 -a \"\$(grep -c 'no rank of the 4 used the GPU' '$ERR.c')\" = 1 ] && ! grep -q 'served [0-9]' '$ERR.c'" ||
    diag "$ERR.c"
check_clean "3."

# --- 4. a GPU fault while the job runs ----------------------------------------
# Rank 1 faults the server (every rank's context ends) and the ranks then
# sleep 20 s outside MPI, as a rank stuck after its error: the fault is told
# at once, and the job ends 2 s later (--mps-fault-grace=2) with status 75.
t0=$(date +%s%N)
job f 1 --mps-fault-grace=2 -np 2 "$PROG" --mps-fault 1 --sleep 20000
wait_for "$ERR.f" 'hit a fatal GPU fault' 1
t_told=$((($(date +%s%N) - t0) / 1000000))
wait_for "$OUT.f.rc" . 1 25
t_end=$((($(date +%s%N) - t0) / 1000000))
check "4. a fault in a hanging job: told while it ran ($t_told ms after the start), once ($(grep -c 'hit a fatal GPU fault' "$ERR.f"))" \
    [ "$(grep -c 'hit a fatal GPU fault' "$ERR.f")" = 1 -a $t_told -lt 6000 ] || diag "$ERR.f"
check "  ... ended after the grace ($t_end ms after the start, not 20 s): status $(cat "$OUT.f.rc") (75)" \
    [ "$(cat "$OUT.f.rc")" = 75 -a $t_end -lt 12000 ] || diag "$ERR.f"
check "  ... its last lines say why: $(tail -1 "$ERR.f")" \
    eval "tail -2 '$ERR.f' | grep -q 'the job still ran 2 s after a GPU fault ended the MPS context of ranks 0-1' && tail -1 '$ERR.f' | grep -q 'exit status 75'"
check_clean "4."
# The same with the grace off: the job runs to its own end, which rank 0
# marks by exiting 3 after its sleep (--exit 0 3): status 3 is the ranks'
# own end; a job gsrun ended would give 75 (or a signal's status).
gsrun_fake 1 --mps-fault-grace=0 -np 2 "$PROG" --mps-fault 1 --sleep 1500 --exit 0 3 >"$OUT.g" 2>"$ERR.g"
rc=$?
check "  ... --mps-fault-grace=0: told once, and no end by gsrun said" \
    eval "[ \"\$(grep -c 'hit a fatal GPU fault' '$ERR.g')\" = 1 ] && ! grep -q 'still ran\|exit status 75' '$ERR.g'" ||
    diag "$ERR.g"
check "  ... the job runs to its end: status $rc (3: rank 0's own exit after its sleep)" [ "$rc" = 3 ] || diag "$ERR.g"
check_clean "4. grace 0"

# --- 5. a plain job: every rank a client ---------------------------------------
job ok 1 -v -np 4 "$PROG" --mps-client --sleep 2000
wait_status "$OUT.st5" "MPS clients 4/4"
check "5. every rank an MPS client: gsrun status $(grep -o 'MPS clients [^ ]*' "$OUT.st5" | head -1)" \
    grep -qE "MPS clients 4/4(;|$)" "$OUT.st5" || diag "$OUT.st5"
wait_for "$OUT.ok.rc" . 1
check "  ... summary: $(grep -o 'served [^;]*' "$ERR.ok"), nothing told" \
    eval "grep -q 'served 4 of 4 ranks as MPS clients; stopping MPS' '$ERR.ok' && ! grep -q 'without MPS\|no device' '$ERR.ok'" ||
    diag "$ERR.ok"
check_clean "5."
finish
