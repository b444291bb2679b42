#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: tests/bench/launch_overhead.sh
# The launch-overhead benchmark's smallest configuration, as a smoke test.
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
check_clean "benchmark"
finish
