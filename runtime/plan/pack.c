/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/plan/pack.h"

#include <errno.h>
#include <string.h>

int gs_pack_compute(int nranks, int ngpus, const int *load, gs_pack_t *out)
{
    int total[GS_MAX_GPUS];

    memset(out, 0, sizeof(*out));
    if (nranks < 1 || ngpus < 0 || ngpus > GS_MAX_GPUS || (ngpus > 0 && load == NULL)) {
        return -EINVAL;
    }
    out->ngpus = ngpus;
    for (int g = 0; g < ngpus; g++) {
        out->loaded |= load[g] != 0;
        if (load[g] < 0) {
            return -EINVAL;
        }
    }
    /* Emptiest first, ties in the job's own order (a stable sort). */
    for (int g = 0; g < ngpus; g++) {
        int k = g;
        while (k > 0 && load[out->order[k - 1]] > load[g]) {
            out->order[k] = out->order[k - 1];
            k--;
        }
        out->order[k] = g;
    }
    if (ngpus == 0) {
        return 0;
    }
    if (!out->loaded) {
        /* The plan's own blocks: consecutive ranks, sizes differing by at most one. */
        int used = ngpus < nranks ? ngpus : nranks;
        for (int k = 0; k < used; k++) {
            out->counts[k] = (int)((long)(k + 1) * nranks / used) - (int)((long)k * nranks / used);
        }
        out->nused = used;
        return 0;
    }
    /* Water filling: each rank to the lowest total, ties to the earlier
     * GPU in the order. Loads ascend along the order, so the counts do not
     * grow along it and the GPUs used are a prefix of it. */
    for (int k = 0; k < ngpus; k++) {
        total[k] = load[out->order[k]];
    }
    for (int r = 0; r < nranks; r++) {
        int best = 0;
        for (int k = 1; k < ngpus; k++) {
            if (total[k] < total[best]) {
                best = k;
            }
        }
        total[best]++;
        out->counts[best]++;
    }
    while (out->nused < ngpus && out->counts[out->nused] > 0) {
        out->nused++;
    }
    return 0;
}

int gs_pack_peak(const gs_pack_t *p, const int *load)
{
    int peak = 0;
    for (int k = 0; k < p->nused; k++) {
        int t = load[p->order[k]] + p->counts[k];
        peak = t > peak ? t : peak;
    }
    return peak;
}
