#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/plan/policy.c, runtime/rank/task.c, runtime/core/config.c, ompi/shim.c
# What an ordinary user's setup can throw at gsrun: a fork agent of their own,
# a program in the working directory, an odd or full TMPDIR, a closed stderr,
# bad GSRUN_* values. Under --mps=auto the job always runs (without MPS where
# MPS cannot work, with one notice); --mps=on fails with a clear line; the
# job's status is plain mpirun's. Stand-in MPS daemon and NVML.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

# --- F1: the user's own fork agent runs between the shim and the program -------
printf '#!/bin/sh\necho "user fork agent ran for $1" >&2\nexec "$@"\n' >"$TEST_TMP/fa.sh"
chmod +x "$TEST_TMP/fa.sh"
gsrun_fake 1 --mca orte_fork_agent "$TEST_TMP/fa.sh" -np 2 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "a fork agent of the user's (--mca orte_fork_agent): status $rc (0), it ran for both ranks" \
    [ $rc -eq 0 -a "$(grep -c "user fork agent ran for $PROG" "$ERR")" -eq 2 ] || diag "$ERR"
check "  ... and the ranks are still under MPS" [ "$(grep -c '^rank=.* mps=1 ' "$OUT")" -eq 2 ]
OMPI_MCA_orte_fork_agent=$TEST_TMP/fa.sh gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "  ... the same from OMPI_MCA_orte_fork_agent" [ "$(grep -c "user fork agent ran" "$ERR")" -eq 2 ]
gsrun_fake 1 --mca orte_fork_agent /nonexistent/agent -np 2 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "a fork agent that does not exist: status $rc (not 0), named" eval \
    '[ $rc -ne 0 ] && grep -q "cannot run ./nonexistent/agent.: No such file" "$ERR"' || diag "$ERR"
check_clean "fork agents"

# --- F2: a bare program name found in the working directory, as mpirun does -----
mkdir "$TEST_TMP/wd" && cp "$PROG" "$TEST_TMP/wd/myprog"
(cd "$TEST_TMP/wd" && mpirun -np 2 myprog >/dev/null 2>&1)
prc=$?
(cd "$TEST_TMP/wd" && gsrun_fake 1 -np 2 myprog >"$OUT" 2>"$ERR")
rc=$?
# (Open MPI 4 finds it there; if this mpirun does not, gsrun must not either.)
check "a program in the working directory by its bare name: status $rc, as plain mpirun ($prc)" \
    [ $rc -eq $prc ] || diag "$ERR"
if [ $prc -eq 0 ]; then
    check "  ... both ranks ran, under MPS" [ "$(grep -c '^rank=.* mps=1 ' "$OUT")" -eq 2 ] || diag "$ERR"
fi
check_clean "program in the working directory"

# --- F3/F4/F5: no usable run directory: auto runs without MPS, on fails --------
tmp_case() { # tmp_case WHAT DIR PATTERN: the job with TMPDIR=DIR
    local what=$1 dir=$2 pat=$3 rc t0 ms
    t0=$(date +%s%N)
    TMPDIR=$dir gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    check "$what, auto: status $rc (0) after $ms ms, both ranks ran without MPS" \
        [ $rc -eq 0 -a "$(grep -c '^rank=.* mps=- ' "$OUT")" -eq 2 -a $ms -lt 10000 ] || diag "$ERR"
    check "  ... one notice that names the cause" \
        [ "$(grep -c "warning: .*$pat.*; running without MPS" "$ERR")" -eq 1 ] || diag "$ERR"
    TMPDIR=$dir gsrun_fake 1 --mps=on -np 2 "$PROG" >"$OUT" 2>"$ERR"
    rc=$?
    check "  ... --mps=on: status $rc (71), no rank ran" [ $rc -eq 71 -a ! -s "$OUT" ] || diag "$ERR"
    check "  ... nothing left in it" [ -z "$(ls -A "$dir" | grep gsrun)" ]
}
long=$TEST_TMP/$(printf 'd%.0s' $(seq 80))
mkdir -p "$long"
tmp_case "TMPDIR of $((${#long})) characters" "$long" "too long for MPS's unix sockets"
nl="$TEST_TMP/new
line"
mkdir -p "$nl"
tmp_case "TMPDIR with a newline" "$nl" "control character"
if [ "$(id -u)" = 0 ] && mkdir "$TEST_TMP/full" && mount -t tmpfs -o size=64k,mode=1777 tmpfs "$TEST_TMP/full"; then
    dd if=/dev/zero of="$TEST_TMP/full/fill" bs=4k count=64 2>/dev/null
    tmp_case "a full TMPDIR" "$TEST_TMP/full" "No space left on device"
    umount "$TEST_TMP/full"
fi
check_clean "unusable TMPDIRs"

# Another node of a gsrun job: the job dir's name (gsrun.XXXXXX, from gsrun's
# node) taken there by another user first. The shim, as that node's first
# rank, runs the program without MPS and says why; nothing is used or removed.
if [ "$(id -u)" = 0 ]; then
    mkdir -m 1777 "$TEST_TMP/node2" && chmod 755 "$TEST_TMP"
    setpriv --reuid=65534 --regid=65534 --clear-groups mkdir -m 777 "$TEST_TMP/node2/gsrun.Ab12Cd"
    shim_env() {
        env TMPDIR="$TEST_TMP/node2" GSRUN_JOB_DIR=/tmp/gsrun.Ab12Cd GSRUN_NODE_ID=another-node \
            GSRUN_MPS="$1" OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=2 GSRUN_DISCOVERY=env \
            LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 GSRUN_MPS_CONTROL=$FAKE_CONTROL \
            "$B/launcher/gsrun-shim" sh -c 'echo "active=${GSRUN_MPS_ACTIVE:-unset} pipe=${CUDA_MPS_PIPE_DIRECTORY:-unset}"'
    }
    shim_env auto >"$OUT" 2>"$ERR"
    rc=$?
    check "another node's job dir name taken by another user, auto: status $rc (0), the rank runs without MPS" \
        eval '[ $rc -eq 0 ] && grep -qx "active=0 pipe=unset" "$OUT" &&
              grep -q "owned by uid 65534.*running without MPS" "$ERR"' || diag "$OUT" "$ERR"
    shim_env on >"$OUT" 2>"$ERR"
    check "  ... --mps=on: status 71, the program does not run" [ $? -eq 71 -a ! -s "$OUT" ] || diag "$ERR"
    check "  ... the planted dir is left alone, nothing else made" \
        [ "$(stat -c %u "$TEST_TMP/node2/gsrun.Ab12Cd")" = 65534 -a "$(ls -A "$TEST_TMP/node2" | wc -l)" -eq 1 ]
    rm -rf "$TEST_TMP/node2"
fi

# --- F6: stderr closed early (gsrun -v ... | head -1) ----------------------------
# gsrun must not die of SIGPIPE before it has waited for the job and removed
# its run dir. (Its status is mpirun's, which may itself die of SIGPIPE when
# it writes after the reader left: 0 or 141, by timing, as with plain mpirun.)
for _ in 1 2 3; do
    gsrun_fake 1 -v -np 4 "$PROG" 2>&1 | head -1 >/dev/null
    echo "${PIPESTATUS[0]}" >>"$TEST_TMP/f6"
done
check "gsrun -v ... | head -1, 3 times (status $(tr '\n' ' ' <"$TEST_TMP/f6")): mpirun's status" \
    [ -z "$(grep -vx -e 0 -e 141 "$TEST_TMP/f6")" ]
check_clean "a reader that went away"

# --- bad GSRUN_* values and where values came from ------------------------------
GSRUN_MPS=bogus "$GSRUN" --help >"$OUT" 2>"$ERR"
check "GSRUN_MPS=bogus gsrun --help: the help, status 0" [ $? -eq 0 -a -s "$OUT" ]
GSRUN_DISCOVERY=junk gsrun_fake 1 -np 2 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "GSRUN_DISCOVERY=junk: status $rc (2), one line, no rank ran" \
    [ $rc -eq 2 -a "$(wc -l <"$ERR")" -eq 1 -a ! -s "$OUT" ] || diag "$ERR"
GSRUN_LAUNCHER=/nonexistent/mpirun "$GSRUN" -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "GSRUN_LAUNCHER wrong: the message names GSRUN_LAUNCHER" grep -q "^gsrun: GSRUN_LAUNCHER: " "$ERR" ||
    diag "$ERR"
GSRUN_MPS_CONTROL=/nonexistent/ctl "$GSRUN" -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "GSRUN_MPS_CONTROL wrong: the message names GSRUN_MPS_CONTROL" \
    grep -q "^gsrun: GSRUN_MPS_CONTROL: " "$ERR" || diag "$ERR"
LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 "$GSRUN" --mps-control=nvidia-cuda-mps-control-absent -np 1 "$PROG" \
    >"$OUT" 2>"$ERR"
check "one rank, no control program: it runs, and nothing is said (MPS was not needed)" \
    [ $? -eq 0 -a ! -s "$ERR" ] || diag "$ERR"
check_clean "bad values"
finish
