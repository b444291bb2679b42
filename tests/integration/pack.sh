#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/plan/pack.c, runtime/files/ledger.c, runtime/gpu/usage.c, runtime/job/agent_pack.c
# A user's concurrent jobs on a node of 2, 4 and 8 GPUs (fake NVML) go where
# the node has room (issue 44): one a GPU before any GPU gets a second,
# uneven jobs balanced, a GPU busy with another process taken last, the
# scheduler's CUDA_VISIBLE_DEVICES kept, a killed job's ranks no longer
# counted, 20 jobs started within a second balanced, `gsrun status` by GPU.
# Jobs run with the default share (auto: the user's shared servers).
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
unset GSRUN_MPS_SHARE
REC=$TEST_TMP/record
ME=$(id -u)
PLACE=$TMPDIR/gsrun-$ME/place

rcs() { cat "$@" | tr -d '\n'; }
starts() { grep -c '^start ' "$REC" 2>/dev/null || echo 0; }
# Waits until NAME's job has its entry in the placement record and its
# rank has said where it runs.
placed() { # placed NAME
    for _ in $(seq 200); do
        ls "$PLACE"/*/ 2>/dev/null | grep -q -- "-pack-$1\." && grep -q uuid= "$OUT.$1" 2>/dev/null &&
            return 0
        sleep 0.025
    done
    return 1
}
# gsrun status (on the fake NVML of N GPUs) into FILE until PATTERN shows.
status_until() { # status_until N FILE PATTERN
    for _ in $(seq 100); do
        LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=$1 "$GSRUN" status >"$2" 2>&1
        grep -q "$3" "$2" && return 0
        sleep 0.05
    done
    return 1
}
settle() { # the shared MPS ends just after the last job
    for _ in $(seq 100); do
        [ -z "$(leftover_procs)" ] && break
        sleep 0.05
    done
}

# Concurrent one-rank jobs through gsrun (mpirun): one a GPU.
for g in 2 4; do
    rm -f "$REC"
    for i in $(seq "$g"); do
        (FAKE_MPS_RECORD=$REC gsrun_fake "$g" -v -np 1 "$PROG" --sleep 3000 >"$OUT.g$i" 2>"$ERR.g$i"
            echo $? >"$OUT.g$i.rc") &
        sleep 0.1
    done
    wait
    want=$(printf '1 %.0s' $(seq "$g") | sed 's/ $//')
    got=$(per_gpu "$g" $(seq -f "$OUT.g%g" "$g"))
    check "$g one-rank gsrun jobs at once on $g GPUs: one a GPU ($got)" \
        [ "$got" = "$want" -a "$(rcs $(seq -f "$OUT.g%g.rc" "$g"))" = "$(printf '0%.0s' $(seq "$g"))" ] ||
        diag $(seq -f "$ERR.g%g" "$g")
    check "  ... every rank an MPS client of the user's shared server on its GPU (the default)" \
        [ "$(cat $(seq -f "$OUT.g%g" "$g") | grep -c "mps=1 pipe=$TMPDIR/gsrun-$ME/mps-share/")" -eq "$g" ]
    check "  ... one control daemon a GPU" [ "$(starts)" -eq "$g" ] || diag "$REC"
    check "  ... -v: the later jobs say where they went and why" \
        [ "$(cat $(seq -f "$ERR.g%g" "$g") | grep -c "placed beside [0-9]* other jobs\? of the user")" -ge 1 ]
    settle
    check_clean "$g one-rank jobs"
done

# 8 GPUs: 8 jobs one a GPU, then 8 more: two a GPU.
rm -f "$REC"
for i in $(seq 8); do light "e$i" 8 4; done
for i in $(seq 8); do placed "e$i"; done
got=$(per_gpu 8 $(seq -f "$OUT.e%g" 8))
check "8 one-rank jobs on 8 GPUs: one a GPU ($got)" [ "$got" = "1 1 1 1 1 1 1 1" ]
for i in $(seq 9 16); do light "e$i" 8 2; done
wait
got=$(per_gpu 8 $(seq -f "$OUT.e%g" 16))
check "  ... 8 more beside them: two a GPU ($got)" [ "$got" = "2 2 2 2 2 2 2 2" ]
check "  ... all 16 end with status 0" [ "$(rcs $(seq -f "$OUT.e%g.rc" 16))" = "$(printf '0%.0s' $(seq 16))" ]
settle
check_clean "16 jobs on 8 GPUs"

# Uneven jobs: 4 jobs of 3 ranks on 4 GPUs end with counts within one.
rm -f "$REC"
for i in 1 2 3 4; do
    (FAKE_MPS_RECORD=$REC gsrun_fake 4 -np 3 "$PROG" --sleep 4000 >"$OUT.u$i" 2>"$ERR.u$i"
        echo $? >"$OUT.u$i.rc") &
    sleep 0.2
done
wait
got=$(per_gpu 4 "$OUT".u[1-4])
check "4 jobs of 3 ranks on 4 GPUs: 3 ranks a GPU ($got)" [ "$got" = "3 3 3 3" ] || diag "$OUT".u[1-4]
check "  ... all end with status 0" [ "$(rcs "$OUT".u[1-4].rc)" = 0000 ]
settle
check_clean "uneven jobs"

# A GPU busy with a process that is not the user's gsrun job (PID 1 on GPU 0,
# as NVML lists it) gets the next job's rank last.
rm -f "$REC"
for i in 1 2 3; do light "f$i" 4 3 FAKE_NVML_PROCS=0:1; placed "f$i"; done
got=$(per_gpu 4 "$OUT".f[1-3])
check "GPU 0 busy with another process: 3 jobs on GPUs 1-3 ($got)" [ "$got" = "0 1 1 1" ]
light f4 4 1 FAKE_NVML_PROCS=0:1
wait
got=$(per_gpu 4 "$OUT".f[1-4])
check "  ... the 4th on GPU 0 ($got)" [ "$got" = "1 1 1 1" ]
check "  ... the placement is said with -v only (nothing on stderr without it)" [ ! -s "$ERR.f4" ] || diag "$ERR.f4"
settle
check_clean "a busy GPU"

# The scheduler's CUDA_VISIBLE_DEVICES: every rank on GPUs 2 and 3.
rm -f "$REC"
for i in 1 2 3 4; do light "c$i" 4 2 CUDA_VISIBLE_DEVICES=2,3; done
wait
got=$(per_gpu 4 "$OUT".c[1-4])
check "CUDA_VISIBLE_DEVICES=2,3, 4 jobs: two on GPU 2, two on GPU 3, none elsewhere ($got)" \
    [ "$got" = "0 0 2 2" ]
settle
check_clean "CUDA_VISIBLE_DEVICES"

# A job whose agent is SIGKILLed stops counting once its processes are gone
# (its guard ends the rank; the rank and what it started hold the job's
# entry too, issue 52: here the rank's shell's sleep, up to 6 s): with A on
# GPU 0 and B on GPU 1, B's agent killed, the next job goes to GPU 1.
rm -f "$REC"
light A 2 12
placed A
light B 2 6
placed B
bgpu=$(per_gpu 2 "$OUT.B")
bentry=$(ls -d "$PLACE"/*/*-pack-B.*)
bagent=${bentry##*.}
kill -9 "$bagent"
for _ in $(seq 100); do kill -0 "$bagent" 2>/dev/null || break; sleep 0.02; done
t0=$(date +%s%N)
for _ in $(seq 500); do flock -n -x "$bentry" true 2>/dev/null && break; sleep 0.02; done
free_ms=$((($(date +%s%N) - t0) / 1000000))
light C 2 1
wait
check "B (GPU 1: $bgpu) SIGKILLed: its entry free $free_ms ms after, once its processes are gone (under 8000); the next job goes where B was ($(per_gpu 2 "$OUT.C"))" \
    [ "$bgpu" = "0 1" -a "$(per_gpu 2 "$OUT.C")" = "0 1" -a $free_ms -lt 8000 ] || diag "$ERR.C"
settle
check_clean "a killed job"

# 20 jobs started within one second on 4 GPUs: five a GPU; gsrun status
# shows them by GPU.
rm -f "$REC"
t0=$(date +%s%N)
for i in $(seq 20); do light "m$i" 4 6; done
t1=$(date +%s%N)
status_until 4 "$OUT.st" "GPU 3 (GPU-[^)]*): 5 jobs, 5 ranks"
rc=$?
LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=4 "$GSRUN" status --json >"$OUT.json" 2>&1
check "20 jobs started in $(((t1 - t0) / 1000000)) ms: gsrun status by GPU, 5 jobs and 5 ranks on each" \
    [ $rc -eq 0 -a "$(grep -c "^  GPU [0-3] (GPU-[^)]*): 5 jobs, 5 ranks: " "$OUT.st")" -eq 4 ] || diag "$OUT.st"
check "  ... and in --json: placement, each GPU's ranks and jobs" \
    [ "$(grep -o '"placement":\[{"uuid":"GPU-[^"]*","gpu":[0-3],"ranks":5,"more_jobs":0,"jobs":\[{"job":"exec-' "$OUT.json" | wc -l)" -eq 1 -a \
        "$(grep -o '"ranks":5,"more_jobs":0,"jobs":' "$OUT.json" | wc -l)" -eq 4 ] || diag "$OUT.json"
wait
got=$(per_gpu 4 $(seq -f "$OUT.m%g" 20))
check "  ... five a GPU, never more ($got)" [ "$got" = "5 5 5 5" ]
check "  ... all 20 end with status 0, one control daemon a GPU" \
    [ "$(rcs $(seq -f "$OUT.m%g.rc" 20))" = "$(printf '0%.0s' $(seq 20))" -a "$(starts)" -eq 4 ] || diag "$REC"
settle
check_clean "20 jobs at once"

# The old way, one option away: --mps-share=job packs too, each job its own
# servers, and a rank alone on its GPU runs without MPS.
rm -f "$REC"
for i in 1 2 3 4; do light "j$i" 4 2 GSRUN_MPS_SHARE=job; done
wait
got=$(per_gpu 4 "$OUT".j[1-4])
check "--mps-share=job: 4 one-rank jobs on 4 GPUs, one a GPU ($got), no MPS, no daemon" \
    [ "$got" = "1 1 1 1" -a "$(cat "$OUT".j[1-4] | grep -c "mps=0 ")" -eq 4 -a "$(starts)" -eq 0 ]
settle
check_clean "share=job"

finish
