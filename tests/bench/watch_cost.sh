#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# What holding the rank watch to the driver's word costs on the healthy path
# (issue 65): two gsrun builds side by side in one run, with the fakes (no
# GPU needed): each client line asks its server's control daemon, NVML is
# looked at again for the clients' trees.
#
#   tests/bench/watch_cost.sh BASE_BUILD NEW_BUILD [ROUNDS] [RANKS]
#
# BASE_BUILD: a build of the tree before (01e6468, with `make check`'s
# fakes built), NEW_BUILD this one. Each round (default 5) runs one job of
# RANKS (default 200) fake MPS clients (tests/progs/rank_report
# --mps-client --sleep 3000: every rank a client of the fake daemon, its
# context listed by the fake NVML) with each build, in an order rotated each
# round, and prints each build's median wall time and new / base. Ends with
# the summary line each build printed (both must say served RANKS of RANKS).
set -u
base=${1:?usage: watch_cost.sh BASE_BUILD NEW_BUILD [ROUNDS] [RANKS]}
new=${2:?usage: watch_cost.sh BASE_BUILD NEW_BUILD [ROUNDS] [RANKS]}
rounds=${3:-5}
n=${4:-200}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export GSRUN_MPS_SHARE=job GSRUN_MPS_LINGER=0 GSRUN_AGENT_ENV='FAKE_*'
T=$(mktemp -d /tmp/gswatch.XXXXXX)
export TMPDIR=$T/tmp FAKE_NVML_CTX_DIR=$T/ctx
mkdir -p "$TMPDIR" "$FAKE_NVML_CTX_DIR"

one() { # one BUILD: wall ms of one job (its -v lines in $T/err.<build's name>)
    local b=$1 t0 t1 rc
    t0=$(date +%s%N)
    LD_LIBRARY_PATH=$b/tests/fake FAKE_NVML_GPUS=1 "$b/launcher/gsrun" \
        --mps-control="$b/tests/fake/nvidia-cuda-mps-control" -v -np "$n" \
        "$b/tests/progs/rank_report" --mps-client --sleep 3000 >/dev/null 2>"$T/err.$2"
    rc=$?
    t1=$(date +%s%N)
    [ $rc = 0 ] || { echo "# $b failed ($rc):"; tail -5 "$T/err.$2" | sed 's/^/#   /'; } >&2
    echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

one "$new" new >/dev/null # warm both builds' files
one "$base" base >/dev/null
for ((r = 0; r < rounds; r++)); do
    if [ $((r % 2)) = 0 ]; then order="base new"; else order="new base"; fi
    for w in $order; do
        b=$base
        [ $w = new ] && b=$new
        one "$b" $w >>"$T/$w.ms"
    done
done
mb=$(median <"$T/base.ms")
mn=$(median <"$T/new.ms")
echo "# $n fake MPS clients, $rounds rounds, $(nproc) cores"
echo "base median $mb ms ($(sort -n "$T/base.ms" | tr '\n' ' ')), new median $mn ms ($(sort -n "$T/new.ms" | tr '\n' ' ')), new/base $(awk -v a="$mn" -v b="$mb" 'BEGIN {printf "%.3f", a / b}')"
for w in base new; do
    echo "# $w: $(grep -o 'served [0-9]* of [0-9]* ranks[^;]*' "$T/err.$w" | head -1)"
done
rm -rf "$T"
