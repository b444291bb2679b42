#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: the size of what the runtime and the front ends hold: no function
# of launcher/, runtime/, ompi/, slurm/ or pmix/ is longer than 100 lines
# (its body, from the line after its opening brace to its closing one), and
# no source file is longer than 600 lines: a longer one holds two things.
# A function is what opens with "{" and closes with "}" in the first
# column (the project's style, .clang-format). TAP output; GS_SIZES_ROOT
# points it at another tree (its own test below).
S=${GS_SIZES_ROOT:-${GS_TOP_SRCDIR:?run through make check}}
FN_MAX=100 FILE_MAX=600
n=0 bad=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); bad=$((bad + 1)); echo "not ok $n - $*"; }

files=$(cd "$S" && ls launcher/*.[ch] runtime/*/*.[ch] ompi/*.[ch] slurm/*.[ch] pmix/*.[ch] 2>/dev/null)
[ -n "$files" ] || { echo "not ok 1 - no source under $S"; echo "1..1"; exit 1; }
for f in $files; do
    lines=$(wc -l <"$S/$f")
    long=$(awk -v max=$FN_MAX '
        /^\{/ { start = NR; name = prev }
        /^\}/ && start { if (NR - start - 1 > max) printf "%s%s (%d lines)", sep, name, NR - start - 1; sep = "; "; start = 0 }
        { prev = $0 }' "$S/$f" )
    why=""
    [ "$lines" -gt $FILE_MAX ] && why="$lines lines (at most $FILE_MAX: split it by what it holds);"
    [ -n "$long" ] && why="$why functions over $FN_MAX lines: $long"
    if [ -z "$why" ]; then ok "$f ($lines lines)"; else not_ok "$f: $why"; fi
done

# The check itself: a long function planted in a copy fails it.
if [ -z "${GS_SIZES_ROOT:-}" ]; then
    tmp=$(mktemp -d /tmp/gs-sizes.XXXXXX)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/runtime/core"
    { echo "static int f(void)"; echo "{"; for i in $(seq 101); do echo "    (void)$i;"; done
      echo "    return 0;"; echo "}"; } >"$tmp/runtime/core/long.c"
    ! GS_SIZES_ROOT=$tmp bash "$0" >/dev/null 2>&1 &&
        ok "a planted function of 102 lines fails the check" ||
        not_ok "a planted function of 102 lines passes the check"
    { echo "static int f(void)"; echo "{"; for i in $(seq 99); do echo "    (void)$i;"; done
      echo "}"; } >"$tmp/runtime/core/long.c"
    GS_SIZES_ROOT=$tmp bash "$0" >/dev/null 2>&1 &&
        ok "a function of 99 lines passes the check" ||
        not_ok "a function of 99 lines fails the check"
fi
echo "1..$n"
[ $bad -eq 0 ]
