#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/files/rundir.c, runtime/files/preflight.c
# Unsafe or unusable places for the run directory are refused up front:
# --mps=on fails with 71 and a message; auto runs the job without MPS (as
# plain mpirun would) with one notice that says why. Nothing is created there.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
real_tmp=$TMPDIR

refused() { # refused WHAT DIR PATTERN
    local rc
    PAT=$3
    TMPDIR=$2 gsrun_fake 1 --mps=on -np 2 "$PROG" >"$OUT" 2>"$ERR"
    rc=$?
    check "$1, --mps=on: status $rc (71), the message says why" eval \
        '[ $rc -eq 71 ] && grep -q "$PAT" "$ERR"' || diag "$ERR"
    TMPDIR=$2 gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
    rc=$?
    check "  ... auto: status $rc (0), both ranks ran without MPS, one notice" eval \
        '[ $rc -eq 0 ] && [ "$(grep -c "^rank=.* mps=- " "$OUT")" -eq 2 ] &&
         [ "$(grep -c "$PAT.*running without MPS" "$ERR")" -eq 1 ]' || diag "$ERR"
}

ln -s "$real_tmp" "$TEST_TMP/link"
refused "TMPDIR is a symlink" "$TEST_TMP/link" "symbolic link"

mkdir -m 777 "$TEST_TMP/open" && chmod 777 "$TEST_TMP/open"
refused "TMPDIR writable by all and not sticky" "$TEST_TMP/open" "writable by others"
check "  ... nothing created there" [ -z "$(ls -A "$TEST_TMP/open")" ]

if [ "$(id -u)" = 0 ]; then
    mkdir "$TEST_TMP/theirs" && chown 65534:65534 "$TEST_TMP/theirs"
    refused "TMPDIR owned by another user" "$TEST_TMP/theirs" "owned by uid 65534"
else
    ok "# SKIP TMPDIR owned by another user (needs root to set up)"
fi

# A TMPDIR so long that MPS's sockets would not fit in 108 bytes.
long=$real_tmp/$(printf 'd%.0s' $(seq 60))
mkdir -p "$long"
refused "TMPDIR too long for MPS sockets" "$long" "set TMPDIR to a shorter directory"
check "  ... nothing left there" [ -z "$(ls -A "$long")" ]
rmdir "$long"
check_clean "run directories"
finish
