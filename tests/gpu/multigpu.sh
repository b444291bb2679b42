#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/gpu.c, runtime/plan/placement.c on several real GPUs
# Multi-GPU check, for a machine with two or more NVIDIA GPUs (not run by CI).
#
#   tests/gpu/multigpu.sh [BUILD_DIR]   (BUILD_DIR defaults to ./_build)
#
# For 4, 8, 16, 32 and 17 ranks (GSRUN_MGPU_NPS): every rank under MPS, the
# ranks spread over the GPUs (counts differing by at most one), each rank
# seeing the SM share of its own GPU's count, one daemon per GPU on distinct
# cores; `gsrun status` during a job; the memory limit enforced; one GPU
# per rank without MPS; nothing left after each job. Ends with
# "N passed, N failed". Each job's own servers (--mps-share=job): the script
# checks each job's daemons, cores and no-MPS placement, which the user's
# shared servers (the default, tests/gpu/share.sh) would hide.
set -u
export GSRUN_MPS_SHARE=job
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
nps=${GSRUN_MGPU_NPS:-4 8 16 32 17}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; return 1; fi; }

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$ngpu" -lt 2 ]; then
    echo "1..0 # SKIP fewer than 2 NVIDIA GPUs here ($ngpu)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 77
fi
[ -x "$build/launcher/gsrun" ] && [ -x "$build/examples/mps_probe" ] ||
    { echo "Bail out! build first: $build/launcher/gsrun or examples/mps_probe missing"; exit 1; }
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
GSRUN=$build/launcher/gsrun
PROBE=$build/examples/mps_probe
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,mig.mode.current --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | sed 's/^/# topo: /'
. "$(dirname "$0")/procs.sh"
mps_procs() { live_procs 'nvidia-cuda-mps*'; }
before=$(mps_procs)
clean() { # clean "context"
    local after left
    after=$(mps_procs)
    left=$(ls -d "$GS_ROOT"/gsrun.* 2>/dev/null | tr '\n' ' ')
    [ "$after" = "$before" ] && [ -z "$left" ]
    check "$1: no MPS process and no run directory left" [ $? -eq 0 ] ||
        echo "# left: processes [$after] dirs [$left]"
}
total_sms=$("$GSRUN" --mps=off -np 1 "$PROBE" --iters 1 2>/dev/null | sed -n 's/.* sms=\([0-9]*\) .*/\1/p' | head -1)
echo "# $ngpu GPUs with $total_sms SMs each"

# Each rank: its GPU's rank count n, share min(100, 200/n) of the SMs,
# rounded down to whole TPCs (2 SMs), as MPS gives it.
check_shares() { # check_shares OUT NP
    awk -v t="$total_sms" -v np="$2" -v ngpu="$ngpu" '
        / mps=1 / { match($0, /gpu=GPU-[0-9a-f-]*/); g = substr($0, RSTART + 4, RLENGTH - 4)
                    match($0, / sms=[0-9]*/); s[NR] = substr($0, RSTART + 5, RLENGTH - 5) + 0
                    gpu[NR] = g; n[g]++; rows++ }
        END {
            used = np < ngpu ? np : ngpu; lo = int(np / used); bad = 0; k = 0
            for (g in n) { k++; if (n[g] != lo && n[g] != lo + 1) bad++ }
            for (r in s) { p = 200 / n[gpu[r]]; if (p > 100) p = 100
                           want = int(t * p / 100 / 2) * 2; if (s[r] != want) bad++ }
            printf "# %d ranks on %d GPUs:", rows, k
            for (g in n) printf " %s=%d", substr(g, 1, 12), n[g]
            printf "\n"
            exit !(rows == np && k == used && bad == 0)
        }' "$1"
}

for np in $nps; do
    out=$(mktemp)
    t0=$(date +%s.%N)
    "$GSRUN" -v --mps=on -np "$np" --oversubscribe "$PROBE" --expect-mps >"$out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    grep -v "^rank " "$out" | sed "s/^/# np $np: /"
    grep "^rank " "$out" | sort -t' ' -k2 -n | head -4 | sed "s/^/# np $np: /"
    check "np $np: gsrun exit status 0 ($(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s)" [ $rc -eq 0 ]
    check "np $np: every rank under MPS with a correct result" \
        [ "$(grep -c 'mps=1 .*result=ok' "$out")" -eq "$np" ]
    check "np $np: ranks spread over the GPUs, each sees its GPU's share of the SMs" check_shares "$out" "$np"
    used=$((np < ngpu ? np : ngpu))
    daemons=$(grep -c "MPS control daemon [0-9]* on" "$out")
    cores=$(grep -o "MPS control daemon [0-9]* on core [0-9]*" "$out" | awk '{print $NF}' | sort -u | wc -l)
    [ "$daemons" -eq "$used" ] && [ "$cores" -eq "$used" ]
    check "np $np: one daemon per GPU ($daemons of $used), on $cores distinct cores" [ $? -eq 0 ]
    clean "np $np"
    rm -f "$out"
done

# gsrun status while a 16-rank job runs.
out=$(mktemp)
"$GSRUN" --mps=on -np 16 --oversubscribe "$PROBE" --sleep 4000 >"$out" 2>&1 &
job=$!
st=$(mktemp)
for _ in $(seq 200); do
    "$GSRUN" status >"$st" 2>&1
    grep -q "16 of 16 ranks registered" "$st" && break
    sleep 0.05
done
"$GSRUN" status --json >"$st.json"
sed 's/^/# status: /' "$st"
check "status during the job: MPS on, 16 of 16 ranks registered and alive" \
    grep -q "MPS on, 16 of 16 ranks registered, 16 alive" "$st"
check "status: one line per GPU with daemon, core, server and share" \
    [ "$(grep -c '^  GPU [0-9]* (.*): daemon [0-9]* on core .*, server [0-9]*, [0-9.]*%, pipe [^ ]*, ranks ' "$st")" -eq "$ngpu" ]
check "status --json: running, $ngpu GPUs" grep -q '"state":"running","mps":"on"' "$st.json"
head -c 3000 "$st.json" | sed 's/^/# json: /'; echo
wait $job
check "the job under status ends with 0" [ $? -eq 0 ]
clean "status"
rm -f "$st" "$st.json" "$out"

# Memory limit: 1 GiB per rank; 2 GiB fails, 256 MiB works (the limit counts
# the CUDA context too: 512 MiB failed under 1 GiB on an H200).
out=$(mktemp)
"$GSRUN" --mps=on --mps-memory-limit=1G -np 4 "$PROBE" --alloc-mb 2048 >"$out" 2>&1
grep "^rank " "$out" | head -1 | sed 's/^/# limit: /'
check "--mps-memory-limit=1G: 2048 MiB fails in every rank" [ "$(grep -c 'alloc=2048MB:cudaErrorMemoryAllocation' "$out")" -eq 4 ]
"$GSRUN" --mps=on --mps-memory-limit=1G -np 4 "$PROBE" --alloc-mb 256 >"$out" 2>&1
grep "^rank " "$out" | head -1 | sed 's/^/# limit: /'
check "--mps-memory-limit=1G: 256 MiB works in every rank" [ "$(grep -c 'alloc=256MB:ok' "$out")" -eq 4 ]
"$GSRUN" --mps=on -np 4 "$PROBE" --alloc-mb 2048 >"$out" 2>&1
check "without the limit 2048 MiB works" [ "$(grep -c 'alloc=2048MB:ok' "$out")" -eq 4 ]
clean "memory limit"

# One rank per GPU: no MPS, each rank its own GPU.
"$GSRUN" -v -np "$ngpu" "$PROBE" >"$out" 2>&1
grep -v "^rank " "$out" | sed 's/^/# one per GPU: /'
[ "$(grep -c 'mps=0 .*result=ok' "$out")" -eq "$ngpu" ] &&
    [ "$(grep -o 'gpu=GPU-[0-9a-f-]*' "$out" | sort -u | wc -l)" -eq "$ngpu" ]
check "$ngpu ranks, auto: no MPS, $ngpu distinct GPUs" [ $? -eq 0 ]
"$GSRUN" --gpu-bind=none -np "$ngpu" "$PROBE" >"$out" 2>&1
check "--gpu-bind=none: every rank on CUDA's device 0 (one GPU)" \
    [ "$(grep -o 'gpu=GPU-[0-9a-f-]*' "$out" | sort -u | wc -l)" -eq 1 ]
clean "one rank per GPU"
rm -f "$out"

echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
