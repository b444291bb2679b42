/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/task.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/proc.h"
#include "runtime/rundir.h"

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
    if (gs_clientenv_build(st, gpu, req->local_rank, req->local_size, env, err) != 0) {
        return GS_EXIT_SETUP;
    }
    return 0;
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
