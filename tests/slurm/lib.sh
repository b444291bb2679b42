# SPDX-License-Identifier: BSD-3-Clause
# What the Slurm tests share (source after tests/integration/lib.sh):
#
#   slurm_test_cluster     2 hosts for a Slurm test, or the test says SKIP and
#                          ends (no cluster, no Slurm, no SPANK plugin); sets
#                          HOSTS, J (seen by every host), GSS_DIR, PLUG (the
#                          plugstack.conf line for the build's plugin)
#   slurm_test_up          slurmctld and the slurmds with PLUG (GSS_EXTRA_CONF and
#                          GSS_NODE_EXTRA as the test set them), or Bail out
#   job NAME COMMAND...    on host1 with JOBENV, once Slurm is idle; output in
#                          $J/NAME.out and .err
#   leftovers              what jobs left on the hosts: processes other than
#                          Slurm's daemons, files other than Slurm's PMIx dirs
#                          (jobs.sh's clean_within polls it)
. "$GS_TOP_SRCDIR/tests/cluster/cluster.sh"
. "$GS_TOP_SRCDIR/tests/slurm/slurm.sh"
. "$GS_TOP_SRCDIR/tests/cluster/jobs.sh"

slurm_test_cluster() {
    local why
    skip() { echo "1..0 # SKIP $*"; rm -rf "$TEST_TMP"; exit 0; } # TAP: 77 would be an error
    why=$(cluster_can_run) || skip "simulated cluster: $why"
    why=$(slurm_can_run) || skip "$why"
    [ -f "$B/slurm/gsrun_spank.so" ] || skip "the SPANK plugin is not built (no slurm/spank.h: libslurm-dev)"
    trap cluster_down EXIT
    trap 'exit 1' INT TERM HUP
    cluster_up 2 || { echo "Bail out! cannot bring the cluster up"; exit 1; }
    HOSTS="host1 host2"
    J=$GSC_DIR
    GSS_DIR=$GSC_DIR/slurm
    mkdir -p "$GSS_DIR"
    PLUG="optional $B/slurm/gsrun_spank.so agent=$B/launcher/gsrun-agent control=$FAKE_CONTROL verbose=1"
}
slurm_test_up() {
    slurm_up 2 "$PLUG" || { slurm_logs | diag; echo "Bail out! Slurm did not start"; exit 1; }
}
job() {
    local name=$1
    shift
    slurm_wait_idle
    on_slurm host1 "$JOBENV $* >$J/$name.out 2>$J/$name.err"
}
left_on() {
    cluster_leftovers "$1" | grep -v -E "process [0-9]+: (slurmctld|: slurmscriptd|slurmd )" |
        grep -v -E "file /tmp/spmix" | sed "s/^/$1: /"
}
leftovers() { local h; for h in $HOSTS; do left_on $h; done; }
