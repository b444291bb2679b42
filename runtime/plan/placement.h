/* SPDX-License-Identifier: BSD-3-Clause */
/* Which GPU each node-local rank uses: near its cores when the launcher has
 * bound the ranks, in blocks of consecutive ranks otherwise.
 *
 * The plan fixes how many ranks each GPU takes (its target: blocks whose
 * sizes differ by at most one, so every GPU's share of the GPU is known
 * before any rank arrives); placement only decides which ranks those are.
 * Ranks are placed in local-rank order, each on the first GPU near its
 * cores that still has room, else on the first GPU with room. A rank that
 * is not bound is near every GPU, so unbound ranks fill the GPUs in blocks,
 * exactly as without placement. Pure, so it is tested as tables. */
#ifndef GS_PLACEMENT_H
#define GS_PLACEMENT_H

#include <sched.h>

#include "runtime/gpu/gpu.h"

/* near[r * ngpus + g]: rank r's CPUs touch GPU g's. Ranks beyond nranks'
 * targets (sum of targets < nranks) get -1. Returns how many ranks were
 * placed on a GPU near them. */
int gs_placement_ranks(int nranks, int ngpus, const int *targets, const unsigned char *near,
                       int *gpu_of_rank);

/* Fills near for one rank from its CPUs and the GPUs' (gpus[0..ngpus-1]):
 * a rank with no known CPUs, touching no GPU's CPUs, or a GPU without a CPU
 * mask count as near every GPU. */
void gs_placement_near(const cpu_set_t *rank_cpus, const gs_gpu_t *gpus, int ngpus,
                       unsigned char *near);

/* Whether placement by locality can differ from blocks: at least two GPUs
 * and their CPU masks are not all the same. */
int gs_placement_by_locality(const gs_gpu_t *gpus, int ngpus);

#endif
