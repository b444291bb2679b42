#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/files/status_prom.c, launcher/status_main.c, doc/metrics.md
# `gsrun status --format=prometheus` as a site uses it (doc/metrics.md): a
# job's status file written by hand (ranks of known and unknown memory, a
# GPU UUID that needs the label escapes), its output passed by promtool,
# then read back through node_exporter's textfile collector with every
# sample, label and value as gsrun wrote them and no scrape error. promtool
# and node_exporter missing fail the test (CI installs them:
# tests/install-deps.sh) unless GS_ALLOW_MISSING_PROM=1.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

PROMTOOL=$(command -v promtool)
EXPORTER=$(command -v prometheus-node-exporter || command -v node_exporter)
missing_tool() { # missing_tool WHAT PACKAGE
    if [ "${GS_ALLOW_MISSING_PROM:-0}" = 1 ]; then
        ok "$1 # SKIP not installed (package $2), and GS_ALLOW_MISSING_PROM=1"
    else
        not_ok "$1: not installed: install the package $2 (tests/install-deps.sh does), or set GS_ALLOW_MISSING_PROM=1 to skip"
    fi
}

sleep 300 &
holder=$! # the fake job's agent, daemons and ranks: alive, so the job is not stale
exporter_pid=""
textdir=$TEST_TMP/textfile
cleanup() {
    [ -n "$exporter_pid" ] && kill "$exporter_pid" 2>/dev/null
    kill "$holder" 2>/dev/null
    rm -rf "$textdir" "$TMPDIR/gsrun.prom01" "$TMPDIR/gsrun.prom02"
}
trap cleanup EXIT

node=$("$GSRUN" status --json | sed -n 's/.*"node":"\([^"]*\)".*/\1/p')
mkdir -m 700 -p "$TMPDIR/gsrun.prom01/$node" "$TMPDIR/gsrun.prom02/$node"
uid=$(id -u)
# Rank 0 an MPS client with its memory known; rank 1 (on a MIG UUID with a
# '"' and a '\') not yet seen, memory unknown; rank 2 exited, its peak kept.
# GPU 1's server memory is unknown too (no key: an older agent's file).
cat >"$TMPDIR/gsrun.prom01/$node/status" <<EOF
gsrun-status 1
mps on
agent_pid $holder
launcher_pid $holder
started_ms $(($(date +%s) * 1000))
local_size 3
registered 3
alive 2
memory_limit_mb 2048
memory_every_ms 2000
gpu.0.uuid GPU-prom-0
gpu.0.name Fake H200
gpu.0.server 0
gpu.0.servers 1
gpu.0.daemon_pid $holder
gpu.0.server_pid $holder
gpu.0.mps_clients 1
gpu.0.server_memory_mib 30
gpu.0.clients_memory_mib 512
gpu.1.uuid MIG-"q\b
gpu.1.name Fake MIG
gpu.1.server 0
gpu.1.servers 1
gpu.1.gpu 1
gpu.1.daemon_pid $holder
gpu.1.server_pid $holder
gpu.1.mps_clients 0
rank.0.rank 0
rank.0.pid $holder
rank.0.entry 0
rank.0.state client
rank.0.alive 1
rank.0.memory_mib 512
rank.0.peak_memory_mib 600
rank.1.rank 1
rank.1.pid $holder
rank.1.entry 1
rank.1.state unseen
rank.1.alive 1
rank.2.rank 2
rank.2.pid $holder
rank.2.entry 0
rank.2.state client
rank.2.alive 0
rank.2.peak_memory_mib 300
end
EOF
# A stale job (its agent gone): no sample.
sh -c 'exit 0' &
dead=$!
wait $dead
printf 'gsrun-status 1\nmps on\nagent_pid %d\nalive 4\nend\n' $dead >"$TMPDIR/gsrun.prom02/$node/status"

P=$OUT.prom
"$GSRUN" status --format=prometheus >"$P" 2>"$ERR.prom"
rc=$?
check "gsrun status --format=prometheus exits 0 and says nothing on stderr" eval '[ $rc -eq 0 ] && [ ! -s "$ERR.prom" ]' ||
    diag "$ERR.prom"
"$GSRUN" status --format prometheus >"$P.2" 2>&1
check "  ... --format prometheus (two words) prints the same" cmp -s "$P" "$P.2"
check "  ... only comments and gsrun_ samples on stdout (no note, no placement text)" \
    eval '[ -s "$P" ] && ! grep -qv "^# \(HELP\|TYPE\) gsrun_\|^gsrun_" "$P"' || diag "$P"
J="gsrun_job=\"gsrun.prom01\",uid=\"$uid\""
check "rank 0's GPU memory: 512 MiB in bytes, with its job, uid, rank and GPU UUID" \
    grep -qxF "gsrun_rank_gpu_memory_bytes{$J,rank=\"0\",gpu_uuid=\"GPU-prom-0\"} 536870912" "$P" || diag "$P"
check "  ... rank 1's memory is unknown: no sample (never 0); rank 2 has exited: no sample" \
    eval '[ "$(grep -c "^gsrun_rank_gpu_memory_bytes{" "$P")" = 1 ]' || diag "$P"
check "  ... rank 2's peak is kept after its exit, rank 1's unknown peak has no sample" \
    eval 'grep -qxF "gsrun_rank_gpu_memory_peak_bytes{$J,rank=\"2\",gpu_uuid=\"GPU-prom-0\"} 314572800" "$P" &&
        ! grep -q "^gsrun_rank_gpu_memory_peak_bytes{.*rank=\"1\"" "$P"' || diag "$P"
check "the UUID's '\"' and '\\' are escaped in rank 1's MPS client sample" \
    grep -qxF "gsrun_rank_mps_client{$J,rank=\"1\",gpu_uuid=\"MIG-\\\"q\\\\b\"} 0" "$P" || diag "$P"
check "GPU 1's server memory is unknown: no sample; GPU 0's is" \
    eval '[ "$(grep -c "^gsrun_mps_server_gpu_memory_bytes{" "$P")" = 1 ] &&
        grep -qxF "gsrun_mps_server_gpu_memory_bytes{$J,gpu_uuid=\"GPU-prom-0\",server=\"0\"} 31457280" "$P"' || diag "$P"
check "the job's alive ranks and memory limit; the stale job has no sample" \
    eval 'grep -qxF "gsrun_job_ranks_alive{$J} 2" "$P" && grep -qxF "gsrun_job_mps_memory_limit_bytes{$J} 2147483648" "$P" &&
        ! grep -q "gsrun.prom02" "$P"' || diag "$P"
check "each metric family is written once (its HELP and TYPE once, its samples together)" \
    eval '[ -z "$(grep "^# TYPE" "$P" | sort | uniq -d)" ] &&
        [ "$(sed -n "s/^\(gsrun_[a-z_]*\){.*/\1/p" "$P" | uniq | sort | uniq -d)" = "" ]' || diag "$P"

if [ -n "$PROMTOOL" ]; then
    "$PROMTOOL" check metrics <"$P" >"$OUT.promtool" 2>&1
    check "promtool check metrics passes the output" [ $? -eq 0 ] || diag "$OUT.promtool"
else
    missing_tool "promtool check metrics passes the output" prometheus
fi

"$GSRUN" status --format=xml >"$OUT.bad" 2>&1
rc=$?
check "--format=xml: exit status 2 (usage), naming the value and the valid formats" \
    eval '[ $rc -eq 2 ] && grep -qF "unknown output format '"'xml'"' (--format); the formats are text, json and prometheus" "$OUT.bad"' ||
    diag "$OUT.bad"
# This job's object only: under make -j other tests' jobs come and go in the
# bases every test's gsrun status reads (/dev/shm/gsrun-<uid>, /run/gsrun).
this_job() { grep -o '{"job":"gsrun.prom01".*' | sed 's/,{"job":.*//; s/"uptime_s":[0-9.]*//'; }
"$GSRUN" status --json | this_job >"$OUT.json1"
"$GSRUN" status --format=json | this_job >"$OUT.json2"
check "--json prints what --format=json prints" eval 'grep -q gsrun.prom01 "$OUT.json1" && cmp -s "$OUT.json1" "$OUT.json2"'

# Each sample as "name{labels sorted} value" (the value as a whole number):
# node_exporter writes the labels in its own order and 5.36870912e+08.
norm() {
    awk '/^#/ || NF == 0 { next }
    { b = index($0, "{"); n = 0; i = b + 1; L = length($0); name = substr($0, 1, b - 1)
      while (i <= L) {
          c = substr($0, i, 1)
          if (c == "}") { i++; break }
          if (c == ",") { i++; continue }
          eq = index(substr($0, i), "="); key = substr($0, i, eq - 1); i += eq + 1; v = ""
          while (i <= L) {
              c = substr($0, i, 1)
              if (c == "\\") { v = v substr($0, i, 2); i += 2; continue }
              i++
              if (c == "\"") break
              v = v c
          }
          lab[++n] = key "=\"" v "\""
      }
      for (a = 2; a <= n; a++) { t = lab[a]; for (k = a - 1; k >= 1 && lab[k] > t; k--) lab[k + 1] = lab[k]; lab[k + 1] = t }
      s = name "{"; for (a = 1; a <= n; a++) s = s (a > 1 ? "," : "") lab[a]
      rest = substr($0, i); sub(/^ +/, "", rest); split(rest, w, " ")
      printf "%s} %.0f\n", s, w[1] }' "$@" | sort
}
http_get() { # http_get PORT PATH: the body
    timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3
        cat <&3' http_get "$1" "$2" | sed '1,/^\r$/d'
}

if [ -z "$EXPORTER" ]; then
    missing_tool "node_exporter's textfile collector reads gsrun's samples back" prometheus-node-exporter
    trap - EXIT
    cleanup
    check_clean "prometheus output"
    finish
fi
# Written as doc/metrics.md says: a temporary name in the same directory, then renamed.
mkdir -p "$textdir"
"$GSRUN" status --format=prometheus >"$textdir/gsrun.prom.$$" && mv "$textdir/gsrun.prom.$$" "$textdir/gsrun.prom"
# A free port: one nothing answers on, then one where this exporter runs
# and answers (another may take a port between the look and the start).
port=""
for try in $(seq 19100 19139); do
    (exec 3<>"/dev/tcp/127.0.0.1/$try") 2>/dev/null && continue
    "$EXPORTER" --web.listen-address="127.0.0.1:$try" --collector.disable-defaults \
        --collector.textfile --collector.textfile.directory="$textdir" >"$OUT.exporter" 2>&1 &
    exporter_pid=$!
    for _ in $(seq 100); do
        kill -0 "$exporter_pid" 2>/dev/null || break
        (exec 3<>"/dev/tcp/127.0.0.1/$try") 2>/dev/null && port=$try && break
        sleep 0.05
    done
    [ -n "$port" ] && break
    kill "$exporter_pid" 2>/dev/null
    wait "$exporter_pid" 2>/dev/null
    exporter_pid=""
done
check "node_exporter listens on 127.0.0.1:${port:-(none of 19100-19139)}" [ -n "$port" ] || diag "$OUT.exporter"
http_get "${port:-0}" /metrics >"$OUT.metrics"
check "  ... its textfile collector read gsrun.prom without an error (node_textfile_scrape_error 0)" \
    grep -qx "node_textfile_scrape_error 0" "$OUT.metrics" || grep "^node_textfile" "$OUT.metrics" "$OUT.exporter" | diag
norm "$P" >"$OUT.want"
grep "^gsrun_" "$OUT.metrics" | norm >"$OUT.got"
check "  ... and serves every gsrun sample ($(wc -l <"$OUT.want")) with its labels and value, and no other" \
    eval '[ -s "$OUT.want" ] && cmp -s "$OUT.want" "$OUT.got"' || diff "$OUT.want" "$OUT.got" | diag
check "  ... the escaped UUID read back as written" \
    grep -qF "gpu_uuid=\"MIG-\\\"q\\\\b\"" "$OUT.got" || diag "$OUT.got"
kill "$exporter_pid"
wait "$exporter_pid" 2>/dev/null
check "node_exporter is stopped" eval '! kill -0 "$exporter_pid" 2>/dev/null'
exporter_pid=""
trap - EXIT
cleanup
check "no file of the test is left (its textfile directory, its fake jobs)" \
    eval '[ ! -e "$textdir" ] && [ ! -e "$TMPDIR/gsrun.prom01" ] && [ ! -e "$TMPDIR/gsrun.prom02" ]'
check_clean "prometheus output"
finish
