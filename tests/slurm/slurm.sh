# SPDX-License-Identifier: BSD-3-Clause
# Slurm on the simulated cluster (source after tests/cluster/cluster.sh).
#
# slurmctld on host1 and a slurmd on every host, from the distribution's
# packages (Debian 12: Slurm 22.05), with a configuration of their own in the
# cluster's directory: nothing in /etc/slurm is read or written. Every
# daemon's state, spool and log lives in that directory (so the hosts' /tmp
# holds only what jobs leave there), and goes with cluster_down: the daemons
# die with their hosts.
#
#   slurm_can_run         prints why not and returns 1 when Slurm is missing
#   slurm_up N [PLUGSTACK-LINE]
#                         slurmctld + N slurmd (4 CPUs each), waits until every
#                         node is idle; the optional line goes to plugstack.conf;
#                         GSS_EXTRA_CONF: more slurm.conf lines (Prolog=...),
#                         GSS_NODE_EXTRA: more of the NodeName line (Gres=...)
#   on_slurm H CMD        CMD on host H with the cluster's SLURM_CONF
#   slurm_logs            the daemons' logs (for a failing test's diagnostics)
GSS_DIR=""

slurm_can_run() {
    local t
    for t in slurmctld slurmd srun scontrol; do
        command -v $t >/dev/null 2>&1 || [ -x /usr/sbin/$t ] ||
            { echo "needs Slurm ($t; Debian: slurmctld slurmd slurm-client)"; return 1; }
    done
    [ -f /usr/lib/x86_64-linux-gnu/slurm-wlm/auth_none.so ] || [ -n "$(find /usr/lib* -name auth_none.so 2>/dev/null | head -1)" ] ||
        { echo "needs Slurm's auth/none plugin"; return 1; }
}

slurm_up() { # slurm_up N [PLUGSTACK-LINE]
    local n=$1 i
    GSS_DIR=${GSS_DIR:-$GSC_DIR/slurm}
    mkdir -p "$GSS_DIR/state"
    for i in $(seq "$n"); do mkdir -p "$GSS_DIR/spool-host$i"; done
    echo "${2:-}" >"$GSS_DIR/plugstack.conf"
    # Slurm 23.11 and later initialise a cgroup plugin in slurmd even with
    # proctrack/linuxproc and no task plugin, and fail where no cgroup file
    # system is mounted (a test root's /sys): off, unless a test sets its own
    # cgroup.conf. 22.05 has no such setting and needs none.
    if [ ! -e "$GSS_DIR/cgroup.conf" ] && slurm_version_at_least 23 11; then
        echo "CgroupPlugin=disabled" >"$GSS_DIR/cgroup.conf"
    fi
    cat >"$GSS_DIR/slurm.conf" <<CONF
ClusterName=gsc
SlurmctldHost=host1(198.18.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$GSS_DIR/state
SlurmdSpoolDir=$GSS_DIR/spool-%n
SlurmctldPidFile=$GSS_DIR/slurmctld.pid
SlurmdPidFile=$GSS_DIR/slurmd-%n.pid
SlurmctldLogFile=$GSS_DIR/slurmctld.log
SlurmdLogFile=$GSS_DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$GSS_DIR/plugstack.conf
ProctrackType=${GSS_PROCTRACK:-proctrack/linuxproc}
TaskPlugin=${GSS_TASK:-task/none}
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
MessageTimeout=10
SlurmdTimeout=30
${GSS_EXTRA_CONF:-}
NodeName=host[1-$n] CPUs=4 State=UNKNOWN ${GSS_NODE_EXTRA:-}
PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
    on_slurm host1 "slurmctld -c" || { echo "slurm: slurmctld did not start" >&2; return 1; }
    for i in $(seq "$n"); do
        on_slurm "host$i" "slurmd -N host$i" || { echo "slurm: slurmd on host$i did not start" >&2; return 1; }
    done
    for _ in $(seq 150); do
        [ "$(on_slurm host1 "sinfo -h -t idle -o %D" 2>/dev/null)" = "$n" ] && return 0
        sleep 0.2
    done
    echo "slurm: the nodes did not become idle:" >&2
    on_slurm host1 "sinfo -N" >&2
    return 1
}

slurm_version_at_least() { # slurm_version_at_least MAJOR MINOR: slurmd's version
    local v
    v=$( (slurmd -V || /usr/sbin/slurmd -V) 2>/dev/null | sed -n 's/^slurm[^ ]* \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    [ -n "$v" ] || return 1
    set -- "$1" "$2" $v
    [ "$3" -gt "$1" ] || { [ "$3" -eq "$1" ] && [ "$4" -ge "$2" ]; }
}

on_slurm() { # on_slurm HOST CMD
    local h=$1
    shift
    on_host "$h" "export SLURM_CONF=$GSS_DIR/slurm.conf PATH=/usr/sbin:\$PATH; $*"
}

slurm_logs() {
    local f
    for f in "$GSS_DIR"/*.log; do echo "== $f"; tail -30 "$f"; done
}

slurm_plugstack() { # slurm_plugstack LINE: a new plugstack.conf for the next steps
    # slurmstepd and srun read it at each step's start.
    echo "$1" >"$GSS_DIR/plugstack.conf"
}

slurm_wait_idle() { # slurm_wait_idle: until no job is queued or completing (15 s at most)
    # A job submitted while the last one still completes may wait for the
    # scheduler's next pass; starting each test's job on idle nodes keeps
    # its timing its own.
    for _ in $(seq 150); do
        [ -z "$(on_slurm host1 'squeue -h')" ] && return 0
        sleep 0.1
    done
    return 1
}
