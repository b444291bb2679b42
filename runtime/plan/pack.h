/* SPDX-License-Identifier: BSD-3-Clause */
/* Packing: where a job's ranks go on a node that the user's other jobs (and
 * other users' processes) already load. Pure: the GPUs' load in, the order
 * to use them in and each GPU's rank count out; no files, no processes.
 *
 * The rule: the job's ranks go one at a time to the GPU whose load (what
 * runs there plus the ranks given so far) is lowest, ties to the GPU that
 * comes first in the job's own order (CUDA's order, which the placer then
 * refines by the ranks' cores). So the node's GPUs end as evenly loaded as
 * they can, and a job alone on the node gets today's blocks. */
#ifndef GS_PACK_H
#define GS_PACK_H

#include "runtime/core/limits.h"

typedef struct {
    int ngpus;
    int order[GS_MAX_GPUS];  /* the job's GPUs, emptiest first: order[k] is a visible GPU */
    int counts[GS_MAX_GPUS]; /* ranks on order[k]; non-increasing in k */
    int nused;               /* GPUs with ranks: order[0..nused-1] */
    int loaded;              /* some GPU carried load: the plan follows counts */
} gs_pack_t;

/* Packs nranks over ngpus GPUs whose load (ranks of the user's other jobs
 * plus foreign processes) is load[g]. With no load anywhere the order is
 * the GPUs' own and counts are the plan's blocks (loaded 0). 0, or -EINVAL
 * for impossible input. */
int gs_pack_compute(int nranks, int ngpus, const int *load, gs_pack_t *out);

/* The most ranks any used GPU will carry (its load plus the job's ranks):
 * whether the job's ranks meet others on a GPU. */
int gs_pack_peak(const gs_pack_t *p, const int *load);

#endif
