# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the GPU scripts (source this file).
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
