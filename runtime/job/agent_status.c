/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's agent's own part of the status file (`gsrun status`), its
 * program's status hook: a row for each server of the plan (each GPU
 * without MPS), with the ranks placed there, and a line for each rank.
 * What both programs write around it is agent_publish.c's. */
#include "gs_autoconf.h"

#include <stdio.h>

#include "runtime/job/job_int.h"

/* Each rank's line (its MPS state and GPU memory as the driver shows them),
 * and each server's clients and their memory in all (unknown when one
 * client's is). Without the watch (no MPS), the registered ranks only. */
static int rank_live(const gs_agent_t *a, int rank)
{
    const gs_job_t *j = gs_job_const(a);
    for (int i = 0; i < j->ranks.nlive; i++) {
        if (j->ranks.live[i].rank == rank) {
            return 1;
        }
    }
    return 0;
}

static void rank_rows(const gs_agent_t *a, gs_status_t *s)
{
    const gs_job_t *j = gs_job_const(a);
    unsigned char unknown[GS_MAX_GPUS] = {0};
    s->memory_every_ms = j->watching ? GS_AGENT_MEMORY_EVERY_MS : 0;
    for (int g = 0; g < s->nservers; g++) {
        s->server[g].clients_mib = 0;
        s->server[g].nclients = j->watching ? 0 : -1; /* not watched: not known */
    }
    int n = j->watching ? j->attach.n : j->ranks.registered;
    for (int i = 0; i < n && s->nranks < GS_STATUS_MAX_RANKS; i++) {
        gs_status_rank_t *o = &s->rank[s->nranks];
        const gs_attach_rank_t *x = j->watching ? &j->attach.r[i] : NULL;
        o->rank = x != NULL ? i : j->ranks.seen != NULL ? j->ranks.seen[i].rank : -1;
        if (o->rank < 0) {
            continue;
        }
        o->pid = x != NULL ? (int)x->pid : (int)j->ranks.seen[i].pid;
        s->nranks++;
        o->entry = gs_placer_gpu(&j->placer, o->rank);
        o->entry = o->entry < s->nservers && o->entry < GS_MAX_GPUS ? o->entry : -1;
        snprintf(o->state, sizeof(o->state), "%s",
                 x != NULL ? gs_attach_name(x->state) : "unwatched");
        o->alive = x != NULL ? x->pid > 0 && !x->gone : rank_live(a, o->rank);
        o->memory_mib = x != NULL ? x->mib : -1;
        if (x != NULL && o->memory_mib == 0 && gs_attach_has_context(x->state)) {
            /* a rank with a context that the last look (or the node service's
             * listing, up to 2 s old) did not hold yet: not known, not 0 */
            o->memory_mib = -1;
        }
        o->peak_mib = x != NULL ? x->peak_mib : -1;
        if (x != NULL && o->entry >= 0 && x->state == GS_ATTACH_CLIENT && o->alive) {
            s->server[o->entry].nclients++;
            s->server[o->entry].clients_mib += x->mib > 0 ? x->mib : 0;
            unknown[o->entry] |= x->mib < 0;
        }
    }
    for (int g = 0; g < s->nservers; g++) {
        s->server[g].clients_mib = !j->watching || unknown[g] ? -1 : s->server[g].clients_mib;
    }
}

void gs_agent_job_status(const gs_agent_t *a, gs_status_t *s)
{
    const gs_job_t *j = gs_job_const(a);
    const gs_placer_t *p = &j->placer;
    s->registered = j->ranks.registered;
    s->alive = j->ranks.nlive;
    if (a->daemons.borrowed) {
        snprintf(s->shared, sizeof(s->shared), "%s", j->share_dir);
    }
    /* Every registration's PID (MPS's logs name PIDs: another job's agent
     * names them as this job's ranks). */
    size_t used = 0;
    for (int i = 0; i < j->ranks.registered && j->ranks.seen != NULL; i++) {
        const gs_rank_t *r = &j->ranks.seen[i];
        if (r->rank < 0 || used + 24 >= sizeof(s->pids)) {
            continue;
        }
        used += (size_t)snprintf(s->pids + used, sizeof(s->pids) - used, "%s%d:%d",
                                 used > 0 ? " " : "", r->rank, (int)r->pid);
    }
    s->nservers = p->ngpus;
    for (int g = 0; g < p->ngpus && p->rank_gpu != NULL; g++) {
        gs_status_server_t *x = &s->server[g];
        gs_placer_ranks_text(p, g, x->ranks, sizeof(x->ranks));
        if (j->watching) {
            gs_attach_status(&j->attach, p->rank_gpu, p->size, g, x->clients, sizeof(x->clients));
        }
        for (int r = 0; r < p->size; r++) {
            x->registered += p->rank_gpu[r] == g;
        }
        for (int i = 0; i < j->ranks.nlive; i++) {
            int r = j->ranks.live[i].rank;
            x->alive += r >= 0 && r < p->size && p->rank_gpu[r] == g;
        }
    }
    rank_rows(a, s);
}

void gs_agent_job_state(const gs_agent_t *a, gs_state_t *st)
{
    const gs_job_t *j = gs_job_const(a);
    if (st->kind == GS_STATE_ERROR) {
        return;
    }
    if (j->ledger.entry_fd >= 0) {
        snprintf(st->placed, sizeof(st->placed), "%s", j->ledger.entry); /* gpu-bind's GPUs */
    }
    if (st->kind != GS_STATE_OFF) {
        return;
    }
    /* Without MPS the ranks still get a GPU each (gpu-bind): the list-> */
    st->nservers = j->placer.ngpus;
    for (int g = 0; g < st->nservers; g++) {
        st->server[g].nranks = j->placer.target[g];
        snprintf(st->server[g].uuid, sizeof(st->server[g].uuid), "%s", a->servers.gpu[g].uuid);
    }
    for (int g = 1; g < st->nservers; g++) {
        st->server[g].first_rank = st->server[g - 1].first_rank + st->server[g - 1].nranks;
    }
}
