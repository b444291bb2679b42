/* SPDX-License-Identifier: BSD-3-Clause */
/* Placement as the agent runs it: which GPU each local rank gets, as the
 * ranks register. Pure: ranks' CPUs and the GPUs' locality in, each rank's
 * GPU out; no sockets, no processes (runtime/plan/placement.c decides a whole
 * set at once; this holds the state while ranks come one by one).
 *
 * With MPS the GPUs and how many ranks each takes are the plan's; without
 * MPS, with gpu-bind, every visible GPU takes a block. When the GPUs' CPU
 * masks differ and ranks do not start one after another, answers wait
 * until every rank has come (or a deadline), then go by locality. */
#ifndef GS_AGENT_PLACER_H
#define GS_AGENT_PLACER_H

#include <sched.h>
#include <stddef.h>

#include "runtime/gpu/gpu.h"

/* gs_placer_add: the rank's answer must wait for gs_placer_flush. */
#define GS_PLACER_WAIT (-2)

typedef struct {
    int size;                /* local ranks */
    int ngpus;               /* GPUs ranks are given (0: none) */
    int target[GS_MAX_GPUS]; /* ranks each GPU takes */
    int first[GS_MAX_GPUS];  /* the first rank of each GPU's block */
    const gs_gpu_t *gpus;    /* their locality */
    int by_locality;         /* answers wait for every rank's CPUs */
    int placed;              /* the ranks so far have GPUs */
    long long deadline_ms;   /* by_locality: place with whoever came by then */
    int *rank_gpu;           /* -1 until placed */
    cpu_set_t *rank_cpus;
    unsigned char *rank_known; /* rank_cpus[r] holds rank r's CPUs */
    unsigned char *rank_came;  /* rank r registered */
} gs_placer_t;

/* size ranks over ngpus GPUs (gpus[0..ngpus-1]) taking target[g] each;
 * in_sequence: ranks start one after another (waiting for all would
 * deadlock). 0 or -ENOMEM. The "GPUs" may be MPS servers, several on one
 * GPU (the plan's entries): their blocks then need not follow their order,
 * so gs_placer_set_blocks names where each starts. */
int gs_placer_init(gs_placer_t *p, int size, int ngpus, const int *target, const gs_gpu_t *gpus,
                   int in_sequence, long long deadline_ms);
/* Block g starts at rank first[g] (default: the targets in order). */
void gs_placer_set_blocks(gs_placer_t *p, const int *first);
void gs_placer_free(gs_placer_t *p);
/* The targets without MPS: one GPU per rank, in blocks when ranks
 * outnumber GPUs. */
void gs_placer_blocks(int size, int ngpus, int *target);
/* Rank `rank` registered with its CPUs (NULL: unknown). Returns its GPU
 * (-1: none) to answer now, or GS_PLACER_WAIT. */
int gs_placer_add(gs_placer_t *p, int rank, const cpu_set_t *cpus);
/* Whether answers are held and due (every rank came, or the deadline). */
int gs_placer_pending(const gs_placer_t *p);
/* Places the ranks that came, by locality (a rank whose CPUs are unknown is
 * near every GPU). Returns how many of the m ranks placed are on a GPU near
 * them (*m set), or -1 when nothing was held. */
int gs_placer_flush(gs_placer_t *p, int *m);
/* Rank r's GPU after a flush: its place, or for a rank that came later the
 * first GPU with room. */
int gs_placer_gpu(const gs_placer_t *p, int rank);
/* The local ranks on GPU g, as "0-3" or "0,2,4". */
void gs_placer_ranks_text(const gs_placer_t *p, int g, char *buf, size_t len);
/* The CPUs of the ranks bound to fewer than online CPUs, together; their
 * count. */
int gs_placer_bound_cpus(const gs_placer_t *p, long online, cpu_set_t *out);

#endif
