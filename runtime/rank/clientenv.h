/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment each rank gets: where its GPU's MPS daemon listens, its
 * share of the GPU, and GSRUN_* facts for the program. */
#ifndef GS_CLIENTENV_H
#define GS_CLIENTENV_H

#include "runtime/core/gs_error.h"
#include "runtime/core/config.h"
#include "runtime/files/state.h"

#define GS_CLIENTENV_MAX 16

typedef struct {
    int nset;
    char set[GS_CLIENTENV_MAX][320]; /* "NAME=VALUE" */
    int nunset;
    const char *unset[GS_CLIENTENV_MAX];
    int uncoupled; /* no share (100 %): the program links no MPI library */
} gs_clientenv_t;

/* Computes the changes for local_rank of local_size from the node state and
 * the GPU the agent gave the rank (rank_gpu, an index into st's GPUs; -1:
 * none, the rank's block). With MPS on the rank sees its GPU as device 0: the daemon was started
 * with only that GPU visible, and MPS remaps a client's CUDA_VISIBLE_DEVICES relative to the
 * server's. cfg: the rank's own settings (its priority on the server). */
int gs_clientenv_build(const gs_state_t *st, int rank_gpu, int local_rank, int local_size,
                       const gs_config_t *cfg, gs_clientenv_t *env, gs_error_t *err);

/* Makes env unset name (a string that outlives env), instead of any value
 * it set. 0 or -ENOSPC. */
int gs_clientenv_unset(gs_clientenv_t *env, const char *name);

/* Applies the changes to this process (setenv/unsetenv). */
int gs_clientenv_apply(const gs_clientenv_t *env, gs_error_t *err);

#endif
