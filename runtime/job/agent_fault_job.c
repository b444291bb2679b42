/* SPDX-License-Identifier: BSD-3-Clause */
/* What a GPU fault means to a job's ranks: the job's fault hook (its own
 * servers) and the fault the node service told on the lease (shared
 * servers) mark the ranks MPS ended as faulted, say what the fault grace
 * will do, and tell it once, at once; what reads the logs, retires and
 * refills a server is agent_fault.c's, for both programs. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <string.h>

#include "runtime/job/job_int.h"
#include "runtime/core/proc.h"
#include "runtime/wire/lease.h"

/* The ranks whose context a fault ended that still run (their context's
 * process lives), as "0-1,4" into buf: how many. A rank that went on
 * after the fault in a process of its own, or exited, holds nothing up. */
int gs_agent_fault_running(const gs_agent_t *a, char *buf, size_t len)
{
    const gs_job_t *j = gs_job_const(a);
    int n = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < j->attach.n; r++) {
        const gs_attach_rank_t *x = &j->attach.r[r];
        if (x->state != GS_ATTACH_FAULTED || x->gone ||
            (x->ctx_pid > 0 && x->ctx_pid != x->pid &&
             gs_attach_rank_of(&j->attach, x->ctx_pid, "/proc") != r)) {
            continue;
        }
        int w = snprintf(buf + used, used < len ? len - used : 0, "%s%d", n ? "," : "", r);
        used += w > 0 ? (size_t)w : 0;
        n++;
    }
    return n;
}

/* What the fault grace will do, for the line that tells a fault. */
static void grace_note(const gs_agent_t *a, char *buf, size_t len)
{
    char ranks[128], opt[64];
    int g = a->o->cfg.fault_grace_s, n = gs_agent_fault_running(a, ranks, sizeof(ranks));
    buf[0] = '\0';
    if (g > 0 && n > 0) {
        snprintf(buf, len,
                 ". gsrun ends the job if rank%s %s still run%s %d s from now (%s=%d; a program "
                 "that goes on without the GPU after a fault: 0)",
                 n > 1 ? "s" : "", ranks, n > 1 ? "" : "s", g,
                 gs_config_opt(&a->o->cfg, "mps-fault-grace", opt, sizeof(opt)), g);
    }
}

/* MPS ended these clients' contexts: their ranks are marked (agent_watch.c
 * tells the grace from fault_at_ms). 1 when any was this job's. */
static int mark_faulted(gs_agent_t *a, const pid_t *pids, int n)
{
    gs_job_t *j = gs_job(a);
    int hit = 0;
    for (int i = 0; i < n; i++) {
        int r = gs_attach_rank_named(&j->attach, pids[i], "/proc");
        hit |= r >= 0 && gs_attach_set(&j->attach, r, GS_ATTACH_FAULTED, pids[i], -1);
    }
    if (hit && j->fault_at_ms <= 0) {
        j->fault_at_ms = gs_proc_now_ms();
    }
    return hit;
}

void gs_agent_job_fault(gs_agent_t *a, int g, const char *label, const char *uuid,
                        const char *at, const pid_t *hit, int nhit, const char *who)
{
    char grace[300];
    (void)g;
    mark_faulted(a, hit, nhit);
    grace_note(a, grace, sizeof(grace));
    gs_report_tell(&a->report,
                   "%s (%s): this job's MPS server hit a fatal GPU fault at %s; MPS ended every "
                   "client on it: %s%s",
                   label, uuid, at, who, grace);
}

/* The shared servers' logs read up to now (a job's lease). */
static void follow_shared(gs_agent_t *a)
{
    gs_daemons_t *ds = &a->daemons;
    char path[GS_PATH_MAX];
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS && ds->borrowed; e++) {
        gs_mps_health_t *h = &ds->health[e];
        gs_mps_out_path(&ds->daemon[e], path, sizeof(path));
        gs_mps_health_follow(h, path);
        gs_mps_health_settle(h); /* whole: the shared agent or the job's end says so */
    }
}

int gs_agent_fault_untold(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    follow_shared(a);
    for (int e = 0; e < a->daemons.n && e < GS_MAX_GPUS && a->daemons.borrowed; e++) {
        if (a->daemons.health[e].faults > j->fault_told[e]) {
            return 1;
        }
    }
    return 0;
}

void gs_agent_fault_told(gs_agent_t *a, const char *line)
{
    gs_job_t *j = gs_job(a);
    gs_daemons_t *ds = &a->daemons;
    char who[400];
    pid_t pids[GS_MPS_HEALTH_PIDS];
    gs_lease_fault_t f;
    int changed = 0;
    if (!ds->borrowed || gs_lease_parse_fault(line, &f, pids, GS_MPS_HEALTH_PIDS) != 0) {
        return;
    }
    const int s = f.server, n = f.npids;
    const char *at = f.at;
    follow_shared(a);
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS; e++) {
        if (j->share_server[e] != s) {
            continue;
        }
        j->fault_told[e] = ds->health[e].faults; /* its log's fault: told */
        /* Only a job whose ranks MPS ended; once for the shared server. */
        int mine = 0;
        for (int i = 0; i < n; i++) {
            mine += gs_attach_rank_named(&j->attach, pids[i], "/proc") >= 0;
        }
        if (mine == 0 || changed) {
            continue;
        }
        gs_agent_fault_who(a, pids, n, 0, who, sizeof(who));
        char label[48];
        gs_daemons_label(ds, e, label, sizeof(label));
        /* Once, without -v, now: the job may hang on it, or end of it. */
        char grace[300];
        mark_faulted(a, pids, n);
        grace_note(a, grace, sizeof(grace));
        gs_report_tell(&a->report,
                       "%s (%s): the MPS server this job shared with the user's other jobs hit a "
                       "fatal GPU fault at %s; MPS ended every client on it: %s%s",
                       label, ds->daemon[e].uuid, at, who, grace);
        snprintf(a->fault_note[e], sizeof(a->fault_note[e]),
                 "GPU fault at %s on the user's shared MPS server %d: MPS ended %s; the server "
                 "was replaced",
                 at, s, who);
        changed = 1;
    }
    if (changed) {
        gs_agent_write_status(a);
    }
}
