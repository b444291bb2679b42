#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: the dependency order of the whole tree (doc/architecture.md,
# "Layers"): runtime/'s folders, the agent's parts and rooms, and the front
# ends.
#
# A file may include and call only what is in its own layer or below it;
# in the agent (layers 7 to 18) only strictly below, its own part aside;
# every file has a layer:
#
#   0  runtime/core/    errors, processes, sockets, settings, sizes, text
#   1  runtime/wire/    the agent's protocol and command line
#   2  runtime/gpu/     NVML, CPUs near a GPU, one MPS control daemon
#   3  runtime/plan/    policy and placement (pure)
#   4  runtime/files/   run dirs, state and status files, pre-flight
#   5  runtime/rank/    the rank side: join, client environment, job key,
#                       helper programs
#   6  runtime/batch/   a batch job's node: provisioning, root's keeper and end
#                       of a job (for the front ends; the agent never uses it)
#   7  report ranks placer lister attach
#   8  guard                              12 agent_share_place agent_fault_job
#   9  daemons                            13 agent_share agent_lease_watch
#   10 agent_int job_int service_int      14 agent_memory agent_lease
#      (each room's struct and names)     15 agent_watch agent_watch_end
#      agent_setup agent_publish             agent_stuck
#      agent_pack agent_fault_word        16 agent_serve
#      agent_status agent_share_tell      17 agent (the job's states),
#   11 agent_loop agent_fault agent_run      agent_service (the service's)
#      agent_share_wedge agent_lease_gpus 18 agent_main (gsrun-agent)
#      agent_confirm
#   pmix/               uses runtime/core only
#   launcher/ ompi/ slurm/ (front ends) use runtime/ (not the agent) and pmix/,
#                       never each other (launcher/ is gsrun's own)
#
# The agent's parts live in three rooms, a folder each: runtime/job/ (a
# job's agent), runtime/service/ (the user's node service) and
# runtime/agent/ (what both use). Neither program's room uses the other's;
# what both use uses neither (they reach it through their hooks and
# tables); agent_main picks the program. Each room's header (agent_int.h,
# job_int.h, service_int.h: its struct and what its parts give one
# another) is included by each of its parts and by the rooms above it.
# TAP output. GS_LAYERS_ROOT points it at another tree (its own test),
# GS_LAYERS_ONLY at one file of it.
S=${GS_LAYERS_ROOT:-${GS_TOP_SRCDIR:?run through make check}}
n=0 bad=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); bad=$((bad + 1)); echo "not ok $n - $*"; }

# The layer of a source path (file or header), and its part's name.
part_of() {
    local f=$1 b
    b=$(basename "$f")
    [ "$b" = agent.h ] || b=${b%.*}
    case $f in
    runtime/agent/* | runtime/job/* | runtime/service/*)
        case $b in
        # What both programs share (agent_int.h) and the agent's types
        # (agent.h); each program's own struct is its room's *_int.h.
        agent_int | agent.h) echo agent_int ;;
        *) echo "$b" ;;
        esac
        ;;
    runtime/*/*) f=${f#runtime/}; echo "${f%%/*}" ;;
    pmix/* | launcher/* | ompi/* | slurm/*) echo "${f%%/*}" ;;
    *) echo other ;;
    esac
}
layer_of() { # part -> layer
    case $1 in
    core) echo 0 ;; wire) echo 1 ;; gpu) echo 2 ;; plan) echo 3 ;; files) echo 4 ;; rank) echo 5 ;;
    batch) echo 6 ;;
    report | ranks | placer | lister | attach) echo 7 ;;
    guard) echo 8 ;;
    daemons) echo 9 ;;
    agent_int | job_int | service_int) echo 10 ;;
    agent_setup | agent_publish | agent_pack | agent_fault_word | agent_status | agent_share_tell) echo 10 ;;
    agent_loop | agent_fault | agent_share_wedge | agent_lease_gpus | agent_run | agent_confirm) echo 11 ;;
    agent_share_place | agent_fault_job) echo 12 ;;
    agent_share | agent_lease_watch) echo 13 ;;
    agent_memory | agent_lease) echo 14 ;;
    agent_watch | agent_watch_end | agent_stuck) echo 15 ;;
    agent_serve) echo 16 ;;
    agent | agent_service) echo 17 ;;
    agent_main) echo 18 ;;
    pmix) echo 1 ;;
    launcher | ompi | slurm) echo 20 ;;
    *) echo 99 ;;
    esac
}
# Cached, without a fork after the first: a whole pass asks tens of
# thousands of times. Each sets REPLY.
declare -A LAYER_C ROOM_C PART_C OWN_H
L_of() {
    [ -n "${LAYER_C[$1]+x}" ] || LAYER_C[$1]=$(layer_of "$1")
    REPLY=${LAYER_C[$1]}
}
P_of() {
    [ -n "${PART_C[$1]+x}" ] || PART_C[$1]=$(part_of "$1")
    REPLY=${PART_C[$1]}
}
in_agent() { L_of "$1"; [ "$REPLY" -ge 7 ] && [ "$REPLY" -le 18 ]; }
is_int() { case $1 in agent_int | job_int | service_int) return 0 ;; esac; return 1; }
# The agent's rooms, one folder each: gsrun-agent runs one of two programs,
# a job's agent (runtime/job/) or the user's node service
# (runtime/service/), over what both use (runtime/agent/: node).
room_of() {
    local d
    [ "$1" = agent_main ] && { echo main; return; } # picks the program
    [ "$1" = agent_int ] && { echo node; return; }
    for d in job service agent; do
        if [ -e "$S/runtime/$d/$1.c" ] || [ -e "$S/runtime/$d/$1.h" ]; then
            [ $d = agent ] && echo node || echo $d
            return
        fi
    done
    echo none
}
# Whether part me may use part p across rooms: never the other program's,
# and what both use reaches neither program's parts (their hooks and
# tables reach it).
R_of() {
    [ -n "${ROOM_C[$1]+x}" ] || ROOM_C[$1]=$(room_of "$1")
    REPLY=${ROOM_C[$1]}
}
room_ok() {
    local rm rp
    R_of "$1"; rm=$REPLY
    R_of "$2"; rp=$REPLY
    case $rm:$rp in
    job:service | service:job) return 1 ;;
    node:service | node:job) return 1 ;;
    esac
    return 0
}

# The public names each runtime folder's modules and each agent part
# define: gs_<module>_*, GS_<MODULE>_* (from the file names), and for the
# agent's files the gs_agent_* functions each one defines.
names_of() {
    local p=$1 f m re=""
    case $p in
    core | wire | gpu | plan | files | rank | batch)
        for f in "$S"/runtime/"$p"/*.h; do
            m=$(basename "$f" .h)
            case $m in gs_error | limits) continue ;; esac
            re="$re|gs_${m}_[a-z_]+|GS_${m^^}_[A-Z_]+"
        done
        ;;
    report) re='|gs_report_[a-z_]+|GS_REPORT_[A-Z_]+' ;;
    ranks) re='|gs_ranks_[a-z_]+|gs_rank_t|GS_RANKS_[A-Z_]+' ;;
    placer) re='|gs_placer_[a-z_]+|GS_PLACER_WAIT' ;;
    lister) re='|gs_lister_[a-z_]+' ;;
    attach) re='|gs_attach_[a-z_]+|GS_ATTACH_[A-Z_]+' ;;
    # Each program's struct, and the service's leases.
    job_int) re='|gs_job_t|gs_job|gs_job_const' ;;
    service_int) re='|gs_service_t|gs_service|gs_service_const|gs_agent_lease_t|GS_AGENT_LEASES_MAX|GS_AGENT_GPUS_WAITING' ;;
    guard) re='|gs_guard_[a-z_]+' ;;
    daemons) re='|gs_daemons_[a-z_]+|GS_DAEMON_[A-Z_]+' ;;
    agent | agent_*)
        # Its functions, and its tables (a program's states and messages).
        for m in $(grep -hoE '^[a-z][a-z_ *]*\bgs_agent_[a-z_]+\(' "$S"/runtime/{agent,job,service}/"$p".c 2>/dev/null |
            grep -oE 'gs_agent_[a-z_]+\(' | tr -d '(') $(grep -hoE '^const gs_agent_[a-z_]+_t gs_agent_[a-z_]+\[' \
            "$S"/runtime/{agent,job,service}/"$p".c 2>/dev/null | grep -oE 'gs_agent_[a-z_]+\[' | tr -d '['); do
            re="$re|$m"
        done
        ;;
    esac
    echo "${re#|}"
}

own_headers() { # layer -> the runtime headers at or below it (outside the agent)
    local d
    for d in core wire gpu plan files rank batch; do
        [ "$(layer_of "$d")" -le "$1" ] && ls "$S"/runtime/"$d"/*.h
    done
}

files=$(cd "$S" && ls runtime/*/*.[ch] pmix/*.[ch] launcher/*.[ch] ompi/*.c slurm/*.c 2>/dev/null)
# GS_LAYERS_ONLY: one file checked (the planted copies below); a whole pass
# forks tens of thousands of greps, minutes on a loaded 2-core machine.
[ -n "${GS_LAYERS_ONLY:-}" ] && files=$GS_LAYERS_ONLY
[ -n "$files" ] || { echo "not ok 1 - no source under $S"; echo "1..1"; exit 1; }
# A part's room is its folder: a name in two of the agent's folders would
# give both the first one's room.
twice=$(cd "$S" && for d in agent job service; do
    for f in runtime/$d/*.[ch]; do [ -e "$f" ] && echo "$(part_of "$f") $d"; done | sort -u
done | awk '{print $1}' | sort | uniq -d | tr '\n' ' ')
if [ -z "$twice" ]; then
    ok "each of the agent's parts is in one room's folder"
else
    not_ok "parts in two rooms' folders (a part's room is its folder): $twice"
fi
stray=$(cd "$S" && ls runtime/*.[ch] 2>/dev/null | tr '\n' ' ')
if [ -z "$stray" ]; then
    ok "every runtime file is in a layer's folder"
else
    not_ok "runtime files outside the layer folders: $stray"
fi
parts="core wire gpu plan files rank batch report ranks placer lister attach guard daemons job_int service_int agent_setup agent_publish agent_pack agent_fault_word agent_status agent_share_tell agent_loop agent_fault agent_share_wedge agent_lease_gpus agent_run agent_confirm agent_share_place agent_fault_job agent_share agent_lease_watch agent_memory agent_lease agent_watch agent_watch_end agent_stuck agent_serve agent agent_service agent_main"
declare -A RE
for p in $parts; do RE[$p]=$(names_of "$p"); done

for f in $files; do
    P_of "$f"; me=$REPLY
    L_of "$me"; L=$REPLY
    why=""
    if [ "$me" != other ] && [ "$L" = 99 ]; then
        not_ok "$f (part $me): in no layer: give it one here and in doc/architecture.md"
        continue
    fi
    # Includes of the tree's own headers.
    for h in $(sed -nE 's/^#include "((runtime|pmix|launcher|ompi|slurm)\/[a-z_/]*\.h)".*/\1/p' "$S/$f"); do
        P_of "$h"; p=$REPLY
        [ "$p" = "$me" ] && continue
        L_of "$p"; pl=$REPLY
        if ! room_ok "$me" "$p"; then
            why="$why includes $h (the $(room_of "$p") room's, from the $(room_of "$me") room);"
        elif is_int "$p" && [ "$L" -ge 10 ] && ! { is_int "$me" && [ "$p" != agent_int ]; }; then
            : # its room's header (or what both share): each part's own view
        elif in_agent "$me" && [ "$p" = batch ]; then
            why="$why includes $h (a batch job's provisioning is the front ends', never the agent's);"
        elif in_agent "$me" && [ "$me" != agent_main ] && [ "$pl" -ge "$L" ] && [ "$p" != agent_int ]; then
            why="$why includes $h (layer $pl);"
        elif [ "$pl" -gt "$L" ]; then
            why="$why includes $h (layer $pl);"
        elif [ "$L" -eq 20 ] && [ "$pl" -eq 20 ]; then
            why="$why includes $h (another front end's);"
        elif [ "$L" -eq 20 ] && in_agent "$p" && [ "$me" != agent_main ]; then
            why="$why includes $h (the agent: only gsrun-agent's main may);"
        elif [ "$me" = pmix ] && [ "$pl" -gt 0 ]; then
            why="$why includes $h (pmix/ uses runtime/core only);"
        fi
    done
    # Names defined in a higher layer (or, in the agent, beside it), used
    # here: comments and include guards aside.
    code=$(grep -vE '^\s*(/?\*|//)|^#(ifndef|define) GS_[A-Z_]*_H$' "$S/$f")
    # Its identifiers, once: each part's names are matched against them
    # in the shell, not by a grep for each part.
    words=$(echo "$code" | grep -oE '\b[A-Za-z_][A-Za-z0-9_]*\b' | sort -u)
    for p in $parts; do
        [ "$p" = "$me" ] && continue
        L_of "$p"; pl=$REPLY
        # agent.h declares both programs' mains (agent_main picks one).
        if [ "$f" != runtime/agent/agent.h ] && ! room_ok "$me" "$p" && [ -n "${RE[$p]}" ]; then
            used=""
            for u in $words; do [[ $u =~ ^(${RE[$p]})$ ]] && used="$used$u "; done
            [ -n "$used" ] && why="$why uses the $(room_of "$p") room's $p from the $(room_of "$me") room: $used;"
            continue
        fi
        is_int "$p" && continue # a room's header: its room is what counts
        # A front end's use of the agent's names is checked at every layer
        # (below them by number, but only gsrun-agent may use them).
        if in_agent "$me"; then
            [ "$pl" -lt "$L" ] && continue
        elif ! { [ "$L" -eq 20 ] && in_agent "$p"; }; then
            [ "$pl" -le "$L" ] && continue
        fi
        is_int "$me" && continue # declares its room's parts' functions
        [ "$L" -eq 20 ] && ! in_agent "$p" && continue
        [ -n "${RE[$p]}" ] || continue
        used=""
        [ -n "${OWN_H[$L]+x}" ] || OWN_H[$L]=$(own_headers "$L")
        for u in $words; do
            [[ $u =~ ^(${RE[$p]})$ ]] || continue
            # A name that a header of this layer or below defines is its own
            # (config.h's GS_MPS_ON is a setting, not the MPS module's).
            grep -qwE "(define|typedef.*|[a-z_]+ \**)$u|$u[,;= ]" ${OWN_H[$L]} 2>/dev/null || used="$used$u "
        done
        [ -n "$used" ] && why="$why uses $p (layer $pl): $used;"
    done
    if [ -z "$why" ]; then ok "$f (layer $L: $me)"; else not_ok "$f (layer $L: $me):$why"; fi
done

# The check itself: a back-arrow planted in a copy of the tree fails it.
# Each call planted across the rooms goes to a lower layer: only the room
# rule can fail it.
if [ -z "${GS_LAYERS_ROOT:-}" ]; then
    tmp=$(mktemp -d /tmp/gs-layers.XXXXXX)
    trap 'rm -rf "$tmp"' EXIT
    copy() { # the tree, afresh into $tmp
        rm -rf "${tmp:?}"/*
        (cd "$S" && tar cf - runtime pmix launcher ompi slurm) | tar xf - -C "$tmp"
    }
    fails_on() { # file of the copy -> whether the check fails on it
        ! GS_LAYERS_ROOT=$tmp GS_LAYERS_ONLY=$1 bash "$0" >/dev/null 2>&1
    }
    plant() { # file line -> whether the check fails on the copy with line in file
        copy
        sed -i "0,/^#include \"/s||$2\n#include \"|" "$tmp/$1"
        fails_on "$1"
    }
    must_fail() { # what was planted, then the command that plants it and checks
        local what=$1
        shift
        if "$@"; then ok "$what fails the check"; else not_ok "$what passes the check"; fi
    }
    new_file() { # an agent file in no layer
        copy
        printf '#include "runtime/agent/agent_int.h"\n' >"$tmp/runtime/agent/agent_new.c"
        fails_on runtime/agent/agent_new.c
    }
    twice() { # a part in two rooms' folders
        copy
        cp "$tmp/runtime/job/placer.h" "$tmp/runtime/service/placer.h"
        fails_on runtime/job/placer.c
    }
    must_fail "a planted include of files/ in core/" \
        plant runtime/core/proc.c '#include "runtime/files/rundir.h"'
    must_fail "a planted call from agent_serve.c into agent.c" \
        plant runtime/job/agent_serve.c 'static void f(void) { gs_agent_main(0); }'
    must_fail "a planted include of batch/ in rank/" \
        plant runtime/rank/node.c '#include "runtime/batch/provision.h"'
    must_fail "a new agent file in no layer" new_file
    must_fail "a part in two rooms' folders" twice
    must_fail "a planted call from agent_share_place.c into agent_share.c" \
        plant runtime/service/agent_share_place.c 'static void f(void) { gs_agent_share_hold(0); }'
    must_fail "a planted call from the job's room (agent_serve.c) into the service's" \
        plant runtime/job/agent_serve.c 'static void f(void) { gs_agent_share_hold(0); }'
    must_fail "a planted call from the service's room (agent_share.c) into the job's" \
        plant runtime/service/agent_share.c 'static void f(void) { gs_agent_job_status(0, 0); }'
    must_fail "a planted include of the job's placer.h in the service's room" \
        plant runtime/service/agent_share_place.c '#include "runtime/job/placer.h"'
    must_fail "a planted include of the job's job_int.h in the service's room" \
        plant runtime/service/agent_share.c '#include "runtime/job/job_int.h"'
    must_fail "a planted include of the service's service_int.h in the job's room" \
        plant runtime/job/agent_lease.c '#include "runtime/service/service_int.h"'
    must_fail "a planted include of the job's job_int.h in what both use" \
        plant runtime/agent/agent_loop.c '#include "runtime/job/job_int.h"'
    must_fail "a planted use of the job's struct in the service's room" \
        plant runtime/service/agent_share_wedge.c 'static int f(void *a) { return ((gs_job_t *)a)->share_fd; }'
    must_fail "a planted use of the service's struct in the job's room" \
        plant runtime/job/agent_stuck.c 'static int f(void *a) { return ((gs_service_t *)a)->nleases; }'
    must_fail "a planted use of the job's struct in what both share (agent_int.h)" \
        plant runtime/agent/agent_int.h 'typedef gs_job_t gs_x_t;'
    must_fail "a planted use of the service's message table in the job's room" \
        plant runtime/job/agent_serve.c 'static const void *f = gs_agent_service_messages;'
    must_fail "a planted include of the service's lister.h in the job's room" \
        plant runtime/job/agent_watch.c '#include "runtime/service/lister.h"'
    must_fail "a planted call from what both use (agent_publish.c) into the service's room" \
        plant runtime/agent/agent_publish.c 'static void f(void) { gs_lister_start(); }'
    must_fail "a planted call from what both use (agent_fault.c) into the job's room" \
        plant runtime/agent/agent_fault.c 'static void f(void) { gs_agent_pack(0, 0, 0); }'
    must_fail "a planted call from a front end (launcher/gsrun.c) into the agent's daemons" \
        plant launcher/gsrun.c 'static void f(void) { gs_daemons_init(0, 0, 0, 0, 0, 0, 0); }'
    must_fail "a planted include of launcher/ in slurm/" \
        plant slurm/srun_task.c '#include "launcher/options.h"'
fi
echo "1..$n"
[ $bad -eq 0 ]
