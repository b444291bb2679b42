/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's servers told in its report once its ranks have their answers:
 * each its control daemon, core, server, ranks and share, or, on the
 * user's shared servers, the service's server it leased. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>

#include "runtime/job/job_int.h"
#include "runtime/files/status.h"

/* A borrowed server's PIDs for the line of its GPU: the shared agent lists
 * a new server's PIDs a little after it serves, so those the lease did not
 * have are read from its status now; what is still not listed is said so
 * (the line is read at the job's end: "starting" would not be true then). */
static void borrowed_pids(gs_agent_t *a, int g, char *buf, size_t len)
{
    gs_job_t *j = gs_job(a);
    const gs_mps_daemon_t *d = &a->daemons.daemon[g];
    int daemon = (int)d->daemon_pid, server = (int)d->server_pid[0];
    const char *core = a->daemons.pinned[g];
    gs_status_t *ss = daemon > 0 && server > 0 ? NULL : calloc(1, sizeof(*ss));
    gs_error_t err;
    int s = j->share_server[g];
    if (ss != NULL && gs_status_read(j->share_dir, ss, &err) == 0 && s >= 0 && s < ss->nservers) {
        daemon = daemon > 0 ? daemon : ss->server[s].daemon_pid;
        server = server > 0 ? server : ss->server[s].server_pid;
        core = core[0] ? core : ss->server[s].core;
    }
    if (daemon <= 0) {
        snprintf(buf, len, "its control daemon's and server's PIDs not listed when the ranks came");
    } else if (server <= 0) {
        snprintf(buf, len, "control daemon %d on %s, server PID not listed when the ranks came",
                 daemon, core[0] ? core : "no core");
    } else {
        snprintf(buf, len, "control daemon %d on %s, server %d", daemon, core[0] ? core : "no core",
                 server);
    }
    free(ss);
}

void gs_agent_confirm_servers(gs_agent_t *a, int job_long)
{
    gs_job_t *j = gs_job(a);
    if (job_long) {
        gs_agent_confirm_servers_from(a, 0);
        return;
    }
    for (int g = 0; g < a->plan.nservers; g++) {
        const gs_server_share_t *s = &a->plan.server[g];
        gs_mps_daemon_t *d = &a->daemons.daemon[g];
        const char *pct = s->pct_set ? s->pct_text : "100 (unset)";
        char who[48];
        gs_daemons_label(&a->daemons, g, who, sizeof(who));
        if (a->daemons.borrowed) {
            char pids[200];
            borrowed_pids(a, g, pids, sizeof(pids));
            gs_report_add(&a->report, 0,
                          "%s (%s, %s): the user's shared MPS server %d (%s), %d rank%s at %s%%",
                          who, a->servers.gpu[g].name, d->uuid, j->share_server[g], pids, s->nranks,
                          s->nranks == 1 ? "" : "s", pct);
            continue;
        }
        if (a->o->cfg.prestart) {
            gs_daemons_record_servers(&a->daemons, g);
        }
        gs_report_add(&a->report, 0,
                      "%s (%s, %s): MPS control daemon %d on %s, server %d, %d rank%s at %s%%, "
                      "ready in %lld ms",
                      who, a->servers.gpu[g].name, d->uuid, (int)d->daemon_pid,
                      a->daemons.pinned[g], (int)d->server_pid[0], s->nranks,
                      s->nranks == 1 ? "" : "s", pct, d->ready_ms - d->start_ms);
        if (!a->o->cfg.prestart) {
            gs_report_add(&a->report, 0,
                          "%s: server not started in advance "
                          "(GSRUN_MPS_PRESTART=0): the first rank that uses CUDA "
                          "starts it",
                          who);
        }
    }
}

void gs_agent_confirm_pending(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    if (j->confirm_pending) {
        j->confirm_pending = 0;
        gs_agent_confirm_servers(a, 0);
        gs_report_mark(&a->report, "servers listed");
    }
}
