/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/rank/clientenv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add(gs_clientenv_t *env, const char *name, const char *value)
{
    if (env->nset >= GS_CLIENTENV_MAX) {
        return -ENOSPC;
    }
    if ((size_t)snprintf(env->set[env->nset], sizeof(env->set[0]), "%s=%s", name, value) >=
        sizeof(env->set[0])) {
        return -ENAMETOOLONG;
    }
    env->nset++;
    return 0;
}

static int add_int(gs_clientenv_t *env, const char *name, int v)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", v);
    return add(env, name, buf);
}

int gs_clientenv_build(const gs_state_t *st, int rank_gpu, int local_rank, int local_size,
                       const gs_config_t *cfg, gs_clientenv_t *env, gs_error_t *err)
{
    int rc = 0;
    memset(env, 0, sizeof(*env));

    rc |= add_int(env, "GSRUN_LOCAL_RANK", local_rank);
    rc |= add_int(env, "GSRUN_LOCAL_SIZE", local_size);
    /* Internal to gsrun: the program has no use for them. */
    env->unset[env->nunset++] = "GSRUN_JOB_DIR";
    env->unset[env->nunset++] = "GSRUN_FORK_AGENT";
    env->unset[env->nunset++] = "GSRUN_EARLY_AGENT";
    env->unset[env->nunset++] = "GSRUN_T0";

    int gi = rank_gpu;
    if (gi < 0 || gi >= st->nservers) {
        const gs_state_server_t *b = gs_state_server_of_rank(st, local_rank);
        gi = b != NULL ? (int)(b - st->server) : -1;
    }
    if (st->kind != GS_STATE_ON) {
        rc |= add(env, "GSRUN_MPS_ACTIVE", "0");
        if (gi >= 0) {
            /* One GPU per rank without MPS: the agent listed the GPUs only
             * with gpu-bind on. The UUID holds in any CUDA_DEVICE_ORDER. */
            rc |= add(env, "GSRUN_GPU_UUID", st->server[gi].uuid);
            rc |= add(env, "CUDA_VISIBLE_DEVICES", st->server[gi].uuid);
        }
        if (rc != 0) {
            return gs_error_set(err, ENOSPC, "client environment does not fit");
        }
        return 0;
    }

    const gs_state_server_t *g = gi >= 0 ? &st->server[gi] : NULL;
    if (g == NULL) {
        return gs_error_set(err, ERANGE, "local rank %d has no GPU in the node plan (%d GPUs)",
                            local_rank, st->nservers);
    }
    rc |= add(env, "GSRUN_MPS_ACTIVE", "1");
    rc |= add(env, "GSRUN_GPU_UUID", g->uuid);
    rc |= add_int(env, "GSRUN_GPU_RANKS", g->gpu_ranks > 0 ? g->gpu_ranks : g->nranks);
    rc |= add(env, "CUDA_MPS_PIPE_DIRECTORY", g->pipe_dir);
    /* No log directory: MPS reads it in the control daemon's environment
     * only, and a rank told where its server's log is could write lines the
     * agents take as MPS's (a forged fault would retire a good server). */
    env->unset[env->nunset++] = "CUDA_MPS_LOG_DIRECTORY";
    rc |= add(env, "CUDA_VISIBLE_DEVICES", "0");
    if (g->pct_set) {
        rc |= add(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", g->pct);
    } else {
        env->unset[env->nunset++] = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
    }
    /* Client priority (driver 550 and later): a job's own, not the node's. */
    rc |= add(env, "CUDA_MPS_CLIENT_PRIORITY", cfg->priority_low ? "1" : "0");
    if (st->mem_limit_mb > 0) {
        char lim[48];
        /* Device 0: the rank's only device (see CUDA_VISIBLE_DEVICES). */
        snprintf(lim, sizeof(lim), "0=%lldMB", st->mem_limit_mb);
        rc |= add(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", lim);
    }
    if (rc != 0) {
        return gs_error_set(err, ENOSPC, "client environment does not fit");
    }
    return 0;
}

int gs_clientenv_unset(gs_clientenv_t *env, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < env->nset; i++) {
        if (strncmp(env->set[i], name, n) == 0 && env->set[i][n] == '=') {
            memmove(env->set[i], env->set[--env->nset], sizeof(env->set[0]));
            break;
        }
    }
    for (int i = 0; i < env->nunset; i++) {
        if (strcmp(env->unset[i], name) == 0) {
            return 0;
        }
    }
    if (env->nunset >= GS_CLIENTENV_MAX) {
        return -ENOSPC;
    }
    env->unset[env->nunset++] = name;
    return 0;
}

int gs_clientenv_apply(const gs_clientenv_t *env, gs_error_t *err)
{
    for (int i = 0; i < env->nunset; i++) {
        unsetenv(env->unset[i]);
    }
    for (int i = 0; i < env->nset; i++) {
        char name[128];
        const char *eq = strchr(env->set[i], '=');
        size_t n = (size_t)(eq - env->set[i]);
        if (eq == NULL || n >= sizeof(name)) {
            return gs_error_set(err, EINVAL, "bad environment entry");
        }
        memcpy(name, env->set[i], n);
        name[n] = '\0';
        if (setenv(name, eq + 1, 1) != 0) {
            return gs_error_set(err, errno, "setenv %s: %s", name, strerror(errno));
        }
    }
    return 0;
}
