/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/rank/task.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/rank/helper.h"
#include "runtime/rank/program.h"

int gs_task_join(const gs_node_req_t *req, gs_state_t *st, gs_clientenv_t *env, int *keep_fd,
                 int *node_wide, gs_error_t *err)
{
    int gpu = -1;
    *node_wide = 0;
    if (gs_node_join(req, st, &gpu, keep_fd, err) != 0) {
        int code = st->exit_code ? st->exit_code : GS_EXIT_SETUP;
        if (code != GS_EXIT_RUNDIR || req->cfg->mps != GS_MPS_AUTO) {
            *node_wide = st->kind == GS_STATE_ERROR;
            return code;
        }
        /* No usable run dir on this node (TMPDIR too long, full, unsafe):
         * auto runs the task as the launcher alone would, with a notice. */
        memset(st, 0, sizeof(*st));
        st->kind = GS_STATE_OFF;
        st->notice = 1;
        gpu = -1;
        snprintf(st->message, sizeof(st->message), "warning: %s; running without MPS", err->text);
    }
    if (gs_clientenv_build(st, gpu, req->local_rank, req->local_size, req->cfg, env, err) != 0) {
        return GS_EXIT_SETUP;
    }
    return 0;
}

int gs_task_run_rank(const gs_task_rank_t *rank, gs_state_t *st, gs_clientenv_t *env,
                     int *keep_fd, int *node_wide, gs_error_t *err)
{
    gs_node_req_t req;
    char agent[GS_PATH_MAX];
    const char *pid = getenv("GSRUN_PID");
    *node_wide = 0;
    /* Only the node leader starts the agent; the other ranks skip the lookup. */
    if (rank->local_rank == 0 && gs_helper_path("gsrun-agent", agent, sizeof(agent), err) != 0) {
        *node_wide = 1;
        return GS_EXIT_SETUP;
    }
    memset(&req, 0, sizeof(req));
    req.cfg = rank->cfg;
    req.job_dir = rank->job_dir;
    req.gsrun_node = getenv("GSRUN_NODE_ID");
    req.gsrun_pid = pid != NULL ? (pid_t)atoi(pid) : 0;
    req.agent_path = rank->local_rank == 0 ? agent : NULL;
    req.local_rank = rank->local_rank;
    req.local_size = rank->local_size;
    req.launcher_pid = rank->launcher_pid;
    req.for_parent = rank->for_parent;
    req.report_rank0 = rank->report_rank0;
    /* Set by gsrun for its ranks: its node's agent started early, and the
     * clock the timelines count from. */
    req.early_agent = getenv("GSRUN_EARLY_AGENT") != NULL;
    req.t0_ms = getenv("GSRUN_T0") != NULL ? atoll(getenv("GSRUN_T0")) : 0;
    int code = gs_task_join(&req, st, env, keep_fd, node_wide, err);
    /* A program that links no MPI library runs on its own: the share for
     * coupled ranks (200/n) only slows it (doc/tuning.md). The default only:
     * a share the user set wins. */
    char path[GS_PATH_MAX];
    if (code == 0 && st->kind == GS_STATE_ON && rank->program != NULL &&
        rank->cfg->pct_mode == GS_PCT_AUTO &&
        gs_program_resolve(rank->program, path, sizeof(path)) == 0 &&
        gs_program_links_mpi(path) == 0) {
        /* Unset, as --mps-percentage=off: the whole GPU, and a context that
         * holds no less memory than without MPS (design A13). */
        if (gs_clientenv_unset(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") != 0) {
            return GS_EXIT_SETUP;
        }
        env->uncoupled = 1;
    }
    return code;
}

int gs_task_step_name(unsigned long job, unsigned long step, char *out, size_t len)
{
    return (size_t)snprintf(out, len, "slurm-%lu.%lu", job, step) < len ? 0 : -ENAMETOOLONG;
}

int gs_task_wait_agent(const char *node_dir, int timeout_ms)
{
    gs_state_t st;
    gs_error_t ignored;
    /* After a node-wide error the agent stays until the launcher is gone (for
     * ranks yet to read the error): waiting for it here would hold both. */
    if (gs_state_read(node_dir, &st, &ignored) == 0 && st.kind == GS_STATE_ERROR) {
        return -EAGAIN;
    }
    int fd = gs_rundir_lock_wait(node_dir, timeout_ms);
    if (fd >= 0) {
        close(fd);
    }
    return fd == -ETIMEDOUT ? -ETIMEDOUT : 0;
}
