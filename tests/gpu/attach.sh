#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: every rank's MPS state with real MPS (GPU machine; issue 57)
# Whether gsrun knows which ranks really are MPS clients, on an NVIDIA GPU
# machine (not run by CI; passes on 1, 2 and 4 GPUs):
#
#   tests/gpu/attach.sh [BUILD_DIR]        (default ./_build; built if missing)
#
#   1. a wrapper that removes CUDA_MPS_PIPE_DIRECTORY: every rank is told,
#      while the job runs, that it ran on its GPU without MPS and why
#      (nvidia-smi agrees: type C, not M+C);
#   2. a wrapper that sets CUDA_VISIBLE_DEVICES=(local rank % 2) as site
#      affinity scripts do: the odd ranks are told that their CUDA found no
#      device, and why;
#   3. a program without CUDA (sleep): said (-v) that no rank used the GPU,
#      that CUDA never started in them, and (the job ended 0) the --mps=off
#      advice;
#   4. an MPI job whose rank faults on the GPU and then stays stuck 30 s
#      outside MPI: the fault told within seconds, the job ended after
#      --mps-fault-grace=3 with status 75;
#   5. a plain 16-rank job: 16 of 16 ranks MPS clients;
#   6. 64 ranks without MPS on one GPU (a wrapper drops the pipe dir): each
#      told, the user's shared MPS's GPU answer read (NVML lists 64 and more);
#   7. 100 MPS clients on one GPU (3 servers): each counted;
#   8. a rank in a PID namespace of its own (unshare --pid --fork
#      --mount-proc): an MPS client, counted as one.
# Each case prints the seconds from the job's start to gsrun's line.
# Ends with "N passed, N failed".
set -u
export GSRUN_MPS_LINGER=${GSRUN_MPS_LINGER:-0}
export OMPI_MCA_rmaps_base_oversubscribe=1 # 64 and 100 ranks on 16 cores
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; return 1; fi; }

. "$(dirname "$0")/procs.sh"
gpu_ready "$top" "$build"
ngpus=$(nvidia-smi -L | grep -c '^GPU ')
echo "# $ngpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
G=$build/launcher/gsrun
P=$build/examples/mps_probe
T=$(mktemp -d /tmp/gsattach.XXXXXX)

# run NAME ARGS...: gsrun in the background, each line of its stderr
# stamped with the ms since the start ("<ms> <line>" in $T/NAME.err).
run() {
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
waitrc() { # the job's end, and its stamped lines written out
    for _ in $(seq 1200); do [ -s "$T/$1.rc" ] && sleep 0.3 && return 0; sleep 0.1; done
    return 1
}
first_ms() { grep -m1 "$2" "$T/$1.err" | cut -d' ' -f1; } # ms of the first line matching
clean() { # nothing of MPS left after a case
    local left
    for _ in $(seq 100); do
        left=$(live_procs 'nvidia-cuda-mps*')
        [ -z "$left" ] && break
        sleep 0.1
    done
    check "  ... no MPS process left ($left)" [ -z "$left" ]
}

# 1. The pipe dir removed: each rank's own context, time-sliced.
run p -v -np 4 env -u CUDA_MPS_PIPE_DIRECTORY "$P" --sleep 4000
sleep 3
smi=$(nvidia-smi | grep mps_probe | awk '{print $(NF-3)}' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
c=$(nvidia-smi | grep mps_probe | awk '{print $(NF-3)}' | grep -cx 'C')
mc=$(nvidia-smi | grep mps_probe | awk '{print $(NF-3)}' | grep -cx 'M+C')
waitrc p
n=$(grep -c 'without MPS: its program was started without CUDA_MPS_PIPE_DIRECTORY' "$T/p.err")
first=$(first_ms p 'without MPS')
# One condition per verdict, inside the command check runs: an empty time
# fails the comparison instead of passing unseen.
check "1. pipe dir removed: $n of 4 ranks told, the first ${first:-never} ms after the start, while the job ran (it ended at $(cat "$T/p.end") ms)" \
    eval "[ '$n' = 4 ] && [ -n '$first' ] && [ '$first' -lt '$(cat "$T/p.end")' ]" || sed 's/^/# /' "$T/p.err"
check "  ... nvidia-smi agrees while they ran: $c of 4 of type C, $mc of type M+C ($smi)" \
    eval "[ '$c' = 4 ] && [ '$mc' = 0 ]"
grep -m1 'without MPS' "$T/p.err" | sed 's/^/#   /'
check "  ... the summary: $(grep -o 'served [^;]*; [^;]*' "$T/p.err")" grep -q "served 0 of 4 ranks as MPS clients; 4 ran on the GPU without MPS" "$T/p.err"
clean

# 2. A per-rank CUDA_VISIBLE_DEVICES wrapper.
# (--stuck: a failed rank waits 2 s before its MPI_Abort, so that the job is
# not ended before the other odd rank's CUDA has started.)
run w -np 4 sh -c 'CUDA_VISIBLE_DEVICES=$((OMPI_COMM_WORLD_LOCAL_RANK % 2)) exec "$0" "$@"' "$P" --stuck 2000
waitrc w
n=$(grep -c 'its CUDA found no device' "$T/w.err")
check "2. per-rank CUDA_VISIBLE_DEVICES: $n of 2 odd ranks told (first at $(first_ms w 'found no device') ms), status $(cat "$T/w.rc")" \
    [ "$n" = 2 ] || sed 's/^/# /' "$T/w.err"
grep -m1 'found no device' "$T/w.err" | sed 's/^/#   /'
clean

# 3. A program without CUDA.
run c -v -np 4 sleep 2
waitrc c
check "3. no CUDA: $(grep -o 'no rank of the 4 used the GPU.*' "$T/c.err") (status $(cat "$T/c.rc"))" \
    eval "grep -q 'no rank of the 4 used the GPU .*CUDA never started in ranks 0-3: they exited before using the GPU (the job ended with status 0: a program without CUDA runs as well with --mps=off)' '$T/c.err' && ! grep -q 'served [0-9]' '$T/c.err'" ||
    sed 's/^/# /' "$T/c.err"
clean

# 4. A fault, then a rank stuck 30 s outside MPI.
run f --mps-fault-grace=3 -np 2 "$P" --fault 1 --stuck 30000 --iters 1000
waitrc f
told=$(first_ms f 'hit a fatal GPU fault')
err=$(first_ms f 'failed: ')
end=$(cat "$T/f.end")
check "4. fault: the rank's CUDA error at ${err:-?} ms, gsrun's fault line at ${told:-?} ms; the job ended at $end ms, status $(cat "$T/f.rc") (75)" \
    eval "[ -n '$told' ] && [ '$(cat "$T/f.rc")' = 75 ] && [ $end -lt 20000 ]" || sed 's/^/# /' "$T/f.err"
grep -m1 'hit a fatal GPU fault' "$T/f.err" | sed 's/^/#   /'
tail -2 "$T/f.err" | sed 's/^/#   /'
clean

# 5. A plain job: every rank a client.
run ok -v -np 16 "$P" --expect-mps
waitrc ok
check "5. 16 ranks: $(grep -o 'served [0-9]* of [0-9]* ranks as MPS clients' "$T/ok.err" | awk '{s += $2; n += $4} END {print "served " s " of " n}') ranks as MPS clients, status $(cat "$T/ok.rc"), nothing told" \
    eval "[ \"\$(grep -o 'served [0-9]* of [0-9]* ranks as MPS clients;' '$T/ok.err' | awk '{s += \$2} END {print s}')\" = 16 ] && [ '$(cat "$T/ok.rc")' = 0 ] && ! grep -q 'without MPS\|no device' '$T/ok.err'" ||
    sed 's/^/# /' "$T/ok.err"
clean

# 6. 64 ranks without MPS on one GPU, under the user's shared MPS (its
# listing of the GPU travels to the job): each told.
run n64 -v --mps-share=node -np 64 env -u CUDA_MPS_PIPE_DIRECTORY "$P" --sleep 8000
waitrc n64
n=$(grep -c 'without MPS: its program was started without CUDA_MPS_PIPE_DIRECTORY' "$T/n64.err")
check "6. 64 ranks without MPS: $n of 64 told (the first at $(first_ms n64 'without MPS') ms, the job's end at $(cat "$T/n64.end") ms), status $(cat "$T/n64.rc")" \
    eval "[ '$n' = 64 ] && [ '$(cat "$T/n64.rc")' = 0 ]" || tail -5 "$T/n64.err" | sed 's/^/# /'
check "  ... the summary: $(grep -o 'served [^;]*; [^;(]*' "$T/n64.err" | head -1)" \
    grep -q "served 0 of 64 ranks as MPS clients; 64 ran on the GPU without MPS" "$T/n64.err"
# Its answer, which lists the 64 processes, is read whole. While 64
# contexts are created without MPS (about 20 s on an H200), a listing may
# run past a second: the service then says so and the job lists the GPUs
# itself (issue 58's bound, told once with -v). That fallback is no
# failure; an answer the job cannot read, a closed connection or no
# answer is (seen: "its GPU listing has run 1003 ms" in 2 of 3 runs).
why=$(grep -o 'could not tell the GPUs (.*' "$T/n64.err" | head -1)
check "  ... the shared MPS's GPU answer read (${why:-nothing said against it})" \
    eval "[ -z \"\$why\" ] || echo \"\$why\" | grep -q '^could not tell the GPUs (its GPU listing has run [0-9]* ms (NVML slow or stuck)); this job lists them itself'"
"$G" stop >/dev/null 2>&1
clean

# 7. 100 MPS clients on one GPU: past one server's clients, each counted.
run c100 -v -np 100 "$P" --expect-mps --sleep 2000
waitrc c100
check "7. 100 MPS clients: $(grep -o 'served [0-9]* of [0-9]* ranks as MPS clients' "$T/c100.err" | head -1), status $(cat "$T/c100.rc"), nothing told" \
    eval "grep -q 'served 100 of 100 ranks as MPS clients' '$T/c100.err' && [ '$(cat "$T/c100.rc")' = 0 ] && ! grep -q 'without MPS\|no device' '$T/c100.err'" ||
    tail -5 "$T/c100.err" | sed 's/^/# /'
clean

# 8. A rank in a PID namespace of its own: MPS and NVML name its context by
# its PID in the agent's namespace; it is its rank's, and a client.
# (A CUDA program without MPI: Open MPI's own start in a PID namespace of
# its own is not what this checks.)
run ns -v -np 2 unshare --pid --fork --mount-proc "$build/examples/gpu_fault" --work 3000
waitrc ns
check "8. ranks under unshare --pid --fork --mount-proc: $(grep -o 'served [0-9]* of [0-9]* ranks as MPS clients' "$T/ns.err" | head -1), status $(cat "$T/ns.rc")" \
    eval "grep -q 'served 2 of 2 ranks as MPS clients' '$T/ns.err' && [ '$(cat "$T/ns.rc")' = 0 ]" ||
    tail -5 "$T/ns.err" | sed 's/^/# /'
clean

rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
