# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers for the integration tests (TAP output).
#
# Each test gets its own TMPDIR, so that at the end it can check that no
# run directory of its jobs is left; and it checks that no process of its
# jobs (fake MPS daemons and servers, node agents) is still alive.
set -u
B=${GS_TOP_BUILDDIR:?run through make check}
S=${GS_TOP_SRCDIR:?run through make check}
GSRUN=$B/launcher/gsrun
FAKE_CONTROL=$B/tests/fake/nvidia-cuda-mps-control
FAKE_LIB=$B/tests/fake
PROG=$B/tests/progs/rank_report
T_N=0
T_FAIL=0

# mpirun refuses root unless told, as on CI; no shared-memory CMA in containers.
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# The same for Open MPI 5 (PRRTE), whose names differ; each version ignores
# the other's. One node: no TCP pairing warnings from interfaces of others.
export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe OMPI_MCA_btl_tcp_if_include=lo
# The suites check a job's own MPS servers (--mps-share=job): what each job
# starts, reports and ends. The default (auto: the user's jobs share) has
# its own tests, share.sh and pack.sh, which set it themselves.
export GSRUN_MPS_SHARE=job OMPI_MCA_rtc_gsrun_mps_share=job
# Those that share check that nothing is left after each job: the shared
# servers' default linger (auto: 60 s) would keep them. service.sh checks
# the default itself.
export GSRUN_MPS_LINGER=0 OMPI_MCA_rtc_gsrun_mps_linger=0
unset GSRUN_MPS GSRUN_MPS_PERCENTAGE GSRUN_MPS_CONTROL GSRUN_MPS_TIMEOUT GSRUN_LAUNCHER \
    GSRUN_DRY_RUN GSRUN_VERBOSE CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY \
    CUDA_MPS_LOG_DIRECTORY CUDA_MPS_ACTIVE_THREAD_PERCENTAGE

TEST_TMP=$(mktemp -d "/tmp/gst.XXXXXX")
chmod 700 "$TEST_TMP"
export TMPDIR=$TEST_TMP/tmp
mkdir -p "$TMPDIR" "$TEST_TMP/ompi"
# Open MPI's own session files go elsewhere, so TMPDIR shows only gsrun's.
export OMPI_MCA_orte_tmpdir_base=$TEST_TMP/ompi PRTE_MCA_prte_tmpdir_base=$TEST_TMP/ompi
# Open MPI 4's user session dir made once for all the test's jobs: two
# mpiruns that start at once where it is missing race to make it, and the
# loser fails in orte_init ("A call to mkdir was unable to create the desired
# directory: .../ompi.vm.0, File exists": seen in share.sh under make -j2).
# Every mpirun removes it at its end when it is empty: a subdirectory keeps it.
mkdir -p "$TEST_TMP/ompi/ompi.$(uname -n).$(id -u)/keep"
# So do its shared-memory segments, which ranks killed by a test leave
# behind (as under plain mpirun); the soak test counts /dev/shm itself.
export OMPI_MCA_btl_vader_backing_directory=$TEST_TMP/ompi OMPI_MCA_btl_sm_backing_directory=$TEST_TMP/ompi
# Every process of this test's jobs inherits this marker, so the leak check
# sees only them even while other tests run at the same time.
export GS_TEST_MARK=$TEST_TMP
# A root prolog gives the job's agent a clean environment: the fakes' knobs
# and the mark that finds leftovers must pass (a site's setting, used here).
export GSRUN_AGENT_ENV='FAKE_*,GS_TEST_MARK'
OUT=$TEST_TMP/out
ERR=$TEST_TMP/err

ok() {
    T_N=$((T_N + 1))
    echo "ok $T_N - $*"
}
not_ok() {
    T_N=$((T_N + 1))
    T_FAIL=$((T_FAIL + 1))
    echo "not ok $T_N - $*"
}
check() { # check "description" command...: one test; returns the command's
    local d=$1    # verdict, so that `check ... || diag FILE` shows why it failed
    shift
    if "$@"; then ok "$d"; else not_ok "$d"; return 1; fi
}
diag() { sed 's/^/# /' "$@"; }

# Runs gsrun with the fake MPS control program and fake NVML (N GPUs).
gsrun_fake() { # gsrun_fake NGPUS args...
    local n=$1
    shift
    LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=$n \
        "$GSRUN" --mps-control="$FAKE_CONTROL" "$@"
}

# The same, replacing the calling (sub)shell: for `gsrun_fake_exec ... &`,
# where $! must be gsrun itself so that signals reach it.
gsrun_fake_exec() {
    local n=$1
    shift
    LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=$n \
        exec "$GSRUN" --mps-control="$FAKE_CONTROL" "$@"
}

# A one-rank job through the rank prefix, as any launcher would start it
# (light: no mpirun), on the fake NVML, in the background; its line in
# $OUT.NAME, its status in $OUT.NAME.rc, the daemons it starts in $REC:
#   light NAME NGPUS SECONDS [VAR=value...]
light() {
    local name=$1 n=$2 s=$3
    shift 3
    (env GSRUN_LOCAL_RANK=0 GSRUN_LOCAL_SIZE=1 GSRUN_JOB_KEY="pack-$name" \
        LD_LIBRARY_PATH="$FAKE_LIB" FAKE_NVML_GPUS="$n" GSRUN_MPS_CONTROL="$FAKE_CONTROL" \
        FAKE_MPS_RECORD="${REC:-/dev/null}" "$@" "$GSRUN" exec -- \
        sh -c 'echo "uuid=$GSRUN_GPU_UUID mps=$GSRUN_MPS_ACTIVE pipe=$CUDA_MPS_PIPE_DIRECTORY"; sleep '"$s" \
        >"$OUT.$name" 2>"$ERR.$name"
    echo $? >"$OUT.$name.rc") &
}
# Each fake GPU's ranks in the given outputs: "n0 n1 ..." for NGPUS GPUs.
per_gpu() { # per_gpu NGPUS files...
    local n=$1 i c out=""
    shift
    for ((i = 0; i < n; i++)); do
        c=$(cat "$@" | grep -c "uuid=GPU-fa4e0000-0000-4000-8000-$(printf '%012x' $i)\b")
        out="$out${out:+ }$c"
    done
    echo "$out"
}

# Processes of this build's fake daemons or agents still alive (not zombies);
# LEFTOVER_EXES may name one more program. Shell builtins only: a command run
# per process made one pass over /proc take seconds on a loaded 2-core machine
# with thousands of processes (a fork bomb's zombies under PID 1), long enough
# for a job to start and end between two passes.
leftover_procs() {
    local p e v
    local exes=("$FAKE_CONTROL" "$B/launcher/gsrun-agent" "$B/launcher/gsrun-shim" "$GSRUN" "$PROG"
        "${LEFTOVER_EXES:-$PROG}")
    for p in /proc/[0-9]*; do
        for e in "${exes[@]}"; do
            [ "$p/exe" -ef "$e" ] || continue
            while IFS= read -r -d '' v; do
                [ "$v" = "GS_TEST_MARK=$TEST_TMP" ] && echo "${p#/proc/}" && break
            done 2>/dev/null <"$p/environ"
            break
        done
    done
}

# Asserts that nothing of the jobs run so far is left.
# What the jobs left in TMPDIR. A user's private base stays by design
# (gsrun exec's dirs, the shared MPS and the placement record go in it);
# empty, it is nothing left behind.
run_files() {
    rmdir "$TMPDIR"/gsrun-[0-9]* 2>/dev/null
    ls -A "$TMPDIR"
}

check_clean() { # check_clean "context"
    local procs files
    procs=$(leftover_procs | tr '\n' ' ')
    files=$(run_files)
    if [ -z "$procs" ] && [ -z "$files" ]; then
        ok "$1: no process and no run directory left"
    else
        not_ok "$1: left behind: processes [$procs] files [$files]"
        [ -n "$procs" ] && kill -9 $procs 2>/dev/null
        rm -rf "${TMPDIR:?}"/*
    fi
}

# A gsrun job on the fakes in the background: bg_job NAME NGPUS args...
# (its output in $OUT.NAME and $ERR.NAME, its status in $OUT.NAME.rc once
# it has ended).
bg_job() {
    local n=$1 g=$2
    shift 2
    rm -f "$OUT.$n.rc"
    (
        gsrun_fake "$g" "$@" >"$OUT.$n" 2>"$ERR.$n"
        echo $? >"$OUT.$n.rc"
    ) &
}
# Until FILE has COUNT lines matching PATTERN (SECONDS at most, 10 unless
# given): wait_for FILE PATTERN COUNT [SECONDS].
wait_for() {
    local c i
    for ((i = 0; i < ${4:-10} * 20; i++)); do
        c=$(grep -c -- "$2" "$1" 2>/dev/null)
        [ "${c:-0}" -ge "$3" ] && return 0
        sleep 0.05
    done
    return 1
}

# Polls `gsrun status` into FILE until PATTERN shows (5 s at most).
wait_status() { # wait_status FILE PATTERN
    for _ in $(seq 100); do
        "$GSRUN" status >"$1" 2>&1
        grep -q "$2" "$1" && return 0
        sleep 0.05
    done
    return 1
}

finish() {
    rm -rf "$TEST_TMP"
    echo "1..$T_N"
    [ "$T_FAIL" -eq 0 ]
    exit $?
}
