#!/bin/bash
# The launch-overhead benchmark's smallest configuration, as a smoke test.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
"$S/tests/bench/launch_overhead.sh" --build "$B" --np 2 --pairs 1 >"$OUT" 2>"$ERR"
rc=$?
check "launch_overhead.sh runs (status $rc)" [ $rc -eq 0 ]
check "  ... and prints the median overheads" grep -q "^median overhead" "$OUT"
[ $rc -eq 0 ] || diag "$ERR"
check_clean "benchmark"
finish
