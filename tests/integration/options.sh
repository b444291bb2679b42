#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: launcher/options.c, launcher/gsrun.c, runtime/core/config.c, runtime/core/config_keys.c, doc/gsrun.1
# Bad input is refused before anything starts, with the documented status
# and a message naming the option; --help, --version and --dry-run work.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

expect() { # expect STATUS "word in stderr" args...
    local want=$1 word=$2
    shift 2
    "$GSRUN" "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if [ "$rc" -eq "$want" ] && grep -qF -- "$word" "$ERR" && [ -z "$(run_files)" ]; then
        ok "gsrun $* -> status $want, says '$word'"
    else
        not_ok "gsrun $* -> status $rc (want $want), stderr: $(head -c 300 "$ERR")"
    fi
}

for v in 0 -5 101 150 abc "" 50% 1e2; do
    expect 2 "--mps-percentage" --mps-percentage="$v" -np 2 "$PROG"
done
expect 2 "--mps" --mps=maybe -np 2 "$PROG"
expect 2 "no program given"
expect 2 "no program given" --mps=on
expect 2 "unknown gsrun option" --mps-bogus=1 -np 2 "$PROG"
expect 2 "--mps-control" --mps-control=/etc/passwd -np 2 "$PROG"
expect 2 "--mps-control" --mps-control=/nonexistent/nvidia-cuda-mps-control -np 2 "$PROG"
GSRUN_MPS_PERCENTAGE=abc expect 2 "GSRUN_MPS_PERCENTAGE" -np 2 "$PROG"
GSRUN_MPS=sometimes expect 2 "GSRUN_MPS" -np 2 "$PROG"
expect 127 "--launcher" --launcher=/nonexistent/mpirun -np 2 "$PROG"
expect 126 "--launcher" --launcher=/etc/passwd -np 2 "$PROG"
expect 2 "is not Open MPI's mpirun" --launcher=/bin/echo -np 2 "$PROG"
# A launcher without a fork agent (here a stand-in for MPICH's Hydra): gsrun
# stops before it runs and shows the rank prefix instead.
cat >"$TEST_TMP/mpiexec" <<SH
#!/bin/sh
[ "\$1" = --version ] && { echo "HYDRA build details:"; exit 0; }
touch "$TEST_TMP/hydra-ran"
SH
chmod +x "$TEST_TMP/mpiexec"
expect 2 "gsrun exec <program>" "$TEST_TMP/mpiexec" -n 2 "$PROG"
check "  ... and the launcher never ran the job" [ ! -e "$TEST_TMP/hydra-ran" ]
"$GSRUN" --launcher="$(command -v mpirun)" --mps=off -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "--launcher naming Open MPI's mpirun is accepted" [ $? -eq 0 ]
# A first word naming Open MPI's launcher is taken as --launcher.
expect 2 "the launcher is given twice" --launcher="$(command -v mpirun)" mpirun -np 2 "$PROG"
expect 2 "no program given" mpirun
expect 127 "launcher" /nonexistent/mpiexec -np 2 "$PROG"
for w in mpirun mpiexec orterun "$(command -v mpirun)"; do
    command -v $w >/dev/null || continue # Open MPI 5 has no orterun
    "$GSRUN" --dry-run $w -np 2 "$PROG" >"$OUT" 2>"$ERR"
    check "gsrun $w -np 2 prog: runs $w with the fork agent, the word not passed on" \
        grep -q "^[^ ]*/$(basename $w) --mca orte_fork_agent .* -np 2 $PROG\$" "$OUT"
done
gsrun_fake 1 mpirun -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "gsrun mpirun -np 2 prog: runs the job under MPS" [ $? -eq 0 -a "$(grep -c 'mps=1 ' "$OUT")" -eq 2 ]
check_clean "gsrun mpirun"
# --mps=on needs a GPU (none: no NVML here) and a control program.
expect 69 "no NVIDIA GPU" --mps=on -np 2 "$PROG"
LD_LIBRARY_PATH=$FAKE_LIB PATH=/usr/bin:/bin expect 69 "nvidia-cuda-mps-control" --mps=on -np 2 "$PROG"

"$GSRUN" --help >"$OUT" 2>&1
check "--help exits 0 and shows usage" grep -q "^Usage: gsrun" "$OUT"
# The man page's OPTIONS section documents every option --help shows, and
# the reverse.
man_opts=$(sed -n '/^\.SH OPTIONS/,/^\.SH [^O]/p' "$S/doc/gsrun.1" | sed 's/\\-/-/g' |
    grep -o -- '--[a-z][a-z-]*' | sort -u)
help_opts=$(grep -o -- '--[a-z][a-z-]*' "$OUT" | sort -u)
if [ -n "$man_opts" ] && [ "$man_opts" = "$help_opts" ]; then
    ok "--help and gsrun(1) name the same options"
else
    not_ok "--help and gsrun(1) differ: $(diff <(echo "$help_opts") <(echo "$man_opts") | tr '\n' ' ')"
fi
"$GSRUN" --version >"$OUT" 2>&1
check "--version prints the version" grep -q "^gsrun [0-9]" "$OUT"
check "  ... and the build's features" \
    grep -Eq "^PMIx discovery: (yes|no); hwloc pinning: (yes|no); Open MPI 4 component: (yes|no); Slurm SPANK plugin: (yes|no); root run dirs in: /" "$OUT" ||
    diag "$OUT"

"$GSRUN" --dry-run -np 4 "$PROG" arg1 >"$OUT" 2>"$ERR"
check "--dry-run shows the fork agent and the unchanged arguments" \
    grep -q "mpirun --mca orte_fork_agent $B/launcher/gsrun-shim --mca odls_base_exec_agent $B/launcher/gsrun-shim -x PMIX_MCA_gds=hash .* -np 4 $PROG arg1\$" "$OUT"
for p in orte_fork_agent odls_base_exec_agent; do
    "$GSRUN" --dry-run -np 2 --mca $p "/usr/bin/env FOO=1" "$PROG" >"$OUT" 2>"$ERR"
    check "a user's fork agent ($p) is chained behind the shim" \
        grep -q -- "-x GSRUN_FORK_AGENT -np 2 $PROG\$" "$OUT"
done
"$GSRUN" --dry-run --mps=off -np 2 "$PROG" >"$OUT" 2>"$ERR"
check "--mps=off runs mpirun unchanged" grep -q "^[^ ]*mpirun -np 2 $PROG\$" "$OUT"
check_clean "options"
finish
