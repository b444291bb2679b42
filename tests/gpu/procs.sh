# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the GPU scripts (source this file).
#
# gpu_ready TOP BUILD: exits 77 with a SKIP line where no NVIDIA GPU is
# (nvidia-smi -L fails); builds TOP into BUILD where gsrun or mps_probe is
# missing; lets mpirun run as root.
gpu_ready() {
    if ! nvidia-smi -L >/dev/null 2>&1; then
        echo "1..0 # SKIP no NVIDIA GPU here (nvidia-smi -L failed)"
        echo "0 passed, 0 failed, 1 skipped"
        exit 77
    fi
    if [ ! -x "$2/launcher/gsrun" ] || [ ! -x "$2/examples/mps_probe" ]; then
        (cd "$1" && ./autogen.sh >/dev/null) || exit 1
        mkdir -p "$2" && (cd "$2" && "$1/configure" -q && make -s -j"$(nproc)") || exit 1
    fi
    [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}
#
# GS_ROOT: where gsrun keeps its dirs here (runtime/files/rundir.c): TMPDIR
# when set (and not /tmp itself), else /dev/shm where it is a shared
# directory anyone may write (sticky), else /tmp.
if [ -n "${TMPDIR:-}" ] && [ "${TMPDIR%/}" != /tmp ]; then
    GS_ROOT=$TMPDIR
elif [ -d /dev/shm ] && [ ! -L /dev/shm ] && [ -k /dev/shm ] && [ -w /dev/shm ]; then
    GS_ROOT=/dev/shm
else
    GS_ROOT=/tmp
fi
#
# live_procs PATTERN: the PIDs of live (not zombie) processes whose name
# (/proc/PID/comm, 15 characters at most) matches the glob PATTERN. By name,
# not by /proc/PID/exe: CUDA programs and MPS daemons make themselves
# non-dumpable, and where root lacks CAP_SYS_PTRACE (a container, such as the
# GPU machine here) their exe link cannot be read: a check by exe saw no MPS
# process and no rank at all. Builtins only, so a poll every 10 ms is cheap.
live_procs() {
    local p c st
    for p in /proc/[0-9]*; do
        read -r c 2>/dev/null <"$p/comm" || continue
        case "$c" in $1) ;; *) continue ;; esac
        read -r st 2>/dev/null <"$p/stat" || continue
        st=${st##*) }
        [ "${st%% *}" = Z ] && continue
        printf '%s ' "${p#/proc/}"
    done
}

# pin_one_gpu: for a script that measures one GPU. On a node of several GPUs
# gsrun spreads a job's ranks over all of them, while plain mpirun and MPS
# started by hand put every rank on CUDA's device 0: the script's
# expectations and its side-by-side figures mean one GPU. So it runs on the
# first GPU CUDA_VISIBLE_DEVICES names (GPU 0 when unset) and says so.
pin_one_gpu() {
    local n
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES%%,*}
    echo "# on GPU $CUDA_VISIBLE_DEVICES of the node's $n (CUDA_VISIBLE_DEVICES): this script measures one GPU"
}

# share_clean WHAT BASE: waits up to 20 s for every MPS process, the user's
# shared agent (gsrun-share), its dir BASE/mps-share and gsrun's run dirs
# (/tmp/gsrun.*, /dev/shm/gsrun.*) to go, then says ok or not ok (the caller's ok and notok);
# MPS processes still left are killed so that the next case starts clean.
share_clean() {
    local what=$1 base=$2 p
    for _ in $(seq 200); do
        [ -z "$(live_procs 'nvidia-cuda-mps*')$(live_procs gsrun-share)" ] && [ ! -d "$base/mps-share" ] &&
            ! ls -d /tmp/gsrun.* /dev/shm/gsrun.* >/dev/null 2>&1 && break
        sleep 0.1
    done
    if [ -z "$(live_procs 'nvidia-cuda-mps*')$(live_procs gsrun-share)" ] && [ ! -d "$base/mps-share" ] &&
        ! ls -d /tmp/gsrun.* /dev/shm/gsrun.* >/dev/null 2>&1; then
        ok "$what: no MPS process, no shared agent and no run directory left"
    else
        notok "$what: left: $(live_procs 'nvidia-cuda-mps*') $(live_procs gsrun-share) $(ls -d "$base/mps-share" /tmp/gsrun.* /dev/shm/gsrun.* 2>/dev/null)"
        for p in $(live_procs 'nvidia-cuda-mps*'); do kill -9 "$p" 2>/dev/null; done
    fi
}

# end_share_of UID: ends that user's shared agents (SIGTERM) and waits up to
# 20 s for no MPS process and no shared agent; prints what is left.
end_share_of() {
    local p
    for p in $(live_procs gsrun-share); do
        [ "$(stat -c %u "/proc/$p")" = "$1" ] && kill -TERM "$p"
    done
    for _ in $(seq 200); do
        [ -z "$(live_procs 'nvidia-cuda-mps*')$(live_procs gsrun-share)" ] && break
        sleep 0.1
    done
    echo "$(live_procs 'nvidia-cuda-mps*')$(live_procs gsrun-share)"
}

# mps_controls: how many MPS control daemons run. A child a daemon forks is
# named as it until it execs the server, so only those whose parent is not
# one count; and only daemons (-f, -d), not the short-lived command clients
# an agent runs (start_server, get_server_list), once counted as a second
# daemon.
mps_controls() {
    ps -eo pid=,ppid=,args= | awk '$3 ~ /nvidia-cuda-mps-control/ && ($4 == "-f" || $4 == "-d") { ctl[$1] = $2 }
        END { n = 0; for (p in ctl) if (!(ctl[p] in ctl)) n++; print n }'
}
