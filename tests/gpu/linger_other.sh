#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/gpu/usage.c, runtime/job/agent_pack.c with real MPS and NVML (GPU machine)
# Another user's shared MPS server lingering idle (the default linger, auto:
# 60 s) is no load for this user's packing (not run by CI; needs root and
# the user nobody, else skips).
#
#   tests/gpu/linger_other.sh BUILD_DIR
#
# 1. nobody runs a one-rank job (--mps=on --mps-linger=60): status 0 under
#    MPS, and its shared server stays after the job.
# 2. NVML, as nobody sees it (nvidia-smi), lists that server on its GPU.
# 3. root runs 4 ranks a GPU of mps_probe: status 0, every rank an MPS
#    client, the same count on every GPU, no "placed beside" (before: the
#    idle server counted one, and 16 ranks on 4 GPUs went 3/5/4/4).
# 4. While a rank of root's runs, NVML as nobody sees it lists that rank:
#    the clients of a server are listed on their own and count as load,
#    which is why the server itself need not.
# 5. nobody's shared agent told to end: no MPS process left.
# Both users' jobs use CUDA_VISIBLE_DEVICES's GPUs, else all. Passes on 1,
# 2 and 4 GPUs (on 1, 3 checks that both users' servers run on the GPU at
# once). Ends with N passed, N failed.
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
export GSRUN_MPS_LINGER=0 OMPI_MCA_rtc_gsrun_mps_linger=0 # root's jobs leave nothing
unset GSRUN_MPS_SHARE
. "$(dirname "$0")/procs.sh"
# The GPUs both users' jobs may use: CUDA_VISIBLE_DEVICES's, else all.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    ngpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else
    ngpus=$(nvidia-smi -L | grep -c '^GPU ')
fi
echo "# $(nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | head -1), $ngpus GPU(s)${CUDA_VISIBLE_DEVICES:+ (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)}"
# A copy of the programs nobody can run (the build may be under /root).
T=$(mktemp -d /tmp/gso.XXXXXX)
chmod 755 "$T"
mkdir -p "$T/b/examples"
cp -a "$b/launcher" "$T/b/"
cp "$b/examples/solo_jacobi" "$b/examples/mps_probe" "$T/b/examples/"
mkdir -m 700 "$T/nt" && chown 65534:65534 "$T/nt"
chmod -R a+rX "$T/b"
as_nobody() {
    setpriv --reuid=65534 --regid=65534 --clear-groups env -u OMPI_ALLOW_RUN_AS_ROOT \
        -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM HOME="$T/nt" TMPDIR="$T/nt" "$@"
}
# What NVML lists on the GPUs, as nobody sees it: "pid, name, uuid" lines.
apps_as_nobody() { as_nobody nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid --format=csv,noheader; }
servers_of() { # servers_of UID: live MPS servers of that user
    local p
    for p in $(live_procs 'nvidia-cuda-mps*'); do
        [ "$(stat -c %u "/proc/$p")" = "$1" ] && grep -q 'server' "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done
}

# 1. nobody's job, its server left lingering.
as_nobody "$T/b/launcher/gsrun" -v --mps=on --mps-linger=60 -np 1 "$T/b/examples/solo_jacobi" \
    --n 1024 --iters 200 >"$T/o1" 2>&1
rc=$?
theirs=$(servers_of 65534 | head -1)
[ $rc -eq 0 ] && grep -q ': MPS on GPU-' "$T/o1" && [ -n "$theirs" ] &&
    ok "1. nobody's one-rank job: status 0 under MPS; its server $theirs lingers" ||
    { notok "1. nobody's job: status $rc, lingering server '${theirs:-none}'"; sed 's/^/# /' "$T/o1"; }

# 2. NVML as nobody sees it lists that server.
apps_as_nobody >"$T/a2" 2>&1
sed 's/^/# NVML as nobody: /' "$T/a2"
[ -n "$theirs" ] && grep -q "^$theirs," "$T/a2" &&
    ok "2. NVML (as nobody) lists nobody's idle server $theirs" ||
    notok "2. NVML does not list nobody's server ${theirs:-none}"

# 3. root's job of 4 ranks a GPU beside it.
np=$((4 * ngpus))
"$b/launcher/gsrun" -v --mps=on -np $np "$b/examples/mps_probe" --expect-mps >"$T/o3" 2>&1
rc=$?
per=$(sed -n 's/.*: MPS on \(GPU-[0-9a-f-]*\) for \([0-9]*\) local ranks.*/\2/p' "$T/o3" | sort -n | uniq -c |
    awk '{printf "%s%d x %d", (NR > 1 ? ", " : ""), $1, $2}')
nmps=$(grep -c 'mps=1 ' "$T/o3")
if [ $rc -eq 0 ] && [ "$nmps" -eq $np ] && [ "$per" = "$ngpus x 4" ] && ! grep -q 'placed beside' "$T/o3"; then
    ok "3. root's $np ranks beside nobody's idle server: status 0, $nmps MPS clients, ranks a GPU: $per"
else
    notok "3. root's $np ranks: status $rc, $nmps MPS clients, ranks a GPU: ${per:-none} (want $ngpus x 4)"
    grep -v ' rank [0-9]*/' "$T/o3" | sed 's/^/# /'
fi

# 4. A rank of root's, listed by NVML as nobody sees it.
"$b/launcher/gsrun" --mps=on -np 1 "$b/examples/solo_jacobi" --n 2048 --iters 20000 >"$T/o4" 2>&1 &
job=$!
rank=""
for _ in $(seq 100); do
    rank=$(live_procs solo_jacobi | tr ' ' '\n' | while read -r p; do
        [ -n "$p" ] && [ "$(stat -c %u "/proc/$p")" = 0 ] && echo "$p"; done | head -1)
    [ -n "$rank" ] && apps_as_nobody | cut -d, -f1 | grep -qx "$rank" && break
    sleep 0.1
done
apps_as_nobody >"$T/a4" 2>&1
sed 's/^/# NVML as nobody, root'"'"'s rank running: /' "$T/a4"
[ -n "$rank" ] && grep -q "^$rank," "$T/a4" &&
    ok "4. NVML (as nobody) lists root's running MPS client $rank on its own" ||
    notok "4. root's running rank ${rank:-none} is not listed by NVML as nobody sees it"
wait $job

# 5. nobody's shared agent ends: nothing of MPS left.
left=$(end_share_of 65534)
[ -z "$left" ] && ok "5. no MPS process and no shared agent left" || notok "5. left: $left"
rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
