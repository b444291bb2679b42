#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: tests/bench/launch_overhead.sh, gpu_bench.sh, lammps.sh and cloverleaf.sh (arguments), plot_scaling.sh, many_ranks.sh
# The benchmarks that run without a GPU, at their smallest, as a smoke test.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
"$S/tests/bench/launch_overhead.sh" --build "$B" --np 2 --pairs 1 >"$OUT" 2>"$ERR"
rc=$?
check "launch_overhead.sh runs (status $rc)" [ $rc -eq 0 ]
check "  ... and prints the median overheads" grep -q "^on .* median .*, vs plain .* ms (paired median)$" "$OUT"
[ $rc -eq 0 ] || diag "$ERR"
# The GPU benchmark: without a GPU it says so and exits 77; its summary of
# the committed H200 data has every program, np and configuration.
"$S/tests/bench/gpu_bench.sh" --build "$B" --program small_kernels --np 1 --reps 1 \
    --csv "$TEST_TMP/b.csv" >"$OUT" 2>"$ERR"
rc=$?
if nvidia-smi -L >/dev/null 2>&1; then
    check "gpu_bench.sh smallest configuration on the GPU (status $rc)" [ $rc -eq 0 ]
else
    [ $rc -eq 77 ] && grep -q "no NVIDIA GPU" "$ERR"
    check "gpu_bench.sh without a GPU: status 77 and says why" [ $? -eq 0 ]
fi
"$S/tests/bench/gpu_bench.sh" --summarize "$S/doc/bench/h200-2026-11-21.csv" >"$OUT" 2>"$ERR"
check "gpu_bench.sh --summarize: 70 rows of results" [ "$(grep -cE '^ +[0-9]+ (plain|hand|gsrun)' "$OUT")" -eq 70 ]
# Short jobs' benchmark: without a GPU it says so and exits 77.
if ! nvidia-smi -L >/dev/null 2>&1; then
    "$S/tests/bench/short_jobs.sh" "$B" >"$OUT" 2>"$ERR"
    rc=$?
    check "short_jobs.sh without a GPU: status 77 and says why" \
        eval '[ $rc -eq 77 ] && grep -q "SKIP no NVIDIA GPU" "$OUT"'
fi
# The real-application benches check their arguments before building anything.
"$S/tests/bench/lammps.sh" --src "$TEST_TMP/none" --build "$B" --gpus 0 >"$OUT" 2>"$ERR"
rc=$?
check "lammps.sh --gpus 0: status 2 (status $rc), names the option" \
    eval '[ $rc -eq 2 ] && grep -q "^lammps.sh: --gpus 0: give a count of GPUs" "$ERR"'
"$S/tests/bench/cloverleaf.sh" --src "$TEST_TMP/none" --build "$B" --gpus x >"$OUT" 2>"$ERR"
rc=$?
check "cloverleaf.sh --gpus x: status 2 (status $rc), names the option" \
    eval '[ $rc -eq 2 ] && grep -q "^cloverleaf.sh: --gpus x: give a count of GPUs" "$ERR"'
# Many ranks over four (fake) GPUs: the floor's hand-started daemons, gsrun
# with each kill, plain; a shell rank that prints the probe's line and stays.
printf '%s\n' '#!/bin/sh' \
    'echo "rank $OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE: mps=$([ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && echo 1 || echo 0)"' \
    'while :; do sleep 1; done' >"$TEST_TMP/holdrank"
chmod +x "$TEST_TMP/holdrank"
LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=4 \
    "$S/tests/bench/many_ranks.sh" --build "$B" --np 12 --gpus 4 --clients-per-server 2 \
    --prog "$TEST_TMP/holdrank" --control "$FAKE_CONTROL" --gsrun-args "--mps-control=$FAKE_CONTROL" \
    --kill "gsrun mpirun agent rank" >"$OUT" 2>"$ERR"
rc=$?
check "many_ranks.sh on 4 fake GPUs: every case and kill (status $rc)" \
    eval '[ $rc -eq 0 ] && grep -q "^6 passed, 0 failed$" "$OUT"' || diag "$OUT" "$ERR"
check "  ... the floor deals 12 ranks over 8 hand-started daemons" grep -q "^# floor: 8 daemons with a server each (2 a GPU)$" "$OUT"
check "  ... each run says when its ranks started and when all was gone" \
    [ "$(grep -cE "run 1: 12 of 12 ranks \(mps=[01]\) started in [0-9.]+ s; SIGKILL: .* all after [0-9]+ ms$" "$OUT")" -eq 6 ]
if command -v gnuplot >/dev/null; then
    "$S/tests/bench/plot_scaling.sh" "$S/doc/bench/h100-2026-11-25-lammps-lj.csv" "$TEST_TMP/lj.svg" "t" "x" >"$OUT" 2>"$ERR"
    check "plot_scaling.sh draws the four configs of the committed LAMMPS rows" \
        [ "$(grep -cE 'plain mpirun|default share|percentage=off|percentage=25' "$TEST_TMP/lj.svg")" -ge 4 ]
fi
check_clean "benchmark"
finish
