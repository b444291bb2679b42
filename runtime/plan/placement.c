/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/plan/placement.h"

#include <string.h>

static int first_with_room(int ngpus, const int *targets, const int *load, const unsigned char *near)
{
    for (int g = 0; g < ngpus; g++) {
        if (load[g] < targets[g] && (near == NULL || near[g])) {
            return g;
        }
    }
    return -1;
}

int gs_placement_ranks(int nranks, int ngpus, const int *targets, const unsigned char *near,
                       int *gpu_of_rank)
{
    int load[GS_MAX_GPUS] = {0}, placed_near = 0;

    if (ngpus > GS_MAX_GPUS) {
        ngpus = GS_MAX_GPUS;
    }
    for (int r = 0; r < nranks; r++) {
        const unsigned char *nr = near != NULL ? near + (size_t)r * (size_t)ngpus : NULL;
        int g = first_with_room(ngpus, targets, load, nr);
        if (g >= 0) {
            placed_near++;
        } else {
            g = first_with_room(ngpus, targets, load, NULL);
        }
        gpu_of_rank[r] = g;
        if (g >= 0) {
            load[g]++;
        }
    }
    return placed_near;
}

static int mask_touches(const gs_gpu_t *g, const cpu_set_t *cpus)
{
    int bits = (int)(8 * sizeof(unsigned long));
    for (int c = 0; c < CPU_SETSIZE && c / bits < GS_GPU_CPUMASK_WORDS; c++) {
        if (CPU_ISSET(c, cpus) && ((g->cpumask[c / bits] >> (c % bits)) & 1UL)) {
            return 1;
        }
    }
    return 0;
}

void gs_placement_near(const cpu_set_t *rank_cpus, const gs_gpu_t *gpus, int ngpus,
                       unsigned char *near)
{
    int any = 0;
    for (int g = 0; g < ngpus; g++) {
        near[g] = rank_cpus == NULL || !gpus[g].have_cpumask || mask_touches(&gpus[g], rank_cpus);
        any |= near[g];
    }
    if (!any) {
        memset(near, 1, (size_t)ngpus);
    }
}

int gs_placement_by_locality(const gs_gpu_t *gpus, int ngpus)
{
    int differ = 0;
    for (int g = 0; g < ngpus; g++) {
        if (!gpus[g].have_cpumask) {
            return 0; /* one GPU's CPUs unknown: nothing to compare it by */
        }
        differ |= memcmp(gpus[g].cpumask, gpus[0].cpumask, sizeof(gpus[0].cpumask)) != 0;
    }
    return differ;
}
