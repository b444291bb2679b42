#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/gpu.c, runtime/plan/placement.c, runtime/job/placer.c, runtime/files/status.c
# Several GPUs (fake NVML: 4 GPUs on 2 NUMA nodes, MIG instances): which GPU
# each rank gets, daemon cores, one GPU per rank without MPS, the memory
# limit, and `gsrun status` during a job.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
REC=$TEST_TMP/record
# GPUs 0 and 1 near CPU 0, GPUs 2 and 3 near CPU 1 (two "NUMA nodes").
export FAKE_NVML_NEAR_CPUS="0;0;1;1"
uuid() { printf 'GPU-fa4e0000-0000-4000-8000-%012d' "$1"; }
# "rank:uuid" for every rank, by rank, from the job's output.
gpus_of() { sed -n 's/^rank=\([0-9]*\) .* uuid=\([^ ]*\) .*/\1:\2/p' "$OUT" | sort -n | tr '\n' ' '; }
expect_gpus() { # expect_gpus GPU-of-rank-0 GPU-of-rank-1 ...
    local r=0 want=""
    for g in "$@"; do
        want="$want$r:$(uuid "$g") "
        r=$((r + 1))
    done
    [ "$(gpus_of)" = "$want" ] || { echo "# got:  $(gpus_of)"; echo "# want: $want"; return 1; }
}

# The GPU each rank should get, worked out here from each rank's own CPUs
# (as it printed them): in rank order, the first GPU near its CPUs with
# room, else the first with room. A rank on both CPUs is near every GPU.
expected_gpus() { # expected_gpus RANKS_PER_GPU: "rank:uuid ..." as gpus_of prints it
    sed -n 's/^rank=\([0-9]*\) .* cpus=\([0-9,]*\) .*/\1 \2/p' "$OUT" | sort -n | awk -v t="$1" '
        { c0 = ("," $2 ",") ~ /,0,/; c1 = ("," $2 ",") ~ /,1,/; pick = -1
          for (g = 0; g < 4; g++) near[g] = (c0 && c1) || (g < 2 ? c0 : c1)
          for (g = 0; g < 4 && pick < 0; g++) if (near[g] && load[g] < t) pick = g
          for (g = 0; g < 4 && pick < 0; g++) if (load[g] < t) pick = g
          load[pick]++; printf "%d:GPU-fa4e0000-0000-4000-8000-%012d ", $1, pick }'
}

# Bound ranks, one CPU each (Open MPI 4 alternates the 2 cores, Open MPI 5
# fills core 0 first): each goes to a GPU near its core.
gsrun_fake 4 -v -np 8 --bind-to core:overload-allowed --map-by core "$PROG" >"$OUT" 2>"$ERR"
check "8 bound ranks on 4 GPUs: status 0" [ $? -eq 0 ] || diag "$ERR"
check "  ... every rank bound to one CPU" [ "$(grep -c ' cpus=[0-9]* ' "$OUT")" -eq 8 ]
[ "$(gpus_of)" = "$(expected_gpus 2)" ]
check "each rank on a GPU near its core, 2 per GPU" [ $? -eq 0 ] || { echo "# got:  $(gpus_of)"; echo "# want: $(expected_gpus 2)"; }
check "  ... at 100 % each (2 ranks per GPU)" [ "$(grep -c 'mps=1 .*pct=100 .*gpuranks=2 ' "$OUT")" -eq 8 ]
check "  ... -v says so" grep -q "placement by the ranks' cores: 8 of 8 ranks on a GPU near them" "$ERR"
check "  ... and lists each GPU's ranks" [ "$(grep -c "GPU [0-3] (GPU-.*): local ranks [0-9]" "$ERR")" -eq 4 ]
check_clean "bound ranks"

# Not bound: blocks of consecutive ranks, as before.
gsrun_fake 4 -np 8 --bind-to none "$PROG" >"$OUT" 2>"$ERR"
check "8 unbound ranks: blocks 0,0,1,1,2,2,3,3" expect_gpus 0 0 1 1 2 2 3 3
# 17 ranks: uneven blocks (4, 4, 4, 5), each GPU's share from its count.
gsrun_fake 4 -np 17 --bind-to none "$PROG" >"$OUT" 2>"$ERR"
check "17 ranks on 4 GPUs: 4, 4, 4 and 5 ranks" \
    [ "$(grep -o 'gpuranks=[0-9]*' "$OUT" | sort | uniq -c | awk '{printf "%s:%s ", $1, $2}')" = "12:gpuranks=4 5:gpuranks=5 " ]
[ "$(grep -c 'pct=50 .*gpuranks=4 ' "$OUT")" -eq 12 ] &&
    [ "$(grep -c 'pct=40 .*gpuranks=5 ' "$OUT")" -eq 5 ]
check "  ... at 50 % and 40 %" [ $? -eq 0 ]
check_clean "blocks"

# One rank per GPU: no MPS, but each rank still gets its own GPU.
rm -f "$REC"
FAKE_MPS_RECORD=$REC gsrun_fake 4 -np 4 --bind-to core:overload-allowed --map-by core "$PROG" >"$OUT" 2>"$ERR"
[ "$(grep -c 'mps=0 ' "$OUT")" -eq 4 ] && [ -z "$(leftover_procs)" ]
check "4 ranks on 4 GPUs: no MPS, no daemon left (those started early stopped)" [ $? -eq 0 ]
check "  ... each rank its own GPU near its core, by UUID in CUDA_VISIBLE_DEVICES" \
    [ "$(sed -n 's/^rank=\([0-9]*\) .* cvd=\([^ ]*\) .*/\1:\2/p' "$OUT" | sort -n | tr '\n' ' ')" = "$(expected_gpus 1)" ]
gsrun_fake 4 --gpu-bind=none -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "--gpu-bind=none: CUDA_VISIBLE_DEVICES left alone" [ "$(grep -c 'mps=0 .*cvd=- ' "$OUT")" -eq 4 ]
CUDA_VISIBLE_DEVICES=3,1 gsrun_fake 4 -np 2 --bind-to none "$PROG" >"$OUT" 2>"$ERR"
check "CUDA_VISIBLE_DEVICES=3,1, 2 unbound ranks: GPU 3 and GPU 1, in that order" \
    [ "$(sed -n 's/^rank=\([0-9]*\) .* cvd=\([^ ]*\) .*/\1:\2/p' "$OUT" | sort -n | tr '\n' ' ')" = "0:$(uuid 3) 1:$(uuid 1) " ]
check_clean "one rank per GPU"

# Daemons: one core each while cores allow, never sharing one needlessly.
rm -f "$REC"
FAKE_NVML_NEAR_CPUS="0-1;0-1" FAKE_MPS_RECORD=$REC gsrun_fake 2 -np 4 --bind-to none "$PROG" >"$OUT" 2>"$ERR"
check "2 GPUs near the same 2 cores: their daemons on different cores" \
    [ "$(grep -o ' cpus=[0-9]* ' "$REC" | sort -u | wc -l)" -eq 2 ] || diag "$REC"
# Ranks on CPU 1 only (gsrun and so mpirun started there, ranks not bound by
# mpirun), where the daemon would go: it moves to CPU 0.
FAKE_NVML_NEAR_CPUS="0-1" FAKE_NVML_GPUS=1 LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    taskset -c 1 "$GSRUN" --mps-control="$FAKE_CONTROL" -v --mps=on -np 2 --bind-to none "$PROG" >"$OUT" 2>"$ERR"
check "ranks bound to the daemon's core: status 0" [ $? -eq 0 ] || diag "$ERR"
check "  ... the daemon and its server move off it" grep -q "MPS daemon and server moved from .* to .*0" "$ERR" || diag "$ERR"
check_clean "daemon cores"

# MIG: each instance in use is a device with its own daemon and limit.
rm -f "$REC"
FAKE_NVML_MIG="0:2" FAKE_MPS_RECORD=$REC gsrun_fake 2 -np 6 --bind-to none "$PROG" >"$OUT" 2>"$ERR"
check "GPU 0 in MIG mode (2 instances) + GPU 1, 6 ranks: status 0" [ $? -eq 0 ] || diag "$ERR"
[ "$(grep -c '^start ' "$REC")" -eq 3 ] &&
    [ "$(grep -c '^start .*gpu=MIG-' "$REC")" -eq 2 ]
check "  ... three daemons, two of them for MIG instances" [ $? -eq 0 ]
[ "$(grep -o 'uuid=[^ ]*' "$OUT" | sort | uniq -c | awk '$1 == 2' | wc -l)" -eq 3 ] &&
    [ "$(grep -c 'mps=1 .*pct=100 ' "$OUT")" -eq 6 ]
check "  ... two ranks on each device, at 100 %" [ $? -eq 0 ]
FAKE_NVML_MIG="0:2" gsrun_fake 2 -np 3 --bind-to none "$PROG" >"$OUT" 2>"$ERR"
[ "$(grep -o 'cvd=MIG-[^ ]*' "$OUT" | sort -u | wc -l)" -eq 2 ] && [ "$(grep -c "cvd=$(uuid 1) " "$OUT")" -eq 1 ]
check "3 ranks on 3 MIG/GPU devices: no MPS, each its own MIG instance or GPU" [ $? -eq 0 ]
check_clean "MIG"

# Client priority (issue 38): the job's ranks, by every spelling.
gsrun_fake 1 -np 3 "$PROG" >"$OUT" 2>"$ERR"
check "by default every rank's CUDA_MPS_CLIENT_PRIORITY is 0 (normal)" [ "$(grep -c 'mps=1 .* prio=0$' "$OUT")" -eq 3 ]
gsrun_fake 1 --mps-priority=low -np 3 "$PROG" >"$OUT" 2>"$ERR"
check "--mps-priority=low: every rank gets 1" [ "$(grep -c 'mps=1 .* prio=1$' "$OUT")" -eq 3 ]
GSRUN_MPS_PRIORITY=low LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 \
    mpirun -np 2 "$GSRUN" exec --mps-control="$FAKE_CONTROL" -- "$PROG" >"$OUT" 2>"$ERR"
check "GSRUN_MPS_PRIORITY=low under gsrun exec: every rank gets 1" [ "$(grep -c 'mps=1 .* prio=1$' "$OUT")" -eq 2 ]
for _ in $(seq 100); do [ -z "$(leftover_procs)" ] && break; sleep 0.05; done
rm -rf "$TMPDIR"/gsrun-*
gsrun_fake 1 --mps-priority=high -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "--mps-priority=high: status $? (2), one line naming the accepted values" \
    eval '[ "$(grep -c "mps-priority: invalid value .high.; accepted: normal or low" "$ERR")" -eq 1 ]'
check_clean "client priority"

# A program that links no MPI library (issue 38): 100 % by default, said
# with -v; an MPI program or a script keeps 200/n; a share set wins.
# env_report prints the two variables in one write: printenv's whole
# environment (over 4 KiB, written in pieces) came through mpirun with the
# ranks' pieces interleaved mid-line, and a split line failed the check.
ENVREP=$B/tests/progs/env_report
gsrun_fake 1 -v -np 4 "$ENVREP" GSRUN_MPS_ACTIVE CUDA_MPS_ACTIVE_THREAD_PERCENTAGE >"$OUT" 2>"$ERR"
check "4 ranks of a program without MPI: under MPS, no share set (100 %)" \
    [ "$(grep -cx 'GSRUN_MPS_ACTIVE=1 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE unset' "$OUT")" -eq 4 ] ||
    diag "$OUT" "$ERR"
check "  ... -v says why" grep -q "env_report' links no MPI library: each rank's share is 100 %" "$ERR"
gsrun_fake 1 -np 4 sh -c 'echo "pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"' >"$OUT" 2>"$ERR"
check "  ... a script: 50 % (200/4: unknown counts as coupled)" [ "$(grep -cx pct=50 "$OUT")" -eq 4 ]
gsrun_fake 1 -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "  ... the MPI program: 50 %" [ "$(grep -c 'mps=1 .*pct=50 ' "$OUT")" -eq 4 ]
gsrun_fake 1 --mps-percentage=30 -np 4 printenv CUDA_MPS_ACTIVE_THREAD_PERCENTAGE >"$OUT" 2>"$ERR"
check "  ... --mps-percentage=30 wins: 30 %" [ "$(grep -cx 30 "$OUT")" -eq 4 ]
check_clean "a program without MPI"

# Memory limit: each rank's MPS client limit, for its device 0.
gsrun_fake 1 --mps-memory-limit=2G -np 3 "$PROG" >"$OUT" 2>"$ERR"
check "--mps-memory-limit=2G: every rank gets 0=2048MB" [ "$(grep -c 'mps=1 .*memlimit=0=2048MB ' "$OUT")" -eq 3 ]
GSRUN_MPS_MEMORY_LIMIT=512M gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "GSRUN_MPS_MEMORY_LIMIT=512M works like the option" [ "$(grep -c 'memlimit=0=512MB ' "$OUT")" -eq 2 ]
gsrun_fake 1 --mps-memory-limit=lots -np 2 "$PROG" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && grep -q "mps-memory-limit: invalid value 'lots'; accepted: off, or a size" "$ERR"
check "--mps-memory-limit=lots: status 2, message names the option and the accepted sizes" [ $? -eq 0 ]
gsrun_fake 1 --gpu-bind=nearest -np 2 "$PROG" >"$OUT" 2>"$ERR"
[ $? -eq 2 ] && grep -q "accepted: closest or none" "$ERR"
check "--gpu-bind=nearest: status 2 naming closest or none" [ $? -eq 0 ]
check_clean "memory limit"

# gsrun status while a job runs: text and JSON, read without touching it.
gsrun_fake 4 -np 8 --bind-to core:overload-allowed --map-by core "$PROG" --sleep 4000 >"$OUT" 2>"$ERR" &
job=$!
wait_status "$TEST_TMP/st" "8 of 8 ranks registered"
diag "$TEST_TMP/st"
check "status: one job, MPS on, 8 of 8 ranks registered, 8 alive" \
    grep -q "^job gsrun\.[A-Za-z0-9]* (uid $(id -u)): agent [0-9]*, launcher [1-9][0-9]*, gsrun [0-9]*, up [0-9.]* s, MPS on, 8 of 8 ranks registered, 8 alive" "$TEST_TMP/st"
# (a program without CUDA: MPS lists none of them as its clients)
check "  ... each GPU: daemon, core, server, share, its ranks" \
    [ "$(grep -c '^  GPU [0-3] (Fake GPU [0-3], GPU-fa4e.*): daemon [0-9]* on .*, server [0-9]*, 100%, pipe [^ ]*/g[0-3], ranks [0-9,-]*: 2 registered, 2 alive, MPS clients 0/2 [0-9]*:unseen [0-9]*:unseen; GPU memory: server unknown, its clients 0 MiB$' "$TEST_TMP/st")" -eq 4 ]
"$GSRUN" status --json >"$TEST_TMP/json"
check "status --json: the same job, its GPUs and counts" \
    grep -q '^{"version":1,"node":"[^"]*","jobs":\[{"job":"gsrun\.[A-Za-z0-9]*","uid":[0-9]*,"state":"running","mps":"on",.*"local_size":8,"registered":8,"alive":8,"memory_limit_mb":0,"shared":"","pids":"[0-9: ]*","memory_every_ms":1000,"gpus":\[{"index":0,"uuid":"GPU-fa4e' "$TEST_TMP/json" || diag "$TEST_TMP/json"
wait $job
check "  ... the job still ends with status 0" [ $? -eq 0 ]
"$GSRUN" status >"$TEST_TMP/st"
check "status after the job: no gsrun job" grep -q "no gsrun job in $TMPDIR" "$TEST_TMP/st"
check_clean "status"

# A job whose agent is gone (killed with its guard): shown as stale.
mkdir -p "$TMPDIR/gsrun.Stale1/$(hostname | cut -d. -f1)"
printf 'gsrun-status 1\nmps on\nagent_pid 999999999\nend\n' >"$TMPDIR/gsrun.Stale1/$(hostname | cut -d. -f1)/status"
"$GSRUN" status >"$TEST_TMP/st"
check "status: a job dir whose agent is gone is shown as stale" grep -q "^job gsrun.Stale1 (uid $(id -u)): stale: its agent 999999999 is gone" "$TEST_TMP/st"
"$GSRUN" status --json | grep -q '"job":"gsrun.Stale1","uid":[0-9]*,"state":"stale"'
check "  ... and as \"state\":\"stale\" in JSON" [ $? -eq 0 ]
"$GSRUN" status --bogus >/dev/null 2>"$ERR"
[ $? -eq 2 ] && grep -q "usage: gsrun status \[--format=text|json|prometheus\] \[--json\]" "$ERR"
check "status --bogus: status 2 with the usage" [ $? -eq 0 ]
rm -rf "$TMPDIR/gsrun.Stale1"
check_clean "stale"
finish
