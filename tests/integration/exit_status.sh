#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: launcher/supervise.c, launcher/reports.c, ompi/shim.c, runtime/agent/ranks.c
# The job's exit status comes through exactly as plain mpirun reports it,
# and MPS is torn down whatever the ranks did.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

status_of() { "$@" >"$OUT" 2>"$ERR"; echo $?; }

for args in "" "--exit 1 3" "--exit 0 66" "--kill 1" "--segv 2"; do
    # shellcheck disable=SC2086
    plain=$(status_of mpirun -np 4 "$PROG" $args)
    # shellcheck disable=SC2086
    gs=$(status_of gsrun_fake 1 -np 4 "$PROG" $args)
    # shellcheck disable=SC2086
    gsoff=$(status_of "$GSRUN" --mps=off -np 4 "$PROG" $args)
    [ "$gs" = "$plain" ] && [ "$gsoff" = "$plain" ]
    check "rank_report ${args:-(all succeed)}: gsrun $gs, gsrun --mps=off $gsoff, mpirun $plain" [ $? -eq 0 ]
    check_clean "rank_report ${args:-ok}"
done
# A program no rank can run: a directory (mpirun's own check passes it, the
# exec fails), a file without the execute bit, a missing one.
touch "$TEST_TMP/noexec"
for what in dir noexec missing; do
    prog=$TEST_TMP/$what
    [ $what = dir ] && prog=$TEST_TMP
    plain=$(status_of mpirun -np 2 "$prog")
    gs=$(status_of gsrun_fake 1 -np 2 "$prog")
    if [ $what = dir ] && ! mpirun --version 2>&1 | grep -q "Open MPI) 4"; then
        # Open MPI 5's prterun ends such a job 141; gsrun-shim has no
        # status of prterun's to give (doc/openmpi.md).
        ok "# SKIP a program that is $what under $(mpirun --version 2>&1 | head -1): gsrun $gs, mpirun $plain"
    else
        check "a program that is $what: gsrun $gs, mpirun $plain" [ "$gs" = "$plain" ]
    fi
    check_clean "a program that cannot run"
done
# Output of every rank comes through, stdout and stderr apart.
gsrun_fake 1 -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "all 4 ranks' output on stdout" [ "$(grep -c '^rank=' "$OUT")" -eq 4 ]
check "nothing on stderr" [ ! -s "$ERR" ]
check_clean "output"
finish
