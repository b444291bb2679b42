/* SPDX-License-Identifier: BSD-3-Clause */
/* Discovery of a rank's place on its node: through PMIx when a server is
 * there, else from the launcher's own variables. */
#ifndef GS_DISCOVER_H
#define GS_DISCOVER_H

#include <stddef.h>

#include "runtime/core/gs_error.h"

typedef struct {
    int local_rank;
    int local_size;
    int node_id;        /* -1 if unknown */
    char job[256];      /* PMIx namespace, or the launcher's job id */
    char peers[1024];   /* PMIX_LOCAL_PEERS, if known */
    const char *source; /* "pmix", "openmpi", "slurm", "hydra", "mvapich", "pals",
                         * "gsrun" */
} gs_local_t;

/* Fills loc. With Open MPI's per-rank variables present they are used;
 * otherwise PMIx when a server is there; otherwise Slurm's, Hydra's,
 * MVAPICH's, PALS' variables or GSRUN_LOCAL_RANK/_SIZE.
 * GSRUN_DISCOVERY=pmix or =env forces one way. */
int gs_discover(gs_local_t *loc, gs_error_t *err);

/* Checks GSRUN_DISCOVERY (unset, "env" or "pmix"): -EINVAL with err. */
int gs_discover_check_env(gs_error_t *err);

/* This node's task count from SLURM_TASKS_PER_NODE ("2(x3),1"), or <0. */
int gs_discover_slurm_tasks(const char *spec, int node_id);

/* The environment-variable fallback alone (unit-tested). */
int gs_discover_from_env(gs_local_t *loc, gs_error_t *err);

#endif
