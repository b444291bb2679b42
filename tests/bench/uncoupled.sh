#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/rank/program.c, runtime/rank/task.c (the default share of a
# program without MPI), runtime/rank/clientenv.c (client priority), on the GPU
#
#   tests/bench/uncoupled.sh [BUILD_DIR]
#
# N independent copies of examples/solo_jacobi (2048 x 2048, 4000 sweeps;
# it links no MPI library) under one gsrun, for N = 16 and 48 (one MPS
# server's client limit), two runs each, side by side: gsrun's default
# (no share, 100 %, for a program without MPI), --mps-percentage=<200/N> (the share
# the default gave before), --mps-percentage=off, and plain mpirun. Prints
# the worst solve time of each and the ratios, then checks: every copy ran
# and its checksum is the same; the default is within 1.2x of off; -v says
# why the share is 100 %; --mps-priority=low reaches the driver (every copy
# still runs under MPS). Nothing of MPS is left. Ends with "N passed, N
# failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/gpu/procs.sh"
pin_one_gpu
build=${1:-$top/_build}
prog=$build/examples/solo_jacobi
. "$top/tests/bench/gpu_start.sh"
gpu_bench_start "$prog"
G=$build/launcher/gsrun
out=$(mktemp)
size="--n 2048 --iters 4000" # about 0.03 s for one copy alone on an H200

worst() { # worst N LAUNCH...: the largest solve time of N copies, or "fail"
    local n=$1
    shift
    "$@" >"$out" 2>"$out.err"
    local rc=$? got
    got=$(grep -c '^solo_jacobi: ' "$out")
    if [ $rc -ne 0 ] || [ "$got" -ne "$n" ] || [ "$(grep -o 'checksum=[^ ]*' "$out" | sort -u | wc -l)" -ne 1 ]; then
        echo fail
        return
    fi
    grep -o 'solve=[0-9.]*' "$out" | cut -d= -f2 | sort -g | tail -1
}

echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) cores"
for n in 16 48; do
    old=$(awk -v n=$n 'BEGIN { p = 200 / n; if (p > 100) p = 100; printf "%g", p }')
    for run in 1 2; do
        d=$(worst $n "$G" -np $n --oversubscribe "$prog" $size)
        o=$(worst $n "$G" --mps-percentage=off -np $n --oversubscribe "$prog" $size)
        s=$(worst $n "$G" --mps-percentage=$old -np $n --oversubscribe "$prog" $size)
        p=$(worst $n mpirun -np $n --oversubscribe "$prog" $size)
        echo "# $n copies, run $run: worst solve (s): gsrun default $d, --mps-percentage=off $o, --mps-percentage=$old (the old default) $s, plain mpirun $p"
        if [ "$d" = fail ] || [ "$o" = fail ] || [ "$s" = fail ] || [ "$p" = fail ]; then
            notok "$n copies, run $run: a job failed"
            continue
        fi
        echo "# ratios: default/off $(awk -v a=$d -v b=$o 'BEGIN{printf "%.2f", a/b}'), old default/off $(awk -v a=$s -v b=$o 'BEGIN{printf "%.2f", a/b}'), plain/default $(awk -v a=$p -v b=$d 'BEGIN{printf "%.2f", a/b}')"
        awk -v a=$d -v b=$o 'BEGIN{exit !(a <= 1.2 * b)}' &&
            ok "$n copies, run $run: the default ($d s) within 1.2x of off ($o s)" ||
            notok "$n copies, run $run: the default ($d s) not within 1.2x of off ($o s)"
    done
done
"$G" -v -np 4 "$prog" >"$out" 2>"$out.err"
grep -q "links no MPI library: each rank's share is 100 %" "$out.err" &&
    ok "-v says the copies' share is 100 %" || { notok "-v did not say why"; cat "$out.err"; }
"$G" --mps-priority=low -v -np 4 "$prog" --iters 200 >"$out" 2>"$out.err"
[ $? -eq 0 ] && [ "$(grep -c '^solo_jacobi: ' "$out")" -eq 4 ] &&
    ok "--mps-priority=low: 4 copies ran under MPS at CUDA_MPS_CLIENT_PRIORITY=1" ||
    { notok "--mps-priority=low"; cat "$out.err"; }
for _ in $(seq 100); do
    left=$(pgrep -c -x 'nvidia-cuda-mps' || true) # comm: 15 characters of the name
    [ "${left:-0}" -eq 0 ] && break
    sleep 0.1
done
[ "${left:-0}" -eq 0 ] && ok "no MPS process left" || notok "$left MPS processes left"
rm -f "$out" "$out.err"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
