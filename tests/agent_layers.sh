#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The node agent's dependency order (doc/architecture.md), checked: a file
# may include and call only parts below its own layer (and its own), never
# a part above or beside it.
#
#   0  runtime/*.c           the runtime: policy, MPS control, GPUs, files
#   1  report  ranks  placer the agent's independent parts
#   2  guard                 uses ranks, report
#   3  daemons               uses guard, report
#   4  agent (agent.c, agent_setup.c, agent_serve.c, agent_publish.c, agent_int.h,
#      agent.h, agent_main.c)
#
# Outside runtime/agent/ nothing uses the agent (gsrun-agent's main is
# runtime/agent/agent_main.c). TAP output.
S=${GS_TOP_SRCDIR:?run through make check}
n=0 bad=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); bad=$((bad + 1)); echo "not ok $n - $*"; }

part_of() { # file -> part name
    local b
    b=$(basename "$1")
    b=${b%.*}
    case $b in
    agent | agent_* ) echo agent ;;
    *) echo "$b" ;;
    esac
}
layer_of() { # part -> layer
    case $1 in
    report | ranks | placer) echo 1 ;;
    guard) echo 2 ;;
    daemons) echo 3 ;;
    agent) echo 4 ;;
    *) echo 0 ;;
    esac
}
prefix_of() { # part -> the regex of its public names
    case $1 in
    report) echo 'gs_report_[a-z_]+|GS_REPORT_[A-Z_]+' ;;
    ranks) echo 'gs_ranks_[a-z_]+|gs_rank_t|GS_RANKS_[A-Z_]+' ;;
    placer) echo 'gs_placer_[a-z_]+|GS_PLACER_WAIT' ;;
    guard) echo 'gs_guard_[a-z_]+' ;;
    daemons) echo 'gs_daemons_[a-z_]+|GS_DAEMON_[A-Z_]+' ;;
    agent) echo 'gs_agent_[a-z_]+|GS_AGENT_[A-Z_]+' ;;
    esac
}
parts="report ranks placer guard daemons agent"

# Every file of the agent, and every runtime file below it.
files=$(cd "$S" && ls runtime/agent/*.[ch] runtime/*.[ch])
[ -n "$files" ] || { echo "not ok 1 - no source under $S/runtime"; echo "1..1"; exit 1; }
for f in $files; do
    if [ "${f#runtime/agent/}" != "$f" ]; then me=$(part_of "$f"); else me=runtime; fi
    L=$(layer_of "$me")
    why=""
    # Includes of agent headers.
    for h in $(sed -n 's/^#include "runtime\/agent\/\([a-z_]*\)\.h".*/\1/p' "$S/$f"); do
        p=$(part_of "$h")
        [ "$p" = "$me" ] && continue
        pl=$(layer_of "$p")
        if [ "$pl" -ge "$L" ]; then why="$why includes agent/$h.h (layer $pl);"; fi
    done
    # Names of other parts used (comment lines and include guards aside).
    code=$(grep -vE '^\s*(/?\*|//)|^#(ifndef|define) GS_[A-Z_]*_H$' "$S/$f")
    for p in $parts; do
        [ "$p" = "$me" ] && continue
        pl=$(layer_of "$p")
        [ "$pl" -lt "$L" ] && continue
        used=$(echo "$code" | grep -oE "\b($(prefix_of "$p"))\b" | sort -u | tr '\n' ' ')
        [ -n "$used" ] && why="$why uses $p (layer $pl): $used;"
    done
    if [ -z "$why" ]; then ok "$f (layer $L: $me)"; else not_ok "$f (layer $L: $me):$why"; fi
done

# Outside runtime/: only gsrun-agent's main uses the agent.
users=$(cd "$S" && grep -lE '#include "runtime/agent/|gs_agent_main' launcher/*.c ompi/*.c slurm/*.c discovery/*.c 2>/dev/null | tr '\n' ' ')
if [ "$users" = "" ]; then
    ok "only runtime/agent/agent_main.c (gsrun-agent) uses the agent outside runtime/agent/"
else
    not_ok "the agent is used outside runtime/agent/ by: $users(only runtime/agent/agent_main.c may)"
fi
echo "1..$n"
[ $bad -eq 0 ]
