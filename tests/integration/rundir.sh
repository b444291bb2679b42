#!/bin/bash
# Unsafe or unusable places for the run directory are refused up front.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"
real_tmp=$TMPDIR

ln -s "$real_tmp" "$TEST_TMP/link"
TMPDIR=$TEST_TMP/link gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
[ $rc -eq 71 ] && grep -q "symbolic link" "$ERR"
check "TMPDIR is a symlink: status 71 with a message" [ $? -eq 0 ]

mkdir -m 777 "$TEST_TMP/open" && chmod 777 "$TEST_TMP/open"
TMPDIR=$TEST_TMP/open gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
[ $rc -eq 71 ] && grep -q "writable by others" "$ERR"
check "TMPDIR writable by all and not sticky: status 71" [ $? -eq 0 ]
check "  ... nothing created there" [ -z "$(ls -A "$TEST_TMP/open")" ]

if [ "$(id -u)" = 0 ]; then
    mkdir "$TEST_TMP/theirs" && chown 65534:65534 "$TEST_TMP/theirs"
    TMPDIR=$TEST_TMP/theirs gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
    rc=$?
    [ $rc -eq 71 ] && grep -q "owned by uid 65534" "$ERR"
    check "TMPDIR owned by another user: status 71" [ $? -eq 0 ]
else
    ok "# SKIP TMPDIR owned by another user (needs root to set up)"
fi

# A TMPDIR so long that MPS's sockets would not fit in 108 bytes.
long=$real_tmp/$(printf 'd%.0s' $(seq 60))
mkdir -p "$long"
TMPDIR=$long gsrun_fake 1 --mps=on -np 2 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "TMPDIR too long for MPS sockets, --mps=on: status 70" [ $rc -eq 70 ]
check "  ... and the message says to shorten TMPDIR" grep -q "set TMPDIR to a shorter directory" "$ERR"
TMPDIR=$long gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
[ $? -eq 0 ] && [ "$(grep -c 'mps=0 ' "$OUT")" -eq 2 ]
check "  ... with --mps=auto the job runs without MPS" [ $? -eq 0 ]
rmdir "$long"
check_clean "run directories"
finish
