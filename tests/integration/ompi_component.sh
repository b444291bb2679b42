#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: ompi/rtc_gsrun.c, runtime/rank/node.c, runtime/rank/task.c
# The Open MPI 4 component (mca_rtc_gsrun): plain mpirun, no gsrun in front,
# stand-in MPS daemon and NVML. TAP output.
#   GS_RTC_DIR    the directory holding mca_rtc_gsrun.so (default: the build's)
#   GS_RTC_AGENT  the gsrun-agent it runs (default: the build's, passed as
#                 rtc_gsrun_agent; with GS_RTC_INSTALLED=1 not passed: the
#                 component must find its installed one itself)
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

RTC_DIR=${GS_RTC_DIR:-$B/ompi/mca}
RTC_AGENT=${GS_RTC_AGENT:-$B/launcher/gsrun-agent}
if [ ! -f "$RTC_DIR/mca_rtc_gsrun.so" ]; then
    echo "1..0 # SKIP the Open MPI component was not built (configure found no ORTE headers)"
    rm -rf "$TEST_TMP"
    exit 0
fi
LEFTOVER_EXES=$RTC_AGENT
export LD_LIBRARY_PATH=$FAKE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1
RTC="--mca mca_base_component_path SYS_DEFAULT:$RTC_DIR"
[ -n "${GS_RTC_INSTALLED:-}" ] || RTC="$RTC --mca rtc_gsrun_agent $RTC_AGENT"
FAKE="--mca rtc_gsrun_mps_control $FAKE_CONTROL"
MPIX="-x LD_LIBRARY_PATH -x FAKE_NVML_GPUS"

rtc_run() { # rtc_run MPIRUN-ARGS...: plain mpirun with the component, output in $OUT/$ERR
    # shellcheck disable=SC2086
    mpirun $RTC $FAKE $MPIX "$@" >"$OUT" 2>"$ERR"
}

# --- several MPS servers on the GPU (2 clients each: 5 ranks, 3 servers) -------
rtc_run --mca rtc_gsrun_verbose 1 --mca rtc_gsrun_mps_clients_per_server 2 -np 5 "$PROG" --mps-client
rc=$?
check "5 ranks, rtc_gsrun_mps_clients_per_server=2: status 0, every rank a client" \
    [ $rc -eq 0 -a "$(grep -c 'client=ok' "$OUT")" -eq 5 ] || diag "$ERR"
check "  ... three servers, blocks 0, 1-2, 3-4" \
    [ "$(grep -c 'GPU 0 server [0-2] (GPU-[^)]*): local ranks \(0\|1-2\|3-4\)$' "$ERR")" -eq 3 ] || diag "$ERR"
check_clean "the component, three servers"

# --- 4 and 16 ranks, one GPU ---------------------------------------------------
for n in 4 16; do
    rtc_run --mca rtc_gsrun_verbose 1 -np $n "$PROG" --check-control
    rc=$?
    pct=$(awk -v n=$n 'BEGIN { p = 200 / n; if (p > 100) p = 100; printf "%g", p }')
    check "$n ranks: status 0" [ $rc -eq 0 ]
    check "  ... every rank under MPS at $pct%, daemon up before it started" \
        [ "$(grep -c "^rank=.* mps=1 pipe=$TMPDIR/gsrun\.[A-Za-z0-9]*/[^/]*/g0 .* pct=$pct .* control=1 " "$OUT")" -eq $n ]
    check "  ... exactly one MPS control daemon" [ "$(grep -c "MPS control daemon [0-9]* on" "$ERR")" -eq 1 ]
    # (a program without CUDA: the agent says that none used the GPU)
    check "  ... the agent saw all $n ranks" grep -q "no rank of the $n used the GPU .*; stopping MPS: every rank has exited" "$ERR"
    check "  ... it started with mpirun, before the job's ranks (the component's init)" \
        grep -q "MPS ready [0-9]* ms after the agent started, -*[0-9]* ms before the node's first rank came" "$ERR"
    diag "$ERR" | head -3
    # mpirun returns only after the agent cleaned up: nothing to wait for.
    check_clean "$n ranks, right after mpirun returned"
done

# --- mpirun's early agent and a job of another environment --------------------
# A job whose own variables change mpirun's (here CUDA_VISIBLE_DEVICES) gets
# an agent of its own; the early one, started with mpirun's, ends unused.
rtc_run --mca rtc_gsrun_verbose 1 -x CUDA_VISIBLE_DEVICES=0 -np 4 "$PROG"
rc=$?
check "mpirun -x CUDA_VISIBLE_DEVICES=0: status 0, every rank under MPS" \
    eval '[ $rc -eq 0 ] && [ "$(grep -c "^rank=.* mps=1 .* pct=50 " "$OUT")" -eq 4 ]' || diag "$ERR"
check "  ... by an agent of the job's own (not mpirun's early one)" \
    eval 'grep -q "MPS ready for the ranks [0-9]* ms after the agent started" "$ERR" &&
        [ "$(grep -c "no rank of the 4 used the GPU" "$ERR")" -eq 1 ]'
check_clean "a job of another environment"
# mpirun fails before any job: its early agent ends with it.
mpirun $RTC $FAKE -np 2 "$TEST_TMP/no-such-program" >"$OUT" 2>"$ERR"
rc=$?
check "mpirun of a missing program: status $rc (non-zero), no gsrun line" \
    eval '[ $rc -ne 0 ] && ! grep -q "^gsrun" "$ERR"' || diag "$ERR"
# The early agent sees mpirun's end and then ends: a moment after mpirun
# (2 processes still there once, at a load average of 146 beside endjob.sh's
# fork bomb), never much later.
for _ in $(seq 100); do
    [ -z "$(leftover_procs)" ] && break
    sleep 0.05
done
check_clean "mpirun failing before its job (5 s allowed for the early agent's end)"

# --- 4 GPUs on 2 NUMA nodes, bound ranks -----------------------------------------
# ORTE starts a rank only when the one before has exec'd: the agent must not
# wait for all of them (it places in blocks here), nor hang.
t0=$(date +%s%N)
FAKE_NVML_GPUS=4 FAKE_NVML_NEAR_CPUS="0;0;1;1" rtc_run -x FAKE_NVML_NEAR_CPUS --mca rtc_gsrun_gpu_bind closest \
    --mca rtc_gsrun_mps_memory_limit 1G -np 8 --bind-to core:overload-allowed --map-by core "$PROG"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 0 ] && [ $ms -lt 10000 ]
check "4 GPUs, 8 bound ranks: status 0 in ${ms} ms (no wait for placement)" [ $? -eq 0 ]
[ "$(grep -c 'mps=1 .*pct=100 .*gpuranks=2 .*memlimit=0=1024MB ' "$OUT")" -eq 8 ] &&
    [ "$(grep -o 'uuid=[^ ]*' "$OUT" | sort -u | wc -l)" -eq 4 ]
check "  ... blocks of 2 per GPU at 100 %, memory limit 1024 MiB each" [ $? -eq 0 ]
check_clean "4 GPUs"
rtc_run --mca rtc_gsrun_mps_memory_limit lots -np 2 "$PROG"
[ $? -eq 2 ] && grep -q "MCA parameter rtc_gsrun_mps_memory_limit: invalid value 'lots'" "$ERR"
check "rtc_gsrun_mps_memory_limit=lots: status 2 naming the parameter" [ $? -eq 0 ]
check_clean "bad memory limit"
# Set empty (Open MPI keeps that as no value): refused as --mps-linger=''
# and GSRUN_MPS_LINGER='' are, not taken as the default (60 s).
OMPI_MCA_rtc_gsrun_mps_linger= rtc_run -np 2 "$PROG"
[ $? -eq 2 ] && grep -q "MCA parameter rtc_gsrun_mps_linger: empty value; accepted: " "$ERR"
check "OMPI_MCA_rtc_gsrun_mps_linger set empty: status 2 naming the parameter" [ $? -eq 0 ] || diag "$ERR"
rtc_run --mca rtc_gsrun_mps_share '' -np 2 "$PROG"
[ $? -eq 2 ] && grep -q "MCA parameter rtc_gsrun_mps_share: empty value; accepted: " "$ERR"
check "  ... and --mca rtc_gsrun_mps_share '': the same" [ $? -eq 0 ] || diag "$ERR"
check_clean "empty values"

rtc_run -np 4 "$PROG"
check "without rtc_gsrun_verbose: no gsrun line" [ $? -eq 0 -a ! -s "$ERR" ]
check_clean "quiet"

# --- MPS off or not needed: the component stays out of the way ------------------
rtc_run --mca rtc_gsrun_mps off -np 4 "$PROG"
check "rtc_gsrun_mps=off: status 0, no MPS variable, no gsrun line" \
    [ $? -eq 0 -a "$(grep -c ' mps=- pipe=- ' "$OUT")" -eq 4 -a ! -s "$ERR" ]
check_clean "off"
rtc_run --mca rtc_gsrun_verbose 1 -np 1 "$PROG"
[ $? -eq 0 -a "$(grep -c ' mps=0 ' "$OUT")" -eq 1 ] && grep -q "MPS off" "$ERR"
check "auto, 1 rank on 1 GPU: MPS off and why" [ $? -eq 0 ]
check_clean "one rank"

# --- exit status, output and signals as with plain mpirun ------------------------
for args in "--exit 1 3" "--kill 2" "--segv 3"; do
    # shellcheck disable=SC2086
    mpirun -np 4 "$PROG" $args >/dev/null 2>&1
    plain=$?
    # shellcheck disable=SC2086
    rtc_run -np 4 "$PROG" $args
    rc=$?
    check "rank_report $args: status $rc, plain mpirun $plain" [ $rc -eq $plain -a $rc -ne 0 ]
    check_clean "$args"
done

# --- bad settings ------------------------------------------------------------------
rtc_run --mca rtc_gsrun_mps sometimes -np 4 "$PROG"
rc=$?
check "rtc_gsrun_mps=sometimes: status 2 ($rc)" [ $rc -eq 2 ]
check "  ... the message names the parameter and what it accepts" \
    grep -q "error: MCA parameter rtc_gsrun_mps: .*auto, on or off" "$ERR"
check "  ... no rank ran" [ ! -s "$OUT" ]
diag "$ERR" | head -2
check_clean "bad rtc_gsrun_mps"
# shellcheck disable=SC2086
mpirun $RTC $MPIX --mca rtc_gsrun_mps on --mca rtc_gsrun_mps_control /nonexistent/mps-control \
    -np 2 "$PROG" >"$OUT" 2>"$ERR"
rc=$?
check "rtc_gsrun_mps=on with a missing control program: status $rc, not 0" [ $rc -ne 0 ]
check "  ... the message names it and the parameter" \
    grep -q "error: rtc_gsrun_mps=on: .*'/nonexistent/mps-control' does not exist" "$ERR"
diag "$ERR" | head -1
check_clean "missing control"

# --- gsrun in front: gsrun's shim provisions, the component stays out ---------------
# shellcheck disable=SC2086
LD_LIBRARY_PATH=$LD_LIBRARY_PATH "$GSRUN" -v --mps-control="$FAKE_CONTROL" $RTC $FAKE -np 4 "$PROG" >"$OUT" 2>"$ERR"
check "gsrun with the component loaded: status 0, 4 ranks under MPS" \
    [ $? -eq 0 -a "$(grep -c ' mps=1 ' "$OUT")" -eq 4 ]
check "  ... one MPS control daemon in all" [ "$(grep -c "MPS control daemon [0-9]* on" "$ERR")" -eq 1 ]
check_clean "under gsrun"

# --- the job ends whole ----------------------------------------------------------------
# shellcheck disable=SC2086
mpirun $RTC $FAKE $MPIX -np 4 "$PROG" --sleep 30000 >"$OUT" 2>"$ERR" &
job=$!
for _ in $(seq 100); do [ "$(grep -c '^rank=' "$OUT")" -eq 4 ] && break; sleep 0.1; done
t0=$(date +%s%N)
kill -KILL $job
wait $job 2>/dev/null
for _ in $(seq 100); do [ -z "$(leftover_procs)" ] && [ -z "$(run_files)" ] && break; sleep 0.02; done
ms=$((($(date +%s%N) - t0) / 1000000))
check "SIGKILL of mpirun: ranks, agent, daemon and run dir gone after $ms ms (at most 2000)" \
    [ $ms -le 2000 -a -z "$(leftover_procs)" -a -z "$(run_files)" ]
check_clean "SIGKILL of mpirun"
# --mps-share=node (issue 38): a component job joins a gsrun job's servers.
rm -f "$TEST_TMP/share.rec"
FAKE_MPS_RECORD=$TEST_TMP/share.rec gsrun_fake 1 --mps-share=node -np 2 "$PROG" --sleep 3000 \
    >"$OUT.g" 2>"$ERR.g" &
g=$!
FAKE_MPS_RECORD=$TEST_TMP/share.rec rtc_run --mca rtc_gsrun_mps_share node -np 3 "$PROG" --sleep 3000
rc=$?
wait $g
rcg=$?
check "the component (rtc_gsrun_mps_share=node) beside a gsrun job: both 0, one daemon, one pipe dir" \
    [ $rc -eq 0 -a $rcg -eq 0 -a "$(grep -c '^start ' "$TEST_TMP/share.rec")" -eq 1 -a \
        "$(cat "$OUT" "$OUT.g" | grep -c "mps=1 pipe=$TMPDIR/gsrun-$(id -u)/mps-share/")" -eq 5 ] || diag "$ERR"
for _ in $(seq 100); do
    [ ! -d "$TMPDIR/gsrun-$(id -u)/mps-share" ] && break
    sleep 0.05
done
rmdir "$TMPDIR/gsrun-$(id -u)" 2>/dev/null
check_clean "the component sharing"

finish
