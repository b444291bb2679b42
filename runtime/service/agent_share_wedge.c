/* SPDX-License-Identifier: BSD-3-Clause */
/* --mps-share=node, the shared agent: a server that does not answer is
 * never handed to a job. Before a lease gets a warm server its control
 * daemon is probed (mps_probe.h: its processes' state, get_server_list
 * bounded by GS_MPS_ANSWER_MS), at most once a second; a job whose ranks
 * wait on one says so on its lease and it is probed at once. A wedged one
 * (stopped, or no answer within the bound) is ended and a fresh daemon and
 * server start in its dirs: the ranks of its jobs that have not started
 * CUDA yet reach the fresh one, and the jobs take its PIDs ("renew"). */
#include "gs_autoconf.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/service/service_int.h"
#include "runtime/core/proc.h"
#include "runtime/wire/lease.h"

/* A server that answered this recently is handed out on its processes'
 * state alone (none stopped): a burst of short jobs costs one control
 * command a second, not one a job. */
#define SHARE_PROBE_FRESH_MS 1000

/* Ends wedged server s and starts a fresh one in its dirs: 0, or -1 when
 * none could start (the entry then is a dead server: its jobs hear "lost"). */
static int replace(gs_agent_t *a, int s, const char *why, char *told, size_t len)
{
    gs_service_t *sv = gs_service(a);
    gs_daemons_t *ds = &a->daemons;
    gs_mps_daemon_t *d = &ds->daemon[s];
    char who[48], line[64];
    gs_error_t err;
    long long t0 = gs_proc_now_ms();
    pid_t old = d->daemon_pid;

    gs_daemons_label(ds, s, who, sizeof(who));
    snprintf(a->stuck_note[s], sizeof(a->stuck_note[s]), "%s; ended", why);
    gs_mps_end_wedged(d);
    a->stuck_ended[s]++;
    int rc = gs_daemons_refill(ds, &a->servers, s, 1, &err);
    if (rc == 0) {
        sv->share_answered_ms[s] = gs_proc_now_ms();
        snprintf(a->stuck_note[s], sizeof(a->stuck_note[s]),
                 "%.200s; replaced by control daemon %d (%d wedged so far)", why,
                 (int)d->daemon_pid, a->stuck_ended[s]);
        snprintf(told, len,
                 "%s (%s): the user's shared MPS server was wedged: %s; gsrun's node service "
                 "ended it and started a fresh one (control daemon %d) in %lld ms",
                 who, d->uuid, why, (int)d->daemon_pid, gs_proc_now_ms() - t0);
        gs_report_add(&a->report, 1, "%s", told);
        gs_agent_publish_on(a);
        gs_agent_write_status(a); /* the fresh PIDs before the jobs read them */
        gs_agent_tell_leases(a, s, line, gs_lease_fmt_renew(line, sizeof(line), s));
        return 0;
    }
    snprintf(told, len,
             "%s: the user's shared MPS server was wedged: %s; gsrun's node service ended "
             "it (control daemon %d), and a fresh one could not start: %s",
             who, why, (int)old, err.text);
    gs_report_add(&a->report, 1, "%s", told);
    d->daemon_reaped = 1; /* its jobs are told it is lost: "wedged" */
    d->daemon_status = SIGKILL;
    sv->share_shun[s] = 2;
    gs_agent_write_status(a);
    return rc;
}

/* Wedged server s that stays (jobs' ranks may be its clients, or it was
 * replaced twice): given to no new job; when in doubt, gsrun does not kill. */
static void shun(gs_agent_t *a, int s, const char *why, const char *because, char *told,
                 size_t len)
{
    gs_service_t *sv = gs_service(a);
    char who[48];
    gs_daemons_label(&a->daemons, s, who, sizeof(who));
    sv->share_shun[s] = 1;
    snprintf(a->stuck_note[s], sizeof(a->stuck_note[s]), "%.200s; left running (%s)", why,
             because);
    snprintf(told, len, "%s: the user's shared MPS server is wedged: %s; gsrun's node service "
             "leaves it running (%s) and gives new jobs another server", who, why, because);
    gs_report_add(&a->report, 1, "%s", told);
    gs_agent_write_status(a);
}

int gs_agent_share_sound(gs_agent_t *a, int s, int force, int mine, char *told, size_t len)
{
    gs_service_t *sv = gs_service(a);
    gs_mps_daemon_t *d = &a->daemons.daemon[s];
    char why[300];
    long long now = gs_proc_now_ms();
    int fresh = !force && sv->share_answered_ms[s] > 0 &&
                now - sv->share_answered_ms[s] < SHARE_PROBE_FRESH_MS;
    if (sv->share_shun[s]) {
        return 0;
    }
    int rc = gs_mps_probe(d, a->daemons.control, fresh ? 0 : GS_MPS_ANSWER_MS, why,
                          sizeof(why));
    if (rc == GS_MPS_PROBE_OK) {
        sv->share_answered_ms[s] = fresh ? sv->share_answered_ms[s] : gs_proc_now_ms();
        return 1;
    }
    if (rc == GS_MPS_PROBE_GONE) {
        /* Died, not reaped yet: reaped now, so that no lease picks it again
         * before the loop hears of it; its jobs are told it is lost. */
        char who[48];
        gs_daemons_label(&a->daemons, s, who, sizeof(who));
        gs_mps_daemon_exited(d); /* reaps it, its status kept */
        gs_report_add(&a->report, 1, "%s: the shared MPS control daemon %d has exited", who,
                      (int)d->daemon_pid);
        d->daemon_reaped = 1;
        d->daemon_pid = 0;
        gs_agent_write_status(a);
        return 0;
    }
    if (sv->leased[s] > mine) {
        char because[96];
        snprintf(because, sizeof(because), "%d rank%s of other jobs lease it: ending it would end "
                 "their contexts", sv->leased[s] - mine, sv->leased[s] - mine == 1 ? "" : "s");
        shun(a, s, why, because, told, len);
        return 0;
    }
    if (a->stuck_ended[s] >= 2) {
        shun(a, s, why, "replaced twice already: the GPU itself may be stuck (nvidia-smi)", told,
             len);
        return 0;
    }
    return replace(a, s, why, told, len) == 0;
}

void gs_agent_share_on_wedged(gs_agent_t *a, int lease, const char *line)
{
    gs_service_t *sv = gs_service(a);
    const gs_agent_lease_t *l = &sv->leases[lease];
    char told[400] = "", who[48];
    int s = -1, mine = 0;
    if (gs_lease_parse_wedged(line, &s) != 0 || s < 0 || s >= a->daemons.n) {
        return;
    }
    for (int e = 0; e < l->n; e++) {
        mine += l->server[e] == s ? l->clients[e] : 0;
    }
    if (mine == 0) {
        return; /* not one of its servers */
    }
    gs_daemons_label(&a->daemons, s, who, sizeof(who));
    if (gs_agent_share_sound(a, s, 1, mine, told, sizeof(told)) && told[0] == '\0') {
        gs_report_add(&a->report, 0, "job %s said its ranks wait on %s, which answers", l->job,
                      who);
    }
}
