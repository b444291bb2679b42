#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/rank/clientenv.c, runtime/agent/daemons.c, runtime/gpu/affinity.c, runtime/plan/policy.c
# MPS with the fake control daemon: every rank's environment, one daemon per
# GPU, the daemon's own environment and pinning, the policies, concurrent jobs.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
REC=$TEST_TMP/record

# The user's own MPS settings must not reach gsrun's daemon.
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=77 CUDA_MPS_PIPE_DIRECTORY=/tmp/user-mps CUDA_MPS_LOG_DIRECTORY=/tmp/user-log FAKE_MPS_RECORD=$REC \
    FAKE_NVML_NEAR_CPU=0 gsrun_fake 1 -np 16 "$PROG" --check-control >"$OUT" 2>"$ERR"
rc=$?
check "16 ranks on one GPU: status 0" [ $rc -eq 0 ]
[ $rc -eq 0 ] || diag "$ERR"
check "every rank has MPS, 12.5 %, device 0 and the GPU's UUID, and no log directory (the server's log is the agent's)" \
    [ "$(grep -c 'mps=1 pipe=/.*/g0 log=- pct=12.5 cvd=0 uuid=GPU-fa4e0000-0000-4000-8000-000000000000 gpuranks=16 ' "$OUT")" -eq 16 ]
check "the MPS daemon was ready before every rank started" [ "$(grep -c ' control=1 ' "$OUT")" -eq 16 ]
check "local ranks 0-15 each once" [ "$(grep -o 'local=[0-9]*/16' "$OUT" | sort -u | wc -l)" -eq 16 ]
check "exactly one MPS control daemon for the job" [ "$(grep -c '^start ' "$REC")" -eq 1 ]
check "the daemon sees only its GPU, by UUID" grep -q "gpu=GPU-fa4e0000-0000-4000-8000-000000000000 " "$REC"
check "the user's CUDA_MPS_* do not reach the daemon" grep -q "pct_env=(unset)" "$REC"
check "the daemon's pipe dir is private to the job (under TMPDIR)" grep -q "pipe=$TMPDIR/gsrun\.[A-Za-z0-9]*/" "$REC"
check "the daemon is pinned to one CPU, the one near the GPU" grep -q " cpus=0 " "$REC"
check "nothing printed to stderr without -v" [ ! -s "$ERR" ]
check_clean "16 ranks, one GPU"

# Two GPUs, 5 ranks: blocks 0-1 and 2-4, shares 100 and 66.6667.
rm -f "$REC"
FAKE_MPS_RECORD=$REC gsrun_fake 2 -v -np 5 "$PROG" --mps-client >"$OUT" 2>"$ERR"
check "5 ranks on two GPUs: status 0" [ $? -eq 0 ]
check "ranks 0-1 on GPU 0 at 100 %" [ "$(grep -c 'local=[01]/5 .*pipe=/.*/g0 .*pct=100 .*000000000000 gpuranks=2' "$OUT")" -eq 2 ]
check "ranks 2-4 on GPU 1 at 66.6667 %" [ "$(grep -c 'local=[234]/5 .*pipe=/.*/g1 .*pct=66.6667 .*000000000001 gpuranks=3' "$OUT")" -eq 3 ]
check "one daemon per GPU" [ "$(grep -c '^start ' "$REC")" -eq 2 ]
[ "$(grep -c 'MPS control daemon [0-9]* on' "$ERR")" -eq 2 ] && grep -q "served 5 of 5 ranks as MPS clients" "$ERR"
check "-v reports both daemons and the teardown" [ $? -eq 0 ]
check_clean "two GPUs"

gsrun_fake 1 --mps-percentage=25 -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "--mps-percentage=25 is given to every rank" [ "$(grep -c 'mps=1 .*pct=25 ' "$OUT")" -eq 4 ]
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40 gsrun_fake 1 --mps-percentage=off -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "--mps-percentage=off leaves it unset, even if inherited" [ "$(grep -c 'mps=1 .*pct=- ' "$OUT")" -eq 4 ]
GSRUN_MPS_PERCENTAGE=50 gsrun_fake 1 -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "GSRUN_MPS_PERCENTAGE=50 works like the option" [ "$(grep -c 'mps=1 .*pct=50 ' "$OUT")" -eq 4 ]
check_clean "percentages"

rm -f "$REC"
FAKE_MPS_RECORD=$REC gsrun_fake 1 -np 1 "$PROG" >"$OUT" 2>"$ERR"
[ "$(grep -c 'mps=0 ' "$OUT")" -eq 1 ] && [ ! -s "$ERR" ]
check "auto with one rank per GPU: no MPS, no notice" [ $? -eq 0 ]
# gsrun started its node's daemon before it knew (early start); the plan
# stops it. In an exclusive compute mode no server may hold the GPU that the
# rank then uses directly: the servers wait for the plan there.
check "  ... the daemon started early is gone" [ -z "$(leftover_procs)" ]
rm -f "$REC"
FAKE_NVML_COMPUTE_MODE=3 FAKE_MPS_RECORD=$REC gsrun_fake 1 -np 1 "$PROG" >"$OUT" 2>"$ERR"
# (No daemon at all since gsrun reads -np 1: nothing is started early.)
check "Exclusive_Process, 1 rank: no MPS server was started" \
    [ "$(cat "$REC" 2>/dev/null | grep -c '^start_server')" -eq 0 ] || diag "$REC"
FAKE_NVML_COMPUTE_MODE=3 FAKE_MPS_RECORD=$REC gsrun_fake 1 -np 4 "$PROG" >"$OUT" 2>"$ERR"
[ "$(grep -c 'mps=1 ' "$OUT")" -eq 4 ] && [ "$(grep -c '^start_server' "$REC")" -eq 1 ]
check "Exclusive_Process, 4 ranks: MPS, its server started once the plan wants it" [ $? -eq 0 ] || diag "$REC"
FAKE_MPS_RECORD=$REC gsrun_fake 1 --mps=on -np 1 "$PROG" >"$OUT" 2>"$ERR"
check "--mps=on with one rank: MPS at 100 %" [ "$(grep -c 'mps=1 .*pct=100 ' "$OUT")" -eq 1 ]
check_clean "one rank"

# More ranks on a GPU than one MPS server takes (the fake, like the real
# one with a CUDA 13.0 driver, takes 48 clients): several servers on the
# GPU, ranks dealt over them in blocks, every rank a client at once.
rm -f "$REC"
FAKE_MPS_RECORD=$REC gsrun_fake 1 -np 49 "$PROG" --mps-client >"$OUT" 2>"$ERR"
rc=$?
check "49 ranks on one GPU, auto: status 0, every rank under MPS and a client at once" \
    [ $rc -eq 0 -a "$(grep -c '^rank=.* mps=1 ' "$OUT")" -eq 49 -a "$(grep -c 'client=ok' "$OUT")" -eq 49 ] ||
    diag "$ERR"
check "  ... two daemons on the GPU, 24 and 25 ranks, shares 200/24 and 200/25" \
    [ "$(grep -c '^start ' "$REC")" -eq 2 -a "$(grep -c 'pipe=[^ ]*/g0 .*pct=8.3333 ' "$OUT")" -eq 24 \
      -a "$(grep -c 'pipe=[^ ]*/g1 .*pct=8 .*gpuranks=49 ' "$OUT")" -eq 25 ] || diag "$REC"
check "  ... nothing printed without -v" [ ! -s "$ERR" ]
check_clean "49 ranks, two servers"
rm -f "$REC"
FAKE_MPS_RECORD=$REC gsrun_fake 1 --mps=on -v -np 100 "$PROG" --mps-client >"$OUT" 2>"$ERR"
rc=$?
# What was seen is in the check's line: a log's tail may not reach CI's output.
oks=$(grep -c 'client=ok' "$OUT") starts=$(grep -c '^start ' "$REC")
split=$(grep -o 'pipe=[^ ]*/g[0-9]* ' "$OUT" | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')
# And the first thing gsrun or a rank told of a failure (CI once showed only
# "status 70 (0), 0 clients", the reason lost with the log).
why=$(grep -m1 -i 'error\|problem\|refused\|cannot\|failed' "$ERR" | cut -c1-240)
check "100 ranks on one GPU, --mps=on: status $rc (0), $oks clients (100), $starts servers (3) of ${split% } clients (33 33 34)${why:+; first told: $why}" \
    [ $rc -eq 0 -a "$oks" -eq 100 -a "$starts" -eq 3 -a "$split" = "33 33 34 " ] ||
    { diag "$ERR"; grep -v '^rank=' "$OUT" | head -20 | diag; }
check "  ... every daemon on the same GPU, in a pipe dir of its own" \
    [ "$(grep '^start ' "$REC" | grep -c 'gpu=GPU-fa4e0000-')" -eq 3 -a "$(grep -o 'pipe=[^ ]*' "$REC" | sort -u | wc -l)" -eq 3 ]
check "  ... -v names the servers and the limit" \
    grep -q "100 ranks on 1 GPU: 3 MPS servers, at most 48 clients each (the driver's limit, CUDA 13.0)" "$ERR"
check "  ... each server's ranks" \
    [ "$(grep -c 'GPU 0 server [0-2] (GPU-fa4e[^)]*): local ranks \(0-32\|33-65\|66-99\)$' "$ERR")" -eq 3 ] || diag "$ERR"
check "  ... and each one shut down" [ "$(grep -c 'GPU 0 server [0-2]: MPS shut down' "$ERR")" -eq 3 ]
check_clean "100 ranks, three servers"
# A CUDA 13.1 driver: 60 clients per server (the fake told to take 60 too).
rm -f "$REC"
FAKE_NVML_CUDA_VERSION=13010 FAKE_MPS_MAX_CLIENTS=60 FAKE_MPS_RECORD=$REC \
    gsrun_fake 1 -np 60 "$PROG" --mps-client >"$OUT" 2>"$ERR"
check "60 ranks, CUDA 13.1 driver: one server takes all 60" \
    [ $? -eq 0 -a "$(grep -c 'client=ok' "$OUT")" -eq 60 -a "$(grep -c '^start ' "$REC")" -eq 1 ] || diag "$ERR"
check_clean "CUDA 13.1 driver"
# GPU memory: contexts of too many ranks for the device get one warning from
# the node's first rank before the program runs (40 x 54 MiB of 2000 MiB).
FAKE_NVML_MEMORY_MB=2000 gsrun_fake 1 -np 40 "$PROG" >"$OUT" 2>"$ERR"
check "40 ranks on a 2000 MiB GPU: the job runs, with one memory warning" \
    [ $? -eq 0 -a "$(grep -c "warning: GPU 0: 40 ranks' MPS contexts (about 54 MiB each) take about 2160 of its 2000 MiB" "$ERR")" -eq 1 ] ||
    diag "$ERR"
FAKE_NVML_MEMORY_MB=4000 gsrun_fake 1 -np 40 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "  ... on 4000 MiB: no warning" [ $rc -eq 0 -a "$(grep -c 'MPS contexts' "$ERR")" -eq 0 ]
check_clean "memory warning"
# The fake holds to the limit: a setting above it overfills the server,
# and the 49th client fails as on the GPU (cudaErrorDevicesUnavailable).
gsrun_fake 1 --mps-clients-per-server=64 -np 49 "$PROG" --mps-client >"$OUT" 2>"$ERR"
rc=$?
check "--mps-clients-per-server=64 over the fake's 48: the job fails (status $rc)" [ $rc -ne 0 ]
check "  ... one client refused: Maximum number of clients (48) reached" \
    [ "$(grep -c 'MPS client refused (refused: Maximum number of clients (48) reached)' "$ERR")" -eq 1 ] || diag "$ERR"
check_clean "overfilled server"
GSRUN_MPS_CLIENTS_PER_SERVER=16 FAKE_MPS_RECORD=$REC.16 gsrun_fake 1 -np 40 "$PROG" --mps-client >"$OUT" 2>"$ERR"
check "GSRUN_MPS_CLIENTS_PER_SERVER=16, 40 ranks: three servers" \
    [ $? -eq 0 -a "$(grep -c '^start ' "$REC.16")" -eq 3 -a "$(grep -c 'client=ok' "$OUT")" -eq 40 ] || diag "$ERR"
check_clean "clients per server set"

# Concurrent jobs of one user: separate daemons and directories.
rm -f "$REC"
# Each mpirun its own session dir base: four mpiruns that make the same
# ompi.<host>.<uid> at once can fail in orte_init ("File exists", Open MPI
# 4.1's session_dir.c), which is Open MPI's race, not gsrun's.
for i in 1 2 3 4; do
    mkdir -p "$TEST_TMP/ompi/$i"
    OMPI_MCA_orte_tmpdir_base=$TEST_TMP/ompi/$i FAKE_MPS_RECORD=$REC gsrun_fake 1 -np 3 "$PROG" --sleep 300 >"$OUT.$i" 2>&1 &
done
wait
check "four concurrent jobs: four daemons" [ "$(grep -c '^start ' "$REC")" -eq 4 ]
check "  ... in four different directories" [ "$(grep -o 'pipe=[^ ]*' "$REC" | sort -u | wc -l)" -eq 4 ]
n=0
for i in 1 2 3 4; do
    [ "$(grep -c 'mps=1 ' "$OUT.$i")" -eq 3 ] && [ "$(grep -o 'pipe=[^ ]*' "$OUT.$i" | sort -u | wc -l)" -eq 1 ] && n=$((n + 1))
done
check "  ... each job's ranks share only their own daemon" [ $n -eq 4 ] ||
    { diag "$REC"; for i in 1 2 3 4; do diag "$OUT.$i"; done; }
check_clean "concurrent jobs"

# Without pidfds (Linux before 5.3, e.g. RHEL 8): each rank keeps its
# registration open across exec and the agent follows that. MPS must stay
# up while the ranks run, and go when they end.
GSRUN_TEST_NO_PIDFD=1 gsrun_fake 1 -x GSRUN_TEST_NO_PIDFD -np 4 "$PROG" --sleep 2500 >"$OUT" 2>"$ERR" &
job=$!
wait_status "$TEST_TMP/st" "4 of 4 ranks registered"
sleep 1
"$GSRUN" status >"$TEST_TMP/st" 2>&1
check "without pidfds: MPS still up with 4 ranks alive a second into the job" \
    grep -q "MPS on, 4 of 4 ranks registered, 4 alive" "$TEST_TMP/st" || diag "$TEST_TMP/st"
wait $job
[ $? -eq 0 ] && [ "$(grep -c 'mps=1 ' "$OUT")" -eq 4 ]
check "  ... the job ends with status 0, every rank under MPS" [ $? -eq 0 ]
GSRUN_TEST_NO_PIDFD=1 gsrun_fake 1 -x GSRUN_TEST_NO_PIDFD -np 4 "$PROG" --kill 2 >"$OUT" 2>"$ERR"
check "  ... a SIGKILLed rank: status 137, as with plain mpirun" [ $? -eq 137 ]
check_clean "without pidfds"
finish
