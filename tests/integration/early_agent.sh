#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/rank/node.c, runtime/core/proc.c, launcher/gsrun.c
# gsrun starts its node's agent before mpirun (the early agent). On a loaded
# node that start can take seconds: gsrun waits for it as long as a rank
# waits for its agent, and only an agent that failed or never answered is
# replaced by one the node's first rank starts, once the first is gone. (A
# late one left running took the node dir from the first rank's: CI saw
# "the node agent refused the registration of rank 95", and a 100-rank job
# hung with a rank in MPI_Init after the others failed.) gsrun-agent is
# wrapped here beside a copy of gsrun; stand-in MPS daemon and NVML.
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

LB=$TEST_TMP/lb
mkdir "$LB"
cp "$B/launcher/gsrun" "$B/launcher/gsrun-shim" "$LB/"
GSRUN=$LB/gsrun
# The first start is gsrun's early one: EARLY says what it does first.
cat >"$LB/gsrun-agent" <<EOF
#!/bin/bash
echo "start \$\$" >>"$LB/starts"
if mkdir "$LB/first" 2>/dev/null; then
    case "\$EARLY" in
    late:*) sleep "\${EARLY#late:}" ;;
    exit) exit 3 ;;
    hang) echo \$\$ >"$LB/hung"; exec sleep 600 ;;
    esac
fi
exec "$B/launcher/gsrun-agent" "\$@"
EOF
chmod +x "$LB/gsrun-agent"
REC=$TEST_TMP/record

run() { # run EARLY [gsrun options]: a 4-rank job, every rank an MPS client
    local early=$1 t0
    shift
    rm -rf "$LB/first" "$LB/starts" "$LB/hung" "$REC"
    t0=$(date +%s%N)
    EARLY=$early FAKE_MPS_RECORD=$REC gsrun_fake 1 --mps=on "$@" -np 4 "$PROG" --mps-client \
        >"$OUT" 2>"$ERR"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    oks=$(grep -c 'client=ok' "$OUT")
    starts=$(grep -c '^start ' "$LB/starts")
    servers=$(grep -c '^start ' "$REC" 2>/dev/null)
}

# Late by 6 s (gsrun gave up after 5 s before, and the late one went on).
run late:6 -v
check "early agent 6 s late: status $rc (0), $oks of 4 ranks MPS clients, after $ms ms" \
    [ $rc -eq 0 -a "$oks" -eq 4 -a $ms -ge 6000 ] || diag "$ERR"
check "  ... gsrun waited for it: $starts agent start (1), $servers MPS server (1), no note" \
    eval '[ "$starts" -eq 1 -a "$servers" -eq 1 ] && ! grep -q "did not start" "$ERR"' ||
    diag "$ERR"
check "  ... its MPS came before the ranks" grep -q "MPS ready .* before the node's first rank came" "$ERR" ||
    diag "$ERR"
check_clean "a late early agent"

# Gone before it answered: the node's first rank starts one, as on other nodes.
run exit -v
check "early agent exits at once: status $rc (0), $oks of 4 ranks MPS clients" \
    [ $rc -eq 0 -a "$oks" -eq 4 ] || diag "$ERR"
check "  ... -v says so, and the node's first rank started the next ($starts starts, 2)" \
    eval '[ "$starts" -eq 2 ] && grep -q "note: the node agent did not start (it exited); the node.s first rank starts it instead" "$ERR"' ||
    diag "$ERR"
check_clean "an early agent that exits"

# Never answers (alive, silent): ended after the timeout plus 10 s, said
# without -v (the job waited), and the job runs with the rank's agent.
run hang --mps-timeout=2
hung=$(cat "$LB/hung" 2>/dev/null)
check "early agent silent: status $rc (0), $oks of 4 ranks MPS clients, after $ms ms (12000 to 30000)" \
    [ $rc -eq 0 -a "$oks" -eq 4 -a $ms -ge 12000 -a $ms -lt 30000 ] || diag "$ERR"
check "  ... said without -v, the silent one ended (PID $hung), $starts starts (2)" \
    eval '[ -n "$hung" ] && [ "$starts" -eq 2 ] && ! kill -0 "$hung" 2>/dev/null &&
          grep -q "note: the node agent did not start within 12 s (PID $hung, ended); the node.s first rank starts it instead" "$ERR"' ||
    diag "$ERR"
check_clean "a silent early agent"

finish
