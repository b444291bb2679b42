/* SPDX-License-Identifier: BSD-3-Clause */
/* Each rank's GPU memory as NVML gives it: under MPS the GPU exporters list
 * the server, not its clients, but NVML's compute listing gives each
 * client's own figure (measured on an H200, driver 580: ranks holding 256
 * to 1024 MiB listed at 530 to 1298 MiB, a client's context about 274 MiB;
 * the server 66 MiB). A rank's figure is the sum over the contexts its
 * process tree holds on any GPU.
 *
 * The look only reads: a context NVML lists in the compute listing but not
 * yet in the MPS one may be a client connecting between the two calls, so
 * no rank's MPS state is taken from it (that is the watch's, with its own
 * timing: agent_watch.c). It is made every GS_AGENT_MEMORY_EVERY_MS while a
 * rank has started CUDA, and after each of the watch's own NVML looks.
 * Where NVML cannot tell (no GPU, a listing that failed, a driver without
 * the MPS listing, where a client may not be in the compute listing either)
 * a rank's figure is unknown (-1), never 0. */
#include "gs_autoconf.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/job/job_int.h"
#include "runtime/core/proc.h"

int gs_agent_memory_listing(gs_agent_t *a, gs_gpu_list_t *l)
{
    gs_job_t *j = gs_job(a);
    gs_error_t err;
    if (a->daemons.borrowed && !j->watch_own_nvml) {
        if (gs_agent_share_listing(a, l) == 0) {
            return 0;
        }
        j->watch_own_nvml = 1; /* the service did not answer: not asked again (2 s each) */
    }
    gs_gpu_hold();
    return gs_gpu_discover(l, &err);
}

/* Whether NVML told every GPU's processes and which are MPS clients. */
static int listing_whole(const gs_gpu_list_t *l)
{
    for (int g = 0; g < l->count; g++) {
        if (l->gpu[g].nprocs < 0 || l->gpu[g].nmps < 0 || l->gpu[g].nprocs > GS_GPU_PROCS_MAX) {
            return 0;
        }
    }
    return l->count > 0;
}

/* What one listing holds of a rank: its contexts' memory in all (-1: one
 * NVML could not tell), and its largest MPS client context (the one
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT bounds: per client and device). */
struct rank_mem {
    long long sum, top;
};

/* The ranks' contexts in listing l into m[] (the servers' own are not
 * theirs). */
static void take_listing(gs_agent_t *a, const gs_gpu_list_t *l, struct rank_mem *m)
{
    gs_job_t *j = gs_job(a);
    for (int g = 0; g < l->count; g++) {
        const gs_gpu_t *d = &l->gpu[g];
        for (int i = 0; i < d->nprocs; i++) {
            int mib = d->procs_mib[i], r = -1;
            if (gs_agent_server_entry(a, d->procs[i]) < 0) {
                r = gs_attach_rank_of(&j->attach, d->procs[i], "/proc");
            }
            if (r < 0) {
                continue;
            }
            m[r].sum = mib == GS_GPU_MIB_UNKNOWN || m[r].sum < 0 ? -1 : m[r].sum + mib;
            if (mib != GS_GPU_MIB_UNKNOWN && mib > m[r].top && gs_gpu_is_mps_client(d, d->procs[i])) {
                m[r].top = mib;
            }
        }
    }
}

void gs_agent_memory_take(gs_agent_t *a, const gs_gpu_list_t *l)
{
    gs_job_t *j = gs_job(a);
    int n = j->attach.n, whole = listing_whole(l);
    struct rank_mem *m = calloc((size_t)(n > 0 ? n : 1), sizeof(*m));
    if (m == NULL) {
        return; /* the figures stay as they were */
    }
    if (whole) {
        take_listing(a, l, m);
    }
    /* A shared server's own memory is the node service's to tell (its
     * status line): a job may not know its PIDs. */
    if (!a->daemons.borrowed) {
        j->watch_changed |= gs_agent_servers_memory(a, whole ? l : NULL);
    }
    for (int r = 0; r < n; r++) {
        gs_attach_rank_t *x = &j->attach.r[r];
        if (x->pid <= 0) {
            continue;
        }
        long long was = x->mib;
        x->mib = !whole || x->gone ? -1 : m[r].sum;
        /* A look without its context (0) is no peak: a rank that never
         * held GPU memory has none to tell. */
        x->peak_mib = x->mib > 0 && x->mib > x->peak_mib ? x->mib : x->peak_mib;
        x->peak_ctx_mib = whole && m[r].top > x->peak_ctx_mib ? m[r].top : x->peak_ctx_mib;
        j->watch_changed |= x->mib != was;
    }
    free(m);
}

/* A rank that has started CUDA (or holds a context) runs still. */
static int wanted(const gs_agent_t *a)
{
    const gs_job_t *j = gs_job_const(a);
    for (int r = 0; r < j->attach.n; r++) {
        const gs_attach_rank_t *x = &j->attach.r[r];
        if (x->pid > 0 && !x->gone && (x->cuda_ms > 0 || x->state != GS_ATTACH_UNSEEN)) {
            return 1;
        }
    }
    return 0;
}

void gs_agent_memory_look(gs_agent_t *a, long long now)
{
    gs_job_t *j = gs_job(a);
    if (!j->watching || now < j->memory_due_ms || !wanted(a)) {
        return;
    }
    gs_gpu_list_t *l = calloc(1, sizeof(*l));
    if (l != NULL && gs_agent_memory_listing(a, l) == 0) {
        gs_agent_memory_take(a, l);
    }
    free(l);
    j->memory_due_ms = now + GS_AGENT_MEMORY_EVERY_MS;
}

int gs_agent_memory_timeout(const gs_agent_t *a, long long now)
{
    const gs_job_t *j = gs_job_const(a);
    if (!j->watching || j->ranks.nlive == 0 || !wanted(a)) {
        return -1;
    }
    return j->memory_due_ms > now ? (int)(j->memory_due_ms - now) : 0;
}

/* The ranks served on entry e: the largest peak (and whose), the smallest,
 * the largest single MPS context (and whose), and how many had a figure. */
struct peaks {
    int big, small, ctx, known;
};

static void peaks_of(const gs_agent_t *a, int e, struct peaks *p)
{
    const gs_job_t *j = gs_job_const(a);
    p->big = p->small = p->ctx = -1;
    p->known = 0;
    for (int r = 0; r < j->attach.n; r++) {
        const gs_attach_rank_t *x = &j->attach.r[r];
        if (x->pid <= 0 || gs_placer_gpu(&j->placer, r) != e) {
            continue;
        }
        if (x->peak_ctx_mib > 0 &&
            (p->ctx < 0 || x->peak_ctx_mib > j->attach.r[p->ctx].peak_ctx_mib)) {
            p->ctx = r;
        }
        if (x->peak_mib < 0) {
            continue;
        }
        p->known++;
        p->big = p->big < 0 || x->peak_mib > j->attach.r[p->big].peak_mib ? r : p->big;
        p->small = p->small < 0 || x->peak_mib < j->attach.r[p->small].peak_mib ? r : p->small;
    }
}

void gs_agent_memory_summary(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    long long limit = a->o->cfg.mem_limit_mb;
    for (int e = 0; j->watching && e < j->placer.ngpus && e < GS_MAX_GPUS; e++) {
        struct peaks p;
        peaks_of(a, e, &p);
        if (p.known == 0) {
            continue;
        }
        /* The limit bounds each client context on each GPU (its CUDA
         * context included): the largest one within 10 % of it is said
         * always (the next run's allocations may fail), the rest with -v. */
        long long ctx = p.ctx >= 0 ? j->attach.r[p.ctx].peak_ctx_mib : 0;
        int near = limit > 0 && ctx * 10 >= limit * 9;
        char lim[240] = "";
        if (near) {
            snprintf(lim, sizeof(lim),
                     "; local rank %d's MPS context reached %lld MiB, within 10 %% of "
                     "--mps-memory-limit %lld MiB a rank: raise it, or its allocations may fail",
                     p.ctx, ctx, limit);
        } else if (limit > 0) {
            snprintf(lim, sizeof(lim), "; --mps-memory-limit %lld MiB a rank", limit);
        }
        gs_report_add(&a->report, near,
                      "GPU %d (%s): the local ranks' peak GPU memory as NVML listed it every %d "
                      "ms: largest %lld MiB (local rank %d), smallest %lld MiB (local rank %d), "
                      "of %d rank%s%s",
                      a->servers.gpu[e].index, a->servers.gpu[e].uuid, GS_AGENT_MEMORY_EVERY_MS,
                      j->attach.r[p.big].peak_mib, p.big, j->attach.r[p.small].peak_mib, p.small,
                      p.known, p.known == 1 ? "" : "s", lim);
    }
}
