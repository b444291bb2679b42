#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: slurm/, launcher/batch_main.c under a real slurmd (GPU machine)
# gsrun under a real Slurm on this machine (not run by CI): slurmctld and one
# slurmd for this node (auth/none, proctrack/linuxproc, its GPUs as gres/gpu),
# a configuration and state of its own in a private directory, nothing in
# /etc read or written. With real MPS, 16 ranks of examples/mps_probe
# --expect-mps on one GPU (200/16 % each) through:
#   - srun --mps (gsrun_spank.so inside the real slurmstepd),
#   - gsrun srun,
#   - prolog mode (slurm.conf Prolog/Epilog/TaskProlog running gsrun),
# each: status 0, every rank under MPS with its share and a correct result,
# one daemon, no MPS process and no run directory left after the step; and
# scancel of a running step.
#
#   tests/gpu/slurm.sh [--fake] [BUILD_DIR]
#
# SLURM_ROOT=DIR takes Slurm from a tree of unpacked packages (DIR/usr/sbin
# with slurmd, slurmctld and slurmstepd, DIR/usr/bin,
# DIR/usr/lib/x86_64-linux-gnu/slurm-wlm; libraries the machine lacks in
# DIR/extra-lib; tests/gpu/slurm_carry.sh makes it from Debian's packages):
# the GPU machine has no Slurm and no package archive, so Debian 12's
# packages travel with the tree (see doc/slurm.md). Default: the installed
# Slurm. --fake: no GPU needed, the build's stand-in MPS daemon and NVML,
# tests/progs/rank_report as the program (to check the script itself).
# SPANK_PLUGIN=PATH: a gsrun_spank.so built elsewhere (a machine without
# Slurm's headers builds none). GSRUN_SLURM_MPI: srun --mpi (default pmix);
# GSRUN_SLURM_NP: ranks (16). Ends with "N passed, N failed".
set -u
fake=0
[ "${1:-}" = --fake ] && { fake=1; shift; }
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/_build}" && pwd) || exit 1
np=${GSRUN_SLURM_NP:-16}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; return 1; fi; }
diag() { sed 's/^/# /' "$@"; }
bail() { echo "Bail out! $*"; echo "$pass passed, $((fail + 1)) failed"; exit 1; }
MADE_PMIX="" W=""
trap '[ -z "$MADE_PMIX" ] || rm -f "$MADE_PMIX"' EXIT

# --- Slurm's programs -----------------------------------------------------------
R=${SLURM_ROOT:-}
if [ -n "$R" ]; then
    R=$(cd "$R" && pwd) || exit 1
    # (by the names Debian's alternatives give them: Slurm tells its daemons
    # apart by their program names, and slurmd-wlm is not "slurmd")
    sbin() { echo "$R/usr/sbin/$1"; }
    SLURM_BIN=$R/usr/bin PLUGDIR=$R/usr/lib/x86_64-linux-gnu/slurm-wlm
    SLIB=$PLUGDIR:$R/usr/lib/x86_64-linux-gnu
else
    sbin() { command -v "$1" || echo "/usr/sbin/$1"; }
    SLURM_BIN=$(dirname "$(command -v srun || echo /usr/bin/srun)")
    PLUGDIR=$(dirname "$(find /usr/lib* -name auth_none.so 2>/dev/null | head -1)")
    SLIB=""
fi
SLURMCTLD=$(sbin slurmctld) SLURMD=$(sbin slurmd) SLURMSTEPD=$(sbin slurmstepd)
for p in "$SLURMCTLD" "$SLURMD" "$SLURMSTEPD" "$SLURM_BIN/srun"; do
    [ -x "$p" ] || bail "no Slurm here ($p): set SLURM_ROOT to unpacked packages"
done
[ -f "$PLUGDIR/auth_none.so" ] || bail "Slurm's auth/none plugin is missing in $PLUGDIR"
# Slurm's mpi/pmix opens libpmix by the path it was built with: where the
# machine has none there, the carried one is linked in (and unlinked at the end).
PMIXDIR=/usr/lib/x86_64-linux-gnu/pmix2
MADE_PMIX=""
if [ -n "$R" ] && [ -e "$R$PMIXDIR/lib/libpmix.so" ] && [ ! -e "$PMIXDIR/lib/libpmix.so" ]; then
    if [ ! -e "$PMIXDIR" ]; then
        ln -s "$R$PMIXDIR" "$PMIXDIR" && MADE_PMIX=$PMIXDIR
    else
        ln -s "$R$PMIXDIR/lib/libpmix.so" "$PMIXDIR/lib/libpmix.so" && MADE_PMIX=$PMIXDIR/lib/libpmix.so
    fi
    echo "# linked $MADE_PMIX to the carried PMIx (Slurm's mpi/pmix opens it there)"
fi
PLUGIN=$(readlink -f "${SPANK_PLUGIN:-$build/slurm/gsrun_spank.so}")
[ -f "$PLUGIN" ] || bail "no SPANK plugin: $PLUGIN (set SPANK_PLUGIN)"
[ "$(id -u)" = 0 ] || bail "needs root (slurmd runs the tasks)"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
GSRUN=$build/launcher/gsrun

# --- the GPUs, the program ------------------------------------------------------
W=$(mktemp -d /tmp/gs-slurm.XXXXXX) || exit 1
chmod 755 "$W"
if [ -n "$R" ] && [ -d "$R/extra-lib" ]; then
    # Of the libraries carried for Slurm, only those the machine lacks: its
    # own stay first for everything else.
    mkdir "$W/lib"
    for l in "$R"/extra-lib/*; do
        ldconfig -p | grep -q "^[[:space:]]*${l##*/} " || ln -s "$l" "$W/lib/"
    done
    echo "# libraries carried for Slurm, used: $(ls "$W/lib" | tr '\n' ' ')"
    SLIB=$SLIB:$W/lib
fi
node=$(hostname -s)
if [ $fake = 1 ]; then
    ngpu=1
    mknod "$W/nvidia0" c 195 0 || bail "cannot make a device file"
    devs=$W/nvidia0
    export LD_LIBRARY_PATH=$build/tests/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FAKE_NVML_GPUS=1
    CONTROL="--mps-control=$build/tests/fake/nvidia-cuda-mps-control"
    PLUGARGS="control=$build/tests/fake/nvidia-cuda-mps-control"
    PROG="$build/tests/progs/rank_report"
    mps_procs() { pgrep -f "$build/tests/fake/nvidia-cuda-mps-control" | tr '\n' ' '; }
else
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    [ "$ngpu" -ge 1 ] || bail "no NVIDIA GPU here (--fake checks the script without one)"
    devs=$(for i in $(seq 0 $((ngpu - 1))); do echo /dev/nvidia$i; done | tr '\n' ',' | sed 's/,$//')
    [ -e /dev/nvidia0 ] || { echo "# no /dev/nvidia0 here: the GPUs are not Slurm gres"; devs=""; }
    CONTROL="" PLUGARGS=""
    [ -x "$build/examples/mps_probe" ] || bail "examples/mps_probe is not built"
    . "$(dirname "$0")/procs.sh"
    mps_procs() { live_procs 'nvidia-cuda-mps*'; }
    total_sms=$("$GSRUN" --mps=off -np 1 "$build/examples/mps_probe" --iters 1 2>/dev/null |
        sed -n 's/.* sms=\([0-9]*\) .*/\1/p' | head -1)
    expect_sms=$(awk -v t="$total_sms" -v n="$np" 'BEGIN { p = 200 / n; if (p > 100) p = 100; print int(t * p / 100 / 2) * 2 }')
    PROG="$build/examples/mps_probe --expect-mps --expect-sms $expect_sms"
    echo "# $ngpu GPUs with $total_sms SMs; $np ranks on one GPU should see $expect_sms each"
fi
pct=$(awk -v n="$np" 'BEGIN { p = 200 / n; if (p > 100) p = 100; print p }')
before=$(mps_procs)
[ -z "$before" ] || echo "# note: MPS processes before the test: $before"

# --- slurm.conf and the daemons -------------------------------------------------
mkdir -p "$W/state" "$W/spool"
echo "optional $PLUGIN agent=$build/launcher/gsrun-agent $PLUGARGS verbose=1" >"$W/plugstack.conf"
if [ -n "$devs" ]; then
    echo "AutoDetect=off
NodeName=$node Name=gpu File=$(echo "$devs" | sed 's/,/ /g' | awk '{print $1}' | sed 's/[0-9]*$//')[0-$((ngpu - 1))]" >"$W/gres.conf"
    GRES="GresTypes=gpu" NODEGRES="Gres=gpu:$ngpu" GPUOPT=--gpus-per-node=1
else
    GRES="" NODEGRES="" GPUOPT=""
fi
PROV=$W/provision.on
# Slurm gives a prolog a bare environment: the site's script sets its own.
PENV="export PATH='$PATH'"
[ $fake = 1 ] && PENV="$PENV LD_LIBRARY_PATH='$LD_LIBRARY_PATH' FAKE_NVML_GPUS=1"
cat >"$W/prolog.sh" <<SH
#!/bin/sh
[ -f $PROV ] || exit 0
$PENV
exec $GSRUN prolog -v $CONTROL >>$W/prolog.log 2>&1
SH
cat >"$W/epilog.sh" <<SH
#!/bin/sh
exec $GSRUN epilog -v >>$W/epilog.log 2>&1
SH
cat >"$W/task_prolog.sh" <<SH
#!/bin/sh
[ -f $PROV ] || exit 0
$PENV
exec $GSRUN task-prolog
SH
chmod 755 "$W"/*.sh
cat >"$W/slurm.conf" <<CONF
ClusterName=gsgpu
SlurmctldHost=$node(127.0.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
PluginDir=$PLUGDIR
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/slurmctld.log
SlurmdLogFile=$W/slurmd.log
SlurmctldPort=${GSRUN_SLURM_PORT:-16817}
SlurmdPort=$((${GSRUN_SLURM_PORT:-16817} + 1))
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$W/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
KillWait=2
InactiveLimit=0
$GRES
Prolog=$W/prolog.sh
Epilog=$W/epilog.sh
TaskProlog=$W/task_prolog.sh
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(($(nproc) > np ? $(nproc) : np)) $NODEGRES State=UNKNOWN
PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
export SLURM_CONF=$W/slurm.conf
ORIG_LD=${LD_LIBRARY_PATH:-}
sl() { PATH=$SLURM_BIN:$PATH LD_LIBRARY_PATH=$SLIB${SLIB:+${ORIG_LD:+:}}$ORIG_LD "$@"; }
slbin() { local p=$1; shift; sl "$SLURM_BIN/$p" "$@"; }
# The tasks get the job's environment as the user's shell has it, without
# the libraries carried for Slurm's own programs.
SRUN_EXPORT="--export=ALL,LD_LIBRARY_PATH=$ORIG_LD"
cleanup() {
    slbin scancel --user=root >/dev/null 2>&1
    for f in slurmd slurmctld; do
        [ -f "$W/$f.pid" ] && kill "$(cat "$W/$f.pid")" 2>/dev/null
    done
    sleep 1
    pkill -KILL -f "$W/slurm.conf" 2>/dev/null
    for f in slurmd slurmctld; do
        [ -f "$W/$f.pid" ] && kill -KILL "$(cat "$W/$f.pid")" 2>/dev/null
    done
    if [ -n "${GSRUN_SLURM_KEEP:-}" ]; then echo "# kept $W"; else rm -rf "$W"; fi
    [ -z "$MADE_PMIX" ] || rm -f "$MADE_PMIX"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
sl "$SLURMCTLD" -c || bail "slurmctld did not start: $(tail -5 "$W/slurmctld.log")"
# slurmd sets up a cgroup plugin even with proctrack/linuxproc and no task
# plugin, and fails where the machine's cgroups are not what it expects (a
# sandbox's cgroup v2 without systemd, say): the machine's own first, then
# v2 without systemd, then v1 on an empty directory (Slurm 22.05 has no
# CgroupPlugin=disabled), then that (23.11 and later); the first that starts
# is used.
started=""
for cg in "" "CgroupPlugin=cgroup/v2|IgnoreSystemd=yes" "CgroupPlugin=cgroup/v1|CgroupMountpoint=$W/no-cgroup" \
    "CgroupPlugin=disabled"; do
    echo "$cg" | tr '|' '\n' >"$W/cgroup.conf"
    mkdir -p "$W/no-cgroup"
    # (the carried PMIx's own components, not the machine's of another version)
    if (if [ -n "$MADE_PMIX" ]; then export PMIX_MCA_mca_base_component_path=$R$PMIXDIR/lib/pmix; fi
        sl "$SLURMD" -N "$node" -d "$SLURMSTEPD" 2>>"$W/slurmd-start.err"); then
        started="cgroup.conf: ${cg:-(none)}"
        break
    fi
done
[ -n "$started" ] || bail "slurmd did not start: $(tail -5 "$W/slurmd.log")"
echo "# slurmd started with $started"
for _ in $(seq 100); do [ "$(slbin sinfo -h -t idle -o %D 2>/dev/null)" = 1 ] && break; sleep 0.2; done
[ "$(slbin sinfo -h -t idle -o %D 2>/dev/null)" = 1 ] ||
    { slbin sinfo -N | diag; tail -20 "$W/slurmd.log" "$W/slurmctld.log" | diag; bail "the node did not become idle"; }
echo "# $(sl "$SLURMD" -V), node $node: $ngpu GPU(s)${devs:+ as gres/gpu ($devs)}, $(nproc) CPUs"
echo "# srun --mpi=list: $(slbin srun --mpi=list 2>&1 | tr '\n' ' ' | sed 's/  */ /g')"

# --- the cases ------------------------------------------------------------------
left_dirs() { ls -d /run/gsrun/slurm-* /run/gsrun/job-* "$GS_ROOT"/gsrun.* 2>/dev/null | tr '\n' ' '; }
nothing_left() { # nothing_left MS: no MPS process and no run dir within MS ms
    local t=0
    while [ $t -lt "$1" ]; do
        [ "$(mps_procs)" = "$before" ] && [ -z "$(left_dirs)" ] && return 0
        sleep 0.1
        t=$((t + 100))
    done
    echo "# left: processes [$(mps_procs)] dirs [$(left_dirs)]"
    return 1
}
step() { # step NAME SRUN-ARGS...: one step of np ranks on one GPU, checked
    local name=$1 rc
    shift
    local out=$W/$(echo "$name" | tr -c 'a-z0-9\n' '_').out
    t0=$(date +%s%N)
    "$@" >"$out" 2>&1
    rc=$?
    diag "$out" | grep -v "^# rank=" | head -40
    check "$name: status 0 ($((($(date +%s%N) - t0) / 1000000)) ms)" [ $rc -eq 0 ]
    check "$name: $np ranks under MPS at $pct%" [ "$(grep -c "mps=1 .*pct=$pct " "$out")" -eq "$np" ] ||
        grep "mps=" "$out" | head -3 | diag
    [ $fake = 1 ] || check "$name: every rank sees its share of the SMs and a correct result" \
        [ "$(grep "result=ok" "$out" | grep -vc " FAIL")" -eq "$np" ]
}

SRUN="srun -N1 -n$np $GPUOPT --mpi=${GSRUN_SLURM_MPI:-pmix} $SRUN_EXPORT"
step "srun --mps (gsrun_spank.so in slurmstepd)" slbin $SRUN --mps $PROG
check "  ... one MPS control daemon" [ "$(cat "$W"/srun___mps_*.out | grep -c "MPS control daemon [0-9]* on")" -eq 1 ]
check "  ... nothing left within 2 s of the step" nothing_left 2000

step "gsrun srun" sl "$GSRUN" -v $CONTROL $SRUN $PROG
check "  ... nothing left within 2 s of the step" nothing_left 2000

touch "$PROV"
step "prolog mode (Prolog/Epilog/TaskProlog)" slbin $SRUN $PROG
diag "$W/prolog.log" "$W/epilog.log" 2>/dev/null | tail -12
check "  ... nothing left within 5 s (the epilog's time)" nothing_left 5000
rm -f "$PROV"

# scancel of a running step: its MPS and run dir gone.
slbin $SRUN --mps $PROG --sleep 60000 >"$W/cancel.out" 2>&1 &
bg=$!
for _ in $(seq 300); do [ -n "$(left_dirs)" ] && [ "$(mps_procs)" != "$before" ] &&
    [ -n "$(slbin squeue -h -t R)" ] && break; sleep 0.1; done
if [ -n "$(slbin squeue -h -t R)" ] && [ "$(mps_procs)" != "$before" ]; then
    sleep 2 # the ranks past MPI_Init, on the GPU
    t0=$(date +%s%N)
    slbin scancel "$(slbin squeue -h -o %i | head -1)"
    check "scancel of a running srun --mps step: nothing left within 5 s" nothing_left 5000 &&
        echo "# gone after $((($(date +%s%N) - t0) / 1000000)) ms"
else
    notok "scancel of a running srun --mps step: the step did not start under MPS in 30 s"
    diag "$W/cancel.out"
fi
wait $bg
idle() { for _ in $(seq 100); do [ "$(slbin sinfo -h -o %T)" = idle ] && return 0; sleep 0.1; done; return 1; }
check "  ... the node idle again within 10 s, not drained" idle || slbin sinfo -N | diag
grep -i -E "error|drain" "$W/slurmd.log" | grep -v "Could not open\|backup state" | tail -5 | diag
echo "1..$((pass + fail))"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
