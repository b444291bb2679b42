#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Counts the individual results of every test in a build tree (the TAP
# driver's .trs files), and the closing lines of the Debian 13 suite
# (ompi5.out) and the packaging suite (packaging.out) where they ran, and
# prints one closing line: N passed, N failed.
dir=${1:-.}
{
    find "$dir" -name '*.trs' -path '*tests*' -not -path '*/_build/sub/*' -exec cat {} + 2>/dev/null
    [ -f "$dir/ompi5.out" ] && tail -1 "$dir/ompi5.out"
    [ -f "$dir/packaging.out" ] && grep -E "^[0-9]+ passed, [0-9]+ failed" "$dir/packaging.out" | tail -1
} |
    awk '
    /^[0-9]+ passed, [0-9]+ failed/ { p += $1; f += $3; if ($5 ~ /^[0-9]+$/) s += $5 }
    /^:test-result: PASS/ { p++ }
    /^:test-result: XFAIL/ { p++ }
    /^:test-result: (FAIL|XPASS|ERROR)/ { f++ }
    /^:test-result: SKIP/ { s++ }
    END {
        printf "%d passed, %d failed, %d skipped\n", p, f, s
        exit (f > 0 || p == 0) ? 1 : 0
    }'
