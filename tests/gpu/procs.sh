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
