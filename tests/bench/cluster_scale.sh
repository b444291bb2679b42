#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# gsrun's cost per job as the job spans more hosts, on the simulated cluster
# (tests/cluster/cluster.sh: one machine, hosts as namespaces; root).
#
#   tests/bench/cluster_scale.sh [--build DIR] [--hosts "2 4 8 16"] [--pairs K]
#
# For each host count H: K rounds (default 7) of three jobs, in an order that
# rotates each round:
#   plain  mpirun -host host1:4,...,hostH:4 -np 4H hello_ranks
#   hash   the same with PMIX_MCA_gds=hash (which gsrun sets for the ranks: a
#          PMIx client in the shim needs it, see doc/architecture.md), so
#          that gsrun's own cost is told apart from that PMIx setting's
#   gsrun  gsrun with the same arguments (stand-in MPS daemon and NVML on
#          every host: every node runs its agent, daemon and teardown)
# Prints per H the median wall times and the medians of the paired ratios
# gsrun/plain and gsrun/hash, and checks that every gsrun job had every rank
# under MPS and left nothing on any host. The hosts share this machine's
# cores: absolute times grow with H for all; what should stay flat is
# gsrun's ratio over mpirun.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$top/_build hosts="2 4 8 16" pairs=7
while [ $# -gt 0 ]; do
    case $1 in
    --build) B=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--hosts LIST] [--pairs K]" >&2; exit 2 ;;
    esac
done
export GS_TOP_BUILDDIR=$B GS_TOP_SRCDIR=$top
. "$top/tests/integration/lib.sh"
. "$top/tests/cluster/cluster.sh"
PROG=$B/examples/hello_ranks
if ! why=$(cluster_can_run); then
    echo "$0: cannot run: $why" >&2
    exit 77
fi
[ -x "$PROG" ] || { echo "$0: $PROG is not built" >&2; exit 2; }
max=0
for h in $hosts; do [ "$h" -gt $max ] && max=$h; done
trap 'cluster_down; rm -rf "$TEST_TMP"' EXIT
trap 'exit 1' INT TERM HUP
cluster_up "$max" || { echo "$0: cannot bring $max hosts up" >&2; exit 1; }
J=$GSC_DIR
JOBENV="export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
OMPI_MCA_plm_rsh_agent='$(cluster_rsh_agent)' LD_LIBRARY_PATH=$FAKE_LIB FAKE_NVML_GPUS=1 \
OMPI_MCA_mpi_yield_when_idle=1;" # many ranks per core: waiting ranks yield, for every config
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
timed() { # timed OUT CMD: runs CMD on host1, prints its wall ms (or FAIL)
    local t0 t1 out=$1
    shift
    t0=$(date +%s%N)
    on_host host1 "$JOBENV $* >$J/$out.out 2>$J/$out.err" || { echo FAIL; return; }
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}
bad=0
printf '%-6s %-6s %10s %10s %10s %12s %12s\n' hosts ranks "plain ms" "hash ms" "gsrun ms" "gsrun/plain" "gsrun/hash"
for h in $hosts; do
    list=$(for i in $(seq "$h"); do printf 'host%d:4,' "$i"; done)
    args="-x LD_LIBRARY_PATH -x FAKE_NVML_GPUS -host ${list%,} -np $((4 * h)) $PROG"
    for f in p q g r1 r2; do : >"$J/$f"; done
    # One job of each first: the hosts' caches warm for all alike.
    timed w mpirun $args >/dev/null
    timed w $GSRUN --mps-control=$FAKE_CONTROL $args >/dev/null
    for k in $(seq "$pairs"); do
        order="plain hash gsrun"
        case $((k % 3)) in 1) order="hash gsrun plain" ;; 2) order="gsrun plain hash" ;; esac
        for c in $order; do
            case $c in
            plain) p=$(timed j mpirun $args) ;;
            hash) q=$(timed j PMIX_MCA_gds=hash mpirun -x PMIX_MCA_gds $args) ;;
            gsrun) g=$(timed g1 $GSRUN --mps-control=$FAKE_CONTROL $args) ;;
            esac
        done
        if [ "$p" = FAIL ] || [ "$q" = FAIL ] || [ "$g" = FAIL ] ||
            [ "$(grep -c ', MPS 1, ' "$J/g1.out")" -ne $((4 * h)) ]; then
            echo "# $h hosts, round $k: a job failed or ran without MPS" >&2
            bad=$((bad + 1))
            continue
        fi
        echo "$p" >>"$J/p"
        echo "$q" >>"$J/q"
        echo "$g" >>"$J/g"
        awk -v g="$g" -v p="$p" 'BEGIN {printf "%.4f\n", g / p}' >>"$J/r1"
        awk -v g="$g" -v p="$q" 'BEGIN {printf "%.4f\n", g / p}' >>"$J/r2"
    done
    left=""
    for i in $(seq "$h"); do left="$left$(cluster_leftovers host$i)"; done
    [ -z "$left" ] || { echo "# $h hosts: left behind: $left" >&2; bad=$((bad + 1)); }
    printf '%-6s %-6s %10s %10s %10s %12s %12s\n' "$h" $((4 * h)) "$(median <"$J/p")" "$(median <"$J/q")" \
        "$(median <"$J/g")" "$(median <"$J/r1")" "$(median <"$J/r2")"
done
echo "# $pairs rounds per row, medians; $(nproc) cores shared by all hosts"
[ $bad -eq 0 ]
