/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/job/placer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/placement.h"

void gs_placer_blocks(int size, int ngpus, int *target)
{
    for (int g = 0; g < ngpus; g++) {
        int first = (int)((long)g * size / ngpus), next = (int)((long)(g + 1) * size / ngpus);
        target[g] = size >= ngpus ? next - first : 1;
    }
}

int gs_placer_init(gs_placer_t *p, int size, int ngpus, const int *target, const gs_gpu_t *gpus,
                   int in_sequence, long long deadline_ms)
{
    memset(p, 0, sizeof(*p));
    p->size = size;
    p->ngpus = ngpus < GS_MAX_GPUS ? ngpus : GS_MAX_GPUS;
    for (int g = 0, first = 0; g < p->ngpus; first += target[g], g++) {
        p->target[g] = target[g];
        p->first[g] = first;
    }
    p->gpus = gpus;
    p->by_locality = p->ngpus > 1 && !in_sequence && gs_placement_by_locality(gpus, p->ngpus);
    p->deadline_ms = deadline_ms;
    p->rank_gpu = malloc((size_t)(size > 0 ? size : 1) * sizeof(*p->rank_gpu));
    p->rank_cpus = calloc((size_t)(size > 0 ? size : 1), sizeof(*p->rank_cpus));
    p->rank_known = calloc((size_t)(size > 0 ? size : 1), 1);
    p->rank_came = calloc((size_t)(size > 0 ? size : 1), 1);
    if (p->rank_gpu == NULL || p->rank_cpus == NULL || p->rank_known == NULL ||
        p->rank_came == NULL) {
        gs_placer_free(p);
        return -ENOMEM;
    }
    for (int r = 0; r < size; r++) {
        p->rank_gpu[r] = -1;
    }
    return 0;
}

void gs_placer_free(gs_placer_t *p)
{
    free(p->rank_gpu);
    free(p->rank_cpus);
    free(p->rank_known);
    free(p->rank_came);
    p->rank_gpu = NULL;
    p->rank_cpus = NULL;
    p->rank_known = NULL;
    p->rank_came = NULL;
}

void gs_placer_set_blocks(gs_placer_t *p, const int *first)
{
    for (int g = 0; g < p->ngpus; g++) {
        p->first[g] = first[g];
    }
}

/* Rank r's GPU in blocks of consecutive ranks. */
static int block_gpu(const gs_placer_t *p, int rank)
{
    for (int g = 0; g < p->ngpus; g++) {
        if (rank >= p->first[g] && rank < p->first[g] + p->target[g]) {
            return g;
        }
    }
    return -1;
}

/* A rank that came after placement: the first GPU with room. */
static int late_gpu(const gs_placer_t *p, int rank)
{
    int load[GS_MAX_GPUS] = {0};
    for (int r = 0; r < p->size; r++) {
        if (p->rank_gpu[r] >= 0) {
            load[p->rank_gpu[r]]++;
        }
    }
    for (int g = 0; g < p->ngpus; g++) {
        if (load[g] < p->target[g]) {
            return g;
        }
    }
    return block_gpu(p, rank);
}

int gs_placer_add(gs_placer_t *p, int rank, const cpu_set_t *cpus)
{
    if (p->rank_gpu == NULL || rank < 0 || rank >= p->size) {
        return -1;
    }
    p->rank_came[rank] = 1;
    if (cpus != NULL) {
        p->rank_cpus[rank] = *cpus;
        p->rank_known[rank] = 1;
    }
    if (p->ngpus == 0) {
        return -1;
    }
    if (p->by_locality && !p->placed) {
        return GS_PLACER_WAIT; /* held until every rank has come */
    }
    p->rank_gpu[rank] = p->placed ? late_gpu(p, rank) : block_gpu(p, rank);
    return p->rank_gpu[rank];
}

int gs_placer_pending(const gs_placer_t *p)
{
    return p->ngpus > 0 && p->by_locality && !p->placed;
}

int gs_placer_flush(gs_placer_t *p, int *m_out)
{
    int n = p->size, m = 0, close_ones = -1;

    *m_out = 0;
    if (!gs_placer_pending(p)) {
        return -1;
    }
    int idx[n > 0 ? n : 1], gpu[n > 0 ? n : 1];
    unsigned char *near = calloc((size_t)(n > 0 ? n : 1) * (size_t)p->ngpus, 1);
    if (near != NULL) {
        for (int r = 0; r < n; r++) {
            if (p->rank_came[r]) {
                gs_placement_near(p->rank_known[r] ? &p->rank_cpus[r] : NULL, p->gpus, p->ngpus,
                                  near + (size_t)m * (size_t)p->ngpus);
                idx[m++] = r;
            }
        }
        close_ones = gs_placement_ranks(m, p->ngpus, p->target, near, gpu);
        for (int i = 0; i < m; i++) {
            p->rank_gpu[idx[i]] = gpu[i];
        }
        free(near);
    }
    p->placed = 1; /* later arrivals place against this */
    *m_out = m;
    return close_ones < 0 ? 0 : close_ones;
}

int gs_placer_gpu(const gs_placer_t *p, int rank)
{
    if (p->rank_gpu == NULL || rank < 0 || rank >= p->size || p->ngpus == 0) {
        return -1;
    }
    return p->rank_gpu[rank] >= 0 ? p->rank_gpu[rank] : late_gpu(p, rank);
}

void gs_placer_ranks_text(const gs_placer_t *p, int g, char *buf, size_t len)
{
    size_t used = 0;
    int n = p->size;
    buf[0] = '\0';
    for (int r = 0; p->rank_gpu != NULL && r < n && used < len; r++) {
        if (p->rank_gpu[r] != g) {
            continue;
        }
        int e = r;
        while (e + 1 < n && p->rank_gpu[e + 1] == g) {
            e++;
        }
        used += (size_t)snprintf(buf + used, len - used, e > r ? "%s%d-%d" : "%s%d",
                                 used ? "," : "", r, e);
        r = e;
    }
}

int gs_placer_bound_cpus(const gs_placer_t *p, long online, cpu_set_t *out)
{
    CPU_ZERO(out);
    for (int r = 0; p->rank_known != NULL && r < p->size; r++) {
        if (p->rank_known[r] && CPU_COUNT(&p->rank_cpus[r]) < online) {
            CPU_OR(out, out, &p->rank_cpus[r]);
        }
    }
    return CPU_COUNT(out);
}
