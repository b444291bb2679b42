#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# What a crowded TMPDIR costs a warm job (issue 58): the same gsrun job,
# its user's shared MPS warm, with TMPDIR an empty directory and with one
# that holds N files (default 200,000), alternating, side by side.
#
#   tests/bench/crowded_tmpdir.sh [--build DIR] [--np N] [--pairs K] [--files N] [--real]
#
# Runs examples/hello_ranks with N ranks (default 4) K times (default 15) in
# each TMPDIR, one warm-up job in each first (it starts that TMPDIR's
# shared MPS, kept warm by the default linger). Without --real the fake
# NVML and MPS of `make check`; with it the machine's. Prints each
# TMPDIR's median wall time and the median of the paired differences
# (crowded - empty), then ends both shared MPS (gsrun stop --now).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/_build np=4 pairs=15 files=200000 real=0
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --real) real=1; shift ;;
    *) echo "usage: $0 [--build DIR] [--np N] [--pairs K] [--files N] [--real]" >&2; exit 2 ;;
    esac
done
gsrun=$build/launcher/gsrun prog=$build/examples/hello_ranks
env_of=()
if [ $real = 0 ]; then
    env_of=(env LD_LIBRARY_PATH="$build/tests/fake" FAKE_NVML_GPUS=1
        GSRUN_MPS_CONTROL="$build/tests/fake/nvidia-cuda-mps-control")
    [ -e "$build/tests/fake/nvidia-cuda-mps-control" ] ||
        { echo "$0: the fakes are missing in $build: run 'make check' there first" >&2; exit 1; }
fi
for f in "$gsrun" "$prog"; do
    [ -x "$f" ] || { echo "$0: $f is missing; build first" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
scratch=$(mktemp -d "${TMPDIR:-/tmp}/gscrowd.XXXXXX")
mkdir "$scratch/empty" "$scratch/crowded"
end() {
    for d in empty crowded; do TMPDIR=$scratch/$d "${env_of[@]}" "$gsrun" stop --now >/dev/null 2>&1; done
    rm -rf "$scratch"
}
trap end EXIT
# N empty files, made without a process each.
python3 - "$scratch/crowded" "$files" <<'EOF' || { echo "$0: cannot make $files files" >&2; exit 1; }
import os, sys
for i in range(int(sys.argv[2])):
    os.close(os.open(os.path.join(sys.argv[1], "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o600))
EOF
job() { # job DIR: one job, its wall time in ms on stdout
    local t0 rc
    t0=$(date +%s%N)
    TMPDIR=$scratch/$1 "${env_of[@]}" "$gsrun" --mps=on -np "$np" "$prog" >/dev/null 2>"$scratch/err"
    rc=$?
    [ $rc -eq 0 ] || { echo "$0: the job in $1 failed ($rc):" >&2; cat "$scratch/err" >&2; exit 1; }
    echo $((($(date +%s%N) - t0) / 1000000))
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
job empty >/dev/null && job crowded >/dev/null
: >"$scratch/e" && : >"$scratch/c" && : >"$scratch/d"
for k in $(seq "$pairs"); do
    if [ $((k % 2)) = 0 ]; then e=$(job empty) && c=$(job crowded); else c=$(job crowded) && e=$(job empty); fi
    echo "$e" >>"$scratch/e"
    echo "$c" >>"$scratch/c"
    echo $((c - e)) >>"$scratch/d"
done
echo "crowded TMPDIR ($files files), $np ranks, $pairs pairs, $([ $real = 1 ] && echo "the machine's GPU" || echo "fake NVML and MPS"):"
echo "  empty TMPDIR:   median $(median <"$scratch/e") ms"
echo "  crowded TMPDIR: median $(median <"$scratch/c") ms"
echo "  crowded - empty, paired: median $(median <"$scratch/d") ms"
