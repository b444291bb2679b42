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

#include "runtime/agent/agent_int.h"
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"

int gs_agent_memory_listing(gs_agent_t *a, gs_gpu_list_t *l)
{
    gs_error_t err;
    if (a->daemons.borrowed && !a->watch_own_nvml) {
        if (gs_agent_share_listing(a, l) == 0) {
            return 0;
        }
        a->watch_own_nvml = 1; /* the service did not answer: not asked again (2 s each) */
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

/* The entry whose server process pid is, or -1: one its daemon named, or
 * the daemon's child (a server the user's node service started for a
 * lease after the job read its PIDs: MPS's control daemon starts it). */
static int server_entry(const gs_agent_t *a, int pid)
{
    long long parent = -2;
    for (int e = 0; e < a->daemons.n && e < GS_MAX_GPUS && pid > 1; e++) {
        const gs_mps_daemon_t *d = &a->daemons.daemon[e];
        for (int i = 0; i < d->nservers && i < GS_MPS_MAX_SERVERS; i++) {
            if (d->server_pid[i] == pid) {
                return e;
            }
        }
        parent = parent == -2 ? gs_proctree_stat_field(pid, 4) : parent;
        if (d->daemon_pid > 1 && parent == d->daemon_pid) {
            return e;
        }
    }
    return -1;
}

void gs_agent_memory_take(gs_agent_t *a, const gs_gpu_list_t *l)
{
    int n = a->attach.n, whole = listing_whole(l);
    long long *sum = calloc((size_t)(n > 0 ? n : 1), sizeof(*sum));
    if (sum == NULL) {
        return; /* the figures stay as they were */
    }
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        a->server_mib[e] = -1;
    }
    for (int g = 0; g < l->count && whole; g++) {
        const gs_gpu_t *d = &l->gpu[g];
        for (int i = 0; i < d->nprocs; i++) {
            int m = d->procs_mib[i], e = server_entry(a, d->procs[i]);
            if (e >= 0) {
                a->server_mib[e] = m == GS_GPU_MIB_UNKNOWN ? -1 : m;
                continue;
            }
            int r = gs_attach_rank_of(&a->attach, d->procs[i], "/proc");
            if (r >= 0 && sum[r] >= 0) {
                sum[r] = m == GS_GPU_MIB_UNKNOWN ? -1 : sum[r] + m;
            }
        }
    }
    for (int r = 0; r < n; r++) {
        gs_attach_rank_t *x = &a->attach.r[r];
        if (x->pid <= 0) {
            continue;
        }
        long long was = x->mib;
        x->mib = whole && !x->gone ? sum[r] : -1;
        x->peak_mib = x->mib > x->peak_mib ? x->mib : x->peak_mib;
        a->watch_changed |= x->mib != was;
    }
    free(sum);
}

/* A rank that has started CUDA (or holds a context) runs still. */
static int wanted(const gs_agent_t *a)
{
    for (int r = 0; r < a->attach.n; r++) {
        const gs_attach_rank_t *x = &a->attach.r[r];
        if (x->pid > 0 && !x->gone && (x->cuda_ms > 0 || x->state != GS_ATTACH_UNSEEN)) {
            return 1;
        }
    }
    return 0;
}

void gs_agent_memory_look(gs_agent_t *a, long long now)
{
    if (!a->watching || now < a->memory_due_ms || !wanted(a)) {
        return;
    }
    gs_gpu_list_t *l = calloc(1, sizeof(*l));
    if (l != NULL && gs_agent_memory_listing(a, l) == 0) {
        gs_agent_memory_take(a, l);
    }
    free(l);
    a->memory_due_ms = now + GS_AGENT_MEMORY_EVERY_MS;
}

int gs_agent_memory_timeout(const gs_agent_t *a, long long now)
{
    if (!a->watching || a->ranks.nlive == 0 || !wanted(a)) {
        return -1;
    }
    return a->memory_due_ms > now ? (int)(a->memory_due_ms - now) : 0;
}

/* The ranks served on entry e: the largest peak (and whose), the smallest,
 * and how many had a figure. */
static int peaks_of(const gs_agent_t *a, int e, int *big, int *small)
{
    int known = 0;
    *big = *small = -1;
    for (int r = 0; r < a->attach.n; r++) {
        const gs_attach_rank_t *x = &a->attach.r[r];
        if (x->pid <= 0 || x->peak_mib < 0 || gs_placer_gpu(&a->placer, r) != e) {
            continue;
        }
        known++;
        *big = *big < 0 || x->peak_mib > a->attach.r[*big].peak_mib ? r : *big;
        *small = *small < 0 || x->peak_mib < a->attach.r[*small].peak_mib ? r : *small;
    }
    return known;
}

void gs_agent_memory_summary(gs_agent_t *a)
{
    long long limit = a->o->cfg.mem_limit_mb;
    for (int e = 0; a->watching && e < a->placer.ngpus && e < GS_MAX_GPUS; e++) {
        int big, small, known = peaks_of(a, e, &big, &small);
        if (known == 0) {
            continue;
        }
        long long top = a->attach.r[big].peak_mib;
        /* Within 10 % of the limit: said always (the next run may fail to
         * allocate), else with -v. */
        int near = limit > 0 && top * 10 >= limit * 9;
        char lim[160] = "";
        if (limit > 0) {
            snprintf(lim, sizeof(lim), "; --mps-memory-limit %lld MiB a rank%s", limit,
                     near ? ", which the largest came within 10 % of: raise it, or the rank's "
                            "allocations may fail"
                          : "");
        }
        gs_report_add(&a->report, near,
                      "GPU %d (%s): the ranks' peak GPU memory as NVML listed it every %d ms: "
                      "largest %lld MiB (rank %d), smallest %lld MiB (rank %d), of %d rank%s"
                      "%s",
                      a->servers.gpu[e].index, a->servers.gpu[e].uuid,
                      GS_AGENT_MEMORY_EVERY_MS, top, big, a->attach.r[small].peak_mib, small,
                      known, known == 1 ? "" : "s", lim);
    }
}
