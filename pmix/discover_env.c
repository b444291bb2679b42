/* SPDX-License-Identifier: BSD-3-Clause */
/* Discovery from the launchers' own variables (Open MPI's, Slurm's, Hydra's,
 * MVAPICH's, Cray PALS', IBM jsrun's, Flux's, or GSRUN_LOCAL_RANK/_SIZE
 * given by hand): no
 * PMIx, so that programs that need only these (gsrun task-prolog) do not
 * link it. */
#include "gs_autoconf.h"

#include "pmix/discover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/text.h"

static int env_int(const char *name, int *out)
{
    const char *v = getenv(name);
    char *end;
    long x;
    if (v == NULL || *v == '\0') {
        return -ENOENT;
    }
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || x < 0 || x > 1000000) {
        return -EINVAL;
    }
    *out = (int)x;
    return 0;
}

/* SLURM_STEP_TASKS_PER_NODE (the step's; SLURM_TASKS_PER_NODE is the
 * job's) lists tasks per node as "2(x3),1": the entry of node SLURM_NODEID
 * is this node's task count. */
int gs_discover_slurm_tasks(const char *spec, int node_id)
{
    const char *p = spec;
    int node = 0;
    while (p != NULL && *p != '\0') {
        char *end;
        long count = strtol(p, &end, 10), repeat = 1;
        if (end == p || count < 1) {
            return -EINVAL;
        }
        if (strncmp(end, "(x", 2) == 0) {
            char *rend;
            repeat = strtol(end + 2, &rend, 10);
            if (rend == end + 2 || *rend != ')' || repeat < 1) {
                return -EINVAL;
            }
            end = rend + 1;
        }
        if (node_id < node + repeat) {
            return (int)count;
        }
        node += (int)repeat;
        if (*end == ',') {
            end++;
        } else if (*end != '\0') {
            return -EINVAL;
        }
        p = end;
    }
    return -ENOENT;
}

/* Launchers that give a rank its local rank and the node's rank count in
 * two variables of their own (doc/launchers.md says where each is from);
 * a hint where a launcher has no count of its own. */
static const struct {
    const char *source, *rank, *size, *hint;
} pairs[] = {
    {"hydra", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL}, /* MPICH's Hydra, Intel MPI */
    {"mvapich", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", NULL},
    {"pals", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", NULL}, /* HPE Cray PALS mpiexec */
    {"jsrun", "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_SIZE", NULL}, /* IBM JSM */
    /* Flux's job shell gives a task its local rank but not the node's task
     * count (only the job's size and node count): that comes by hand. */
    {"flux", "FLUX_TASK_LOCAL_ID", "GSRUN_LOCAL_SIZE",
     "Flux gives each task its local rank (FLUX_TASK_LOCAL_ID) but not the node's task count; "
     "run with PMIx (flux run -o pmi=pmix ...) or set it: flux run "
     "--env=GSRUN_LOCAL_SIZE=<tasks per node> ..."},
    {"gsrun", "GSRUN_LOCAL_RANK", "GSRUN_LOCAL_SIZE", NULL}, /* any launcher: set by hand */
};

int gs_discover_from_env(gs_local_t *loc, gs_error_t *err)
{
    int rank, size, node;
    const char *tasks = getenv("SLURM_STEP_TASKS_PER_NODE");

    if (tasks == NULL) {
        tasks = getenv("SLURM_TASKS_PER_NODE");
    }
    memset(loc, 0, sizeof(*loc));
    loc->node_id = -1;
    if (env_int("OMPI_COMM_WORLD_LOCAL_RANK", &rank) == 0 &&
        env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &size) == 0) {
        loc->source = "openmpi";
    } else if (env_int("SLURM_LOCALID", &rank) == 0 && env_int("SLURM_NODEID", &node) == 0 &&
               tasks != NULL && (size = gs_discover_slurm_tasks(tasks, node)) > 0) {
        loc->source = "slurm";
        loc->node_id = node;
        if (getenv("SLURM_JOB_ID") != NULL) {
            snprintf(loc->job, sizeof(loc->job), "%s", getenv("SLURM_JOB_ID"));
        }
    } else {
        size_t i = 0;
        while (i < sizeof(pairs) / sizeof(pairs[0]) &&
               (env_int(pairs[i].rank, &rank) != 0 || env_int(pairs[i].size, &size) != 0)) {
            i++;
        }
        if (i == sizeof(pairs) / sizeof(pairs[0]) && getenv("FLUX_TASK_LOCAL_ID") != NULL) {
            return gs_error_set(err, ENOENT,
                                "cannot find how many ranks share this node: Flux gives each task "
                                "its local rank (FLUX_TASK_LOCAL_ID) but not the node's task "
                                "count; run with PMIx (flux run -o pmi=pmix ...) or set it: "
                                "flux run --env=GSRUN_LOCAL_SIZE=<tasks per node> ...");
        }
        if (i == sizeof(pairs) / sizeof(pairs[0])) {
            return gs_error_set(err, ENOENT,
                                "cannot find this rank's place on its node: no PMIx server, and "
                                "no launcher variables (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, "
                                "Slurm's SLURM_LOCALID, Hydra's MPI_LOCALRANKID, ...); set "
                                "GSRUN_LOCAL_RANK and GSRUN_LOCAL_SIZE for each rank");
        }
        loc->source = pairs[i].source;
    }
    if (rank >= size) {
        return gs_error_set(err, EINVAL, "local rank %d is not below the local size %d (from %s)",
                            rank, size, loc->source);
    }
    loc->local_rank = rank;
    loc->local_size = size;
    return 0;
}

int gs_discover_check_env(gs_error_t *err)
{
    const char *how = getenv("GSRUN_DISCOVERY");
    if (how != NULL && strcmp(how, "env") != 0 && strcmp(how, "pmix") != 0) {
        char shown[64];
        return gs_error_set(err, EINVAL, "GSRUN_DISCOVERY: invalid value '%s'; accepted: env, pmix",
                            gs_text_printable(how, shown, sizeof(shown)));
    }
    return 0;
}
