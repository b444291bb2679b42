#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/job/agent_memory.c, runtime/agent/agent_publish.c, runtime/files/status.c, runtime/files/status_format.c, runtime/files/record.c
# Each rank's GPU memory as NVML lists it (issue 68), with the fake MPS and
# NVML: each rank's context is listed with (rank + 1) x 256 MiB
# (rank_report --gpu-mib), the server's with 66 MiB (FAKE_MPS_SERVER_CTX).
#   1. gsrun status (text and JSON): each rank's figure beside its state,
#      each server's clients and their total, its own memory (own servers,
#      and the user's shared MPS, whose node service lists the GPUs)
#   2. a figure that changes: the status follows it, the peak stays
#   3. the end: each GPU's peak with -v; without -v only near the limit
#   4. a driver without the MPS listing: unknown, never 0
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

export FAKE_NVML_CTX_DIR=$TEST_TMP/ctx FAKE_MPS_SERVER_CTX=1
mkdir -p "$FAKE_NVML_CTX_DIR"

# The JSON's rank objects, one a line: "rank state memory peak".
ranks_json() {
    grep -o '{"rank":[^}]*}' "$1" |
        sed -E 's/.*"rank":([0-9]+).*"state":"([a-z-]+)".*"memory_mib":([0-9a-z]+),"peak_memory_mib":([0-9a-z]+).*/\1 \2 \3 \4/'
}
# gsrun status --json, this test's jobs only (those whose dirs are in its
# TMPDIR), one a line: under make -j other tests' jobs come and go in the
# bases every gsrun status reads (/dev/shm/gsrun-<uid>, /run/gsrun).
status_json() {
    "$GSRUN" status --json 2>&1 | sed 's/{"job":/\n{"job":/g' | grep -F "\"job_dir\":\"$TMPDIR/"
}
# Until gsrun status --json shows PATTERN (10 s at most).
wait_json() { # wait_json FILE PATTERN
    for _ in $(seq 200); do
        status_json >"$1"
        grep -q -- "$2" "$1" && return 0
        sleep 0.05
    done
    return 1
}

# --- 1. the figures while the job runs ---------------------------------------
# What each share's server line says of the memory: the job's own server
# its own memory and its clients'; on the shared MPS the job its clients',
# the node service the server's own (66 MiB).
declare -A SRV_JSON=([job]='"mps_clients":4,"server_memory_mib":66,"clients_memory_mib":2560'
    [node]='"mps_clients":4,"server_memory_mib":null,"clients_memory_mib":2560')
declare -A SRV_TEXT=([job]='MPS clients 4/4; GPU memory: server 66 MiB, its clients 2560 MiB'
    [node]="MPS clients 4/4; GPU memory: the job's clients 2560 MiB")
for share in job node; do
    bg_job m$share 1 --mps-share=$share -v -np 4 "$PROG" --mps-client --gpu-mib 256 --sleep 5000
    wait_json "$OUT.j" '"state":"client","alive":true,"memory_mib":1024'
    wait_json "$OUT.j" "${SRV_JSON[$share]}"
    [ $share = node ] && wait_json "$OUT.j" '"shared":"node".*"server_memory_mib":66'
    check "1. ($share) gsrun status --json: each rank's memory beside its state: $(ranks_json "$OUT.j" | tr '\n' ';')" \
        [ "$(ranks_json "$OUT.j" | tr '\n' ';')" = "0 client 256 256;1 client 512 512;2 client 768 768;3 client 1024 1024;" ] ||
        diag "$OUT.j"
    check "  ... the server's clients and their total, its own memory: $(grep -o '"mps_clients[^}]*' "$OUT.j" | head -1)" \
        grep -q "${SRV_JSON[$share]}" "$OUT.j" || diag "$OUT.j"
    if [ $share = node ]; then
        check "  ... the node service's line has the shared server's own memory (66 MiB)" \
            grep -q '"shared":"node".*"server_memory_mib":66' "$OUT.j" || diag "$OUT.j"
    fi
    check "  ... each rank's GPU in the JSON" \
        eval "[ \"\$(grep -o '\"gpu\":0,\"gpu_uuid\":\"GPU-fa4e0000-0000-4000-8000-000000000000\",\"state\":\"client\"' '$OUT.j' | wc -l)\" = 4 ]" ||
        diag "$OUT.j"
    "$GSRUN" status >"$OUT.t" 2>&1
    check "  ... and the text: $(grep -m1 -o 'GPU memory: .*' "$OUT.t")" \
        eval "grep -qF \"${SRV_TEXT[$share]}\" '$OUT.t' &&
              grep -q '    rank 2 (pid [0-9]*): client, GPU memory 768 MiB, peak 768 MiB' '$OUT.t'" ||
        diag "$OUT.t"
    wait_for "$OUT.m$share.rc" . 1 20
    check "  ... the end (-v): the GPU's peaks, the largest rank named" \
        grep -q "GPU 0 (GPU-fa4e0000-0000-4000-8000-000000000000): the local ranks' peak GPU memory as NVML listed it every 1000 ms: largest 1024 MiB (local rank 3), smallest 256 MiB (local rank 0), of 4 ranks$" "$ERR.m$share" ||
        diag "$ERR.m$share"
    check "  ... the job's status its own ($(cat "$OUT.m$share.rc"))" [ "$(cat "$OUT.m$share.rc")" = 0 ]
    check_clean "1. ($share)"
done

# --- 2. a figure that changes ------------------------------------------------
bg_job c 1 -np 2 "$PROG" --mps-client --gpu-mib 100 --sleep 6000
wait_json "$OUT.j" '"state":"client","alive":true,"memory_mib":200'
pid0=$(grep -o '{"rank":0,"pid":[0-9]*' "$OUT.j" | grep -o '[0-9]*$')
echo "0 mps 4000" >"$FAKE_NVML_CTX_DIR/$pid0"
wait_json "$OUT.j" '"memory_mib":4000'
echo "0 mps 300" >"$FAKE_NVML_CTX_DIR/$pid0"
wait_json "$OUT.j" '"memory_mib":300,'
check "2. rank 0 grew to 4000 MiB, then fell to 300: now 300, peak 4000 ($(ranks_json "$OUT.j" | head -1))" \
    [ "$(ranks_json "$OUT.j" | head -1)" = "0 client 300 4000" ] || diag "$OUT.j"
wait_for "$OUT.c.rc" . 1 20
check "  ... a job without -v says no memory line ($(grep -c 'peak GPU memory' "$ERR.c")), status $(cat "$OUT.c.rc")" \
    [ "$(grep -c 'peak GPU memory' "$ERR.c")" = 0 -a "$(cat "$OUT.c.rc")" = 0 ] || diag "$ERR.c"
check_clean "2."

# --- 3. near the memory limit -------------------------------------------------
gsrun_fake 1 --mps-memory-limit=1100M -np 4 "$PROG" --mps-client --gpu-mib 256 --sleep 2500 \
    >"$OUT.l" 2>"$ERR.l"
rc=$?
check "3. the largest rank's MPS context (1024 MiB) within 10 % of --mps-memory-limit=1100M: said without -v (status $rc)" \
    eval "[ $rc = 0 ] && grep -q \"problem: .*largest 1024 MiB (local rank 3), .*; local rank 3's MPS context reached 1024 MiB, within 10 % of --mps-memory-limit 1100 MiB a rank\" '$ERR.l'" ||
    diag "$ERR.l"
gsrun_fake 1 --mps-memory-limit=2000M -np 4 "$PROG" --mps-client --gpu-mib 256 --sleep 2500 \
    >"$OUT.l2" 2>"$ERR.l2"
rc=$?
check "  ... far from it (2000M): not said without -v (status $rc)" \
    eval "[ $rc = 0 ] && ! grep -q 'peak GPU memory' '$ERR.l2'" || diag "$ERR.l2"
check_clean "3."

# --- 4. a driver without NVML's MPS listing ----------------------------------
# Each compute listing appends a line to the log: the status is read after
# two of them made once both ranks were clients (a look took place).
FAKE_NVML_PROCS_LOG=$TEST_TMP/procs.log FAKE_NVML_NO_MPS_LISTING=1 \
    bg_job u 1 -v -np 2 "$PROG" --mps-client --gpu-mib 256 --sleep 4000
wait_json "$OUT.j" '"state":"client".*"state":"client"'
looks=$(wc -l <"$TEST_TMP/procs.log")
wait_for "$TEST_TMP/procs.log" . $((looks + 2))
status_json >"$OUT.j"
"$GSRUN" status >"$OUT.t" 2>&1
check "4. no MPS listing: each rank's memory unknown (null), never 0: $(ranks_json "$OUT.j" | tr '\n' ';')" \
    eval "[ \"\$(ranks_json '$OUT.j' | tr '\n' ';')\" = '0 client null null;1 client null null;' ] &&
          grep -q '\"clients_memory_mib\":null' '$OUT.j'" || diag "$OUT.j"
check "  ... the text says unknown" \
    eval "grep -q 'rank 1 (pid [0-9]*): client, GPU memory unknown, peak unknown' '$OUT.t' &&
          ! grep -q ' 0 MiB' '$OUT.t'" || diag "$OUT.t"
wait_for "$OUT.u.rc" . 1 20
check "  ... no peak line at the end, status $(cat "$OUT.u.rc")" \
    eval "[ \"\$(cat '$OUT.u.rc')\" = 0 ] && ! grep -q 'peak GPU memory' '$ERR.u'" || diag "$ERR.u"
check_clean "4."

finish
