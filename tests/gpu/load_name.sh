#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/usage.c, runtime/gpu/gpu.c with real MPS and NVML (GPU machine; issue 58)
# Another user's busy GPU process cannot pass as an idle MPS server by its
# name, and another user's idle server still moves none of this user's
# ranks (not run by CI; needs root and the user nobody, else skips):
#
#   tests/gpu/load_name.sh BUILD_DIR
#
# 1. nobody's shared MPS server lingers idle (a one-rank job, --mps-linger):
#    NVML's memory of that server (the proof gsrun takes) is printed.
# 2. nobody runs a CUDA program copied to the name nvidia-cuda-mps-server
#    (its /proc comm is what a real server's is) on the first GPU: NVML's
#    memory of it is printed.
# 3. root's job of 2 ranks a GPU (-v): the renamed program counts as load
#    of another user on its GPU ("+1" there in "placed beside"), the idle
#    server counts on none; on 2 or more GPUs the loaded GPU gets fewer of
#    the job's ranks than the others; every rank an MPS client.
# 4. The idle server alone (the renamed program ended): root's job is
#    placed as on a free node (no "placed beside").
# 5. Nothing of MPS left.
# Passes on 1, 2 and 4 GPUs. Ends with N passed, N failed.
set -u
b=$1
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
if [ "$(id -u)" != 0 ] || ! getent passwd nobody >/dev/null || ! command -v setpriv >/dev/null; then
    echo "1..0 # SKIP needs root, the user nobody and setpriv"
    echo "0 passed, 0 failed, 1 skipped"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export GSRUN_MPS_LINGER=0
unset GSRUN_MPS_SHARE CUDA_VISIBLE_DEVICES
. "$(dirname "$0")/procs.sh"
ngpus=$(nvidia-smi -L | grep -c '^GPU ')
echo "# $(nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | head -1), $ngpus GPU(s)"
T=$(mktemp -d /tmp/gsl.XXXXXX)
chmod 755 "$T"
mkdir -p "$T/b/examples" "$T/fake"
cp -a "$b/launcher" "$T/b/"
cp "$b/examples/solo_jacobi" "$b/examples/mps_probe" "$T/b/examples/"
# The busy program under the server's name: the kernel names a process
# after its executable's file (15 bytes: "nvidia-cuda-mps").
cp "$b/examples/solo_jacobi" "$T/fake/nvidia-cuda-mps-server"
mkdir -m 700 "$T/nt" && chown 65534:65534 "$T/nt"
chmod -R a+rX "$T/b" "$T/fake"
as_nobody() {
    setpriv --reuid=65534 --regid=65534 --clear-groups env -u OMPI_ALLOW_RUN_AS_ROOT \
        -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM HOME="$T/nt" TMPDIR="$T/nt" "$@"
}
apps() { nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; }
mem_of() { apps | awk -F', ' -v p="$1" '$1 == p { print $3 }'; }

# 1. nobody's idle server.
as_nobody "$T/b/launcher/gsrun" --mps=on --mps-linger=120 -np 1 "$T/b/examples/solo_jacobi" \
    --n 1024 --iters 200 >"$T/o1" 2>&1
rc=$?
idle=""
for p in $(live_procs 'nvidia-cuda-mps*'); do
    [ "$(stat -c %u "/proc/$p")" = 65534 ] && grep -q server "/proc/$p/cmdline" 2>/dev/null && idle=$p
done
[ $rc -eq 0 ] && [ -n "$idle" ] && ok "1. nobody's idle MPS server $idle: NVML says $(mem_of "$idle")" ||
    { notok "1. nobody's job: status $rc, idle server '${idle:-none}'"; sed 's/^/# /' "$T/o1"; }

# 2. nobody's busy program named as a server, on the first GPU.
as_nobody env CUDA_VISIBLE_DEVICES=0 "$T/fake/nvidia-cuda-mps-server" --n 4096 --iters 100000000 \
    >"$T/o2" 2>&1 &
busy=$!
pid=""
for _ in $(seq 200); do
    for p in $(live_procs 'nvidia-cuda-mps'); do
        grep -q "$T/fake" "/proc/$p/cmdline" 2>/dev/null && pid=$p
    done
    [ -n "$pid" ] && [ -n "$(mem_of "$pid")" ] && break
    sleep 0.1
done
apps | sed 's/^/# NVML: /'
[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm")" = nvidia-cuda-mps ] && [ -n "$(mem_of "$pid")" ] &&
    ok "2. nobody's busy program $pid named '$(cat "/proc/$pid/comm")': NVML says $(mem_of "$pid")" ||
    notok "2. the renamed program ${pid:-none} is not listed by NVML"

per_gpu() { # the job's ranks a GPU, in NVML order, from its -v lines
    sed -n 's/.*: MPS on \(GPU-[0-9a-f-]*\) for \([0-9]*\) local ranks.*/\1 \2/p' "$1"
}
# 3. root's job beside both.
np=$((2 * ngpus))
"$b/launcher/gsrun" -v --mps=on -np $np "$b/examples/mps_probe" --expect-mps --sleep 2000 >"$T/o3" 2>&1 &
job=$!
# What NVML says of root's server and its clients while the ranks hold
# their contexts (a server with clients: its own memory, for the bound).
for _ in $(seq 100); do
    [ "$(live_procs mps_probe | wc -w)" -ge $np ] && sleep 1 && break
    sleep 0.1
done
apps | sed 's/^/# NVML, root'"'"'s ranks running: /'
wait $job
rc=$?
nmps=$(grep -c 'mps=1 ' "$T/o3")
line=$(grep -o 'load per GPU (their ranks + other processes) [0-9+ ]*' "$T/o3" | sed 's/.*processes) //')
uuid0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
on0=$(per_gpu "$T/o3" | awk -v u="$uuid0" '$1 == u { print $2 }')
want_foreign=$(printf '0+1'; for _ in $(seq 2 "$ngpus"); do printf ' 0+0'; done)
if [ $rc -eq 0 ] && [ "$nmps" -eq $np ] && [ "${line% }" = "$want_foreign" ] &&
    { [ "$ngpus" -eq 1 ] || [ "${on0:-0}" -lt 2 ]; }; then
    ok "3. root's $np ranks: load '${line% }', ${on0:-0} ranks on the busy GPU, $nmps MPS clients"
else
    notok "3. root's $np ranks: status $rc, load '${line% }' (want '$want_foreign'), ${on0:-0} on the busy GPU, $nmps MPS clients"
    grep -v ' rank [0-9]*/' "$T/o3" | sed 's/^/# /'
fi
[ -n "$pid" ] && kill "$pid" 2>/dev/null # the program (busy is the shell that started it)
wait "$busy" 2>/dev/null

# 4. The idle server alone.
"$b/launcher/gsrun" -v --mps=on -np $np "$b/examples/mps_probe" --expect-mps >"$T/o4" 2>&1
rc=$?
nmps=$(grep -c 'mps=1 ' "$T/o4")
[ $rc -eq 0 ] && [ "$nmps" -eq $np ] && ! grep -q 'placed beside' "$T/o4" &&
    ok "4. beside nobody's idle server alone: placed as on a free node, $nmps MPS clients" ||
    { notok "4. beside the idle server: status $rc, $nmps MPS clients"; grep -v ' rank [0-9]*/' "$T/o4" | sed 's/^/# /'; }

# 5. nobody's shared agent ends: nothing of MPS left.
left=$(end_share_of 65534)
[ -z "$left" ] && ok "5. no MPS process and no shared agent left" || notok "5. left: $left"
rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
