# SPDX-License-Identifier: BSD-3-Clause
# A simulated cluster on one Linux machine, for tests (source this file).
#
# Each host is a set of namespaces of its own: PID (its init is gs-hostd),
# UTS (hostname), mount (private tmpfs on /tmp, /dev/shm and /run/gsrun, its
# own /etc/hosts), IPC
# and network (eth0 on a bridge that lives in a switch namespace of its own).
# Nothing is added to the machine's own network namespace or mount table, so
# killing the hosts' inits removes everything: the kernel ends every process
# of a PID namespace when its init dies, and the namespaces go with them.
#
# Commands reach a host as they would through ssh: `gs-hostd rsh` passes the
# caller's stdio to the host's init, which runs the command in a new session
# under /bin/sh with a fresh environment. mpirun uses the same program as its
# remote shell (plm_rsh_agent), so orted starts on the other hosts through
# Open MPI's normal rsh launch path.
#
#   cluster_up N        hosts host1..hostN (198.18.0.1..N/24, the range set
#                       aside for network tests: never routed off the machine);
#                       with GSC_CGROUP=1 each host also has cgroup trees of
#                       its own (see cluster_cgroup_can)
#   cluster_cgroup_can  prints the cgroup version hosts would get (v2 on a
#                       pure cgroup v2 machine, else v1: the machine's
#                       hierarchies), or why none, returning 1
#   on_host H CMD       runs CMD on host H; returns its status
#   cluster_rsh_agent   the value for --mca plm_rsh_agent
#   cluster_down        ends every host and removes the cluster's files (also
#                       done by the kernel if the calling shell dies: see below)
#   cluster_leftovers H lists what is left on H: processes other than its init,
#                       entries in its /tmp other than Open MPI's and PRRTE's
#                       own session dirs (a killed mpirun leaves them), its
#                       /dev/shm/gsrun*, and what is in (not the dir itself)
#                       a user's private base (/dev/shm or /tmp)/gsrun-<uid> (and a
#                       checkout carried there, see cluster_up), and in its
#                       /run/gsrun
set -u
GSC_HOSTD=${GSC_HOSTD:-${GS_TOP_BUILDDIR:-}/tests/cluster/gs-hostd}
GSC_DIR=""
GSC_PIDS=""
GSC_N=0

cluster_can_run() { # prints why not, returns 1, when this machine cannot host a cluster
    if [ "$(id -u)" != 0 ]; then echo "needs root (namespaces)"; return 1; fi
    for t in unshare nsenter ip setpriv; do
        command -v $t >/dev/null 2>&1 || { echo "needs $t"; return 1; }
    done
    [ -x "$GSC_HOSTD" ] || { echo "gs-hostd is not built ($GSC_HOSTD)"; return 1; }
    unshare --net --uts --mount --pid --ipc --fork true 2>/dev/null ||
        { echo "cannot create namespaces here"; return 1; }
}

cluster_up() { # cluster_up N
    local n=$1 i sw pid base
    # Outside /tmp: each host has its own /tmp, and this must be seen by all.
    base=/run
    [ -d $base ] && [ -w $base ] || base=/var/tmp
    # The files of a cluster whose test was killed (its hosts died with it).
    for d in "$base"/gsc.*; do
        [ -f "$d/switch.pid" ] && ! readlink "/proc/$(cat "$d/switch.pid")/exe" >/dev/null 2>&1 &&
            cluster_cgroups_remove "$d" && rm -rf "$d" # (a zombie has no exe link)
    done
    GSC_DIR=$(mktemp -d "$base/gsc.XXXXXX") || return 1
    GSC_N=$n
    local cgs=""
    if [ "${GSC_CGROUP:-0}" = 1 ]; then
        # Each host's cgroups are children of this cluster's in every
        # hierarchy; its cgroup namespace makes them its roots, so that Slurm
        # on each host sees a whole tree of its own, as on a node.
        cgs=$(cluster_cgroup_mounts) || return 1
        echo "$cgs" | while read -r _ _ parent; do
            { mkdir "$parent/${GSC_DIR##*/}" && echo "$parent/${GSC_DIR##*/}" >>"$GSC_DIR/cgroups" &&
                cgroup_cpuset_inherit "$parent/${GSC_DIR##*/}"; } || exit 1
        done || return 1
    fi
    for i in $(seq "$n"); do echo "198.18.0.$i host$i"; done >"$GSC_DIR/hosts"
    echo "127.0.0.1 localhost" >>"$GSC_DIR/hosts"
    # setpriv --pdeathsig: if the test itself is killed (even by SIGKILL),
    # unshare dies with it, and --kill-child takes the namespace down.
    setpriv --pdeathsig KILL unshare --net --kill-child sleep 1000000 &
    sw=$!
    GSC_PIDS="$sw"
    echo "$sw" >"$GSC_DIR/switch.pid"
    # The switch's network namespace exists once unshare has exec'd sleep.
    for _ in $(seq 100); do [ "$(readlink /proc/$sw/exe 2>/dev/null)" = "$(readlink -f "$(command -v sleep)")" ] && break; sleep 0.02; done
    nsenter -t "$sw" --net ip link add br0 type bridge || return 1
    nsenter -t "$sw" --net ip link set br0 up || return 1
    # A checkout or build under /tmp (a CI clone, say) must stay visible on
    # the hosts: its top directory is moved onto each host's new /tmp.
    local keep="" p top carry
    for p in "${GS_TOP_BUILDDIR:-}" "${GS_TOP_SRCDIR:-}" "$GSC_HOSTD"; do
        case "$p" in /tmp/?*) top=/tmp/$(echo "${p#/tmp/}" | cut -d/ -f1)
            case " $keep " in *" $top "*) ;; *) keep="$keep $top" ;; esac ;;
        esac
    done
    echo "$keep" >"$GSC_DIR/keep"
    # Each host's own /run/gsrun (where root makes users' batch and step
    # dirs), as on real nodes: a tmpfs on a mount point made here if the
    # machine has none, and removed again by cluster_down.
    if [ ! -d /run/gsrun ]; then
        mkdir -m 0755 /run/gsrun && touch "$GSC_DIR/made-run-gsrun"
    fi
    for i in $(seq "$n"); do
        carry="" k=0
        for top in $keep; do
            k=$((k + 1))
            mkdir -p "$GSC_DIR/carry$i.$k"
            carry="$carry mount --bind '$top' '$GSC_DIR/carry$i.$k' &&"
        done
        # Its own /dev/shm too: MPI libraries' shared-memory segments of a
        # killed job (Open MPI's vader_segment.*) stay on the host, not the machine.
        carry="$carry mount -t tmpfs -o mode=1777 tmpfs /tmp && mount -t tmpfs -o mode=0755 tmpfs /run/gsrun &&
            mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&"
        k=0
        for top in $keep; do
            k=$((k + 1))
            carry="$carry mkdir -p '$top' && mount --move '$GSC_DIR/carry$i.$k' '$top' &&"
        done
        local enter=exec cgns="" mp opts parent
        if [ -n "$cgs" ]; then
            # Into the host's cgroups before unshare, so that its cgroup
            # namespace is rooted there; then the hierarchies mounted anew.
            enter="" cgns=--cgroup
            [ "$(cluster_cgroup_can)" = v1 ] && carry="$carry mount -t tmpfs -o mode=0755 tmpfs /sys/fs/cgroup &&"
            while read -r mp opts parent; do
                parent=$parent/${GSC_DIR##*/}/host$i
                mkdir "$parent" && cgroup_cpuset_inherit "$parent" || return 1
                enter="$enter echo \$\$ >'$parent/cgroup.procs' &&"
                if [ "$opts" = cgroup2 ]; then
                    carry="$carry mkdir -p '$mp' && mount -t cgroup2 cgroup2 '$mp' &&"
                else
                    carry="$carry mkdir -p '$mp' && mount -t cgroup -o '$opts' cgroup '$mp' &&"
                fi
            done <<<"$cgs"
            for mp in /sys/fs/cgroup/*; do # Debian's cpu -> cpu,cpuacct links
                [ -L "$mp" ] && carry="$carry ln -s '$(readlink "$mp")' '$mp' &&"
            done
            enter="$enter exec"
        fi
        # (sh -c: one process to the end, so $! is the one that unshare runs as)
        sh -c "$enter setpriv --pdeathsig KILL unshare --net --uts --mount --pid --ipc $cgns --fork --kill-child --mount-proc \
            --propagation private sh -c \"hostname host$i && $carry
                mount --bind '$GSC_DIR/hosts' /etc/hosts && exec '$GSC_HOSTD' serve '$GSC_DIR/host$i.sock'\"" \
            </dev/null &
        GSC_PIDS="$GSC_PIDS $!"
        echo $! >"$GSC_DIR/host$i.pid"
    done
    for i in $(seq "$n"); do
        for _ in $(seq 250); do [ -S "$GSC_DIR/host$i.sock" ] && break; sleep 0.02; done
        [ -S "$GSC_DIR/host$i.sock" ] || { echo "cluster: host$i did not start" >&2; return 1; }
        # The init's PID as the machine sees it: the child of unshare.
        pid=$(cat /proc/"$(cat "$GSC_DIR/host$i.pid")"/task/*/children | tr -d ' ')
        nsenter -t "$sw" --net ip link add "v$i" type veth peer name eth0 netns "$pid" || return 1
        nsenter -t "$sw" --net ip link set "v$i" master br0 up || return 1
        nsenter -t "$pid" --net sh -c "ip link set lo up && ip addr add 198.18.0.$i/24 dev eth0 &&
            ip link set eth0 up" || return 1
    done
}

on_host() { # on_host HOST COMMAND
    local h=$1
    shift
    "$GSC_HOSTD" rsh "$GSC_DIR" "$h" "$*"
}

cluster_rsh_agent() { echo "$GSC_HOSTD rsh $GSC_DIR"; }

cluster_count_exe() { # cluster_count_exe HOST PATH: processes on HOST running PATH, not
    # counting those forked by another such process (an MPS daemon's servers)
    on_host "$1" "n=0; for p in /proc/[0-9]*; do
        [ \"\$(readlink \$p/exe)\" = '$2' ] || continue
        pp=\$(awk '/^PPid:/ {print \$2}' \$p/status 2>/dev/null)
        [ \"\$(readlink /proc/\$pp/exe)\" = '$2' ] || n=\$((n+1))
    done; echo \$n"
}

cluster_leftovers() { # cluster_leftovers HOST: what is left there (empty: nothing)
    on_host "$1" 'for p in /proc/[0-9]*; do
            n=${p#/proc/}; [ "$n" = 1 ] || [ "$n" = $$ ] && continue
            c=$(tr "\0" " " 2>/dev/null <$p/cmdline); [ -n "$c" ] || continue
            case "$c" in *"for p in /proc"*) continue;; esac
            echo "process $n: $c"
        done
        keep=" $(cat '"$GSC_DIR"'/keep) "
        for f in /tmp/* /tmp/.[!.]* /run/gsrun/* /dev/shm/gsrun*; do
            [ -e "$f" ] || continue
            case "$f" in /tmp/ompi.* | /tmp/prterun.* | /tmp/prte.*) continue;; esac
            # A user private base (the rank prefix makes it and leaves it,
            # as a runtime dir) counts by what is in it.
            case "$f" in /tmp/gsrun-[0-9]* | /dev/shm/gsrun-[0-9]*)
                for g in "$f"/* "$f"/.[!.]*; do [ -e "$g" ] && echo "file $g"; done
                continue;; esac
            case "$keep" in *" $f "*) continue;; esac
            case "$f" in /tmp/gsrun.* | /dev/shm/gsrun.*) # what is in it says who left it
                echo "file $f ($(find "$f" -mindepth 1 -maxdepth 3 2>/dev/null | head -12 | tr "\n" " "))"
                continue;; esac
            echo "file $f"
        done'
}

cluster_down() {
    [ -n "$GSC_DIR" ] || return 0
    # SIGKILL to unshare: --kill-child takes its child (the host's init) down,
    # and with it the whole PID namespace.
    for p in $GSC_PIDS; do kill -KILL "$p" 2>/dev/null; done
    for p in $GSC_PIDS; do wait "$p" 2>/dev/null; done
    [ -f "$GSC_DIR/made-run-gsrun" ] && rmdir /run/gsrun 2>/dev/null
    cluster_cgroups_remove "$GSC_DIR"
    rm -rf "$GSC_DIR"
    GSC_DIR=""
    GSC_PIDS=""
}

# --- cgroups of the hosts (GSC_CGROUP=1) -------------------------------------

cluster_cgroup_mounts() { # the machine's hierarchies, one per line:
    # "MOUNTPOINT OPTIONS PARENT": OPTIONS cgroup2, or a v1 hierarchy's
    # controllers as mount options; PARENT the caller's own cgroup there (the
    # cluster's go inside it, so that the machine's limits still hold). On a
    # hybrid machine the v1 hierarchies only: Slurm refuses a mix anyway.
    if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
        echo "/sys/fs/cgroup cgroup2 /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)"
        return 0
    fi
    awk 'FNR == NR { split($0, f, ":"); own[f[2]] = substr($0, length(f[1] f[2]) + 3); next }
         $3 == "cgroup" && $2 ~ "^/sys/fs/cgroup/" {
            n = split($4, o, ","); c = ""
            for (i = 1; i <= n; i++)
                if (o[i] !~ /^(rw|ro|nosuid|nodev|noexec|relatime|noatime|clone_children|xattr)$/)
                    c = c (c == "" ? "" : ",") o[i]
            if (!(c in own)) next
            p = own[c] == "/" ? "" : own[c]
            sub(/^name=/, "none,name=", c); print $2, c, $2 p }' /proc/self/cgroup /proc/mounts | grep .
}

cluster_cgroup_can() {
    local cgs mp
    cgs=$(cluster_cgroup_mounts) || { echo "no cgroup hierarchy mounted"; return 1; }
    mp=$(echo "$cgs" | head -1 | cut -d' ' -f3)
    mkdir "$mp/gsc-probe.$$" 2>/dev/null && rmdir "$mp/gsc-probe.$$" ||
        { echo "cannot make cgroups in $mp"; return 1; }
    unshare --cgroup true 2>/dev/null || { echo "cannot create cgroup namespaces"; return 1; }
    case "$cgs" in *" cgroup2 "*) echo v2 ;; *) echo v1 ;; esac
}

cgroup_cpuset_inherit() { # a new v1 cpuset takes no task until given CPUs and nodes
    local f
    for f in cpuset.cpus cpuset.mems; do
        [ -f "$1/$f" ] && { cat "$1/../$f" >"$1/$f" || return 1; }
    done
    return 0
}

cluster_cgroups_remove() { # cluster_cgroups_remove DIR: a cluster's cgroups, deepest first
    # (Slurm's inside them too), once their processes are gone: a dying
    # process keeps its cgroup busy for a moment.
    local top
    [ -f "$1/cgroups" ] || return 0
    while read -r top; do
        for _ in $(seq 50); do
            find "$top" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$top" ] || break
            sleep 0.1
        done
    done <"$1/cgroups"
    return 0
}
