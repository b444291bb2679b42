#include "gs_autoconf.h"

#include "task.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "proc.h"

int gs_task_join(const gs_node_req_t *req, gs_state_t *st, gs_clientenv_t *env, int *keep_fd,
                 int *node_wide, gs_error_t *err)
{
    *node_wide = 0;
    if (gs_node_join(req, st, keep_fd, err) != 0) {
        *node_wide = st->kind == GS_STATE_ERROR;
        return st->exit_code ? st->exit_code : GS_EXIT_SETUP;
    }
    if (gs_clientenv_build(st, req->local_rank, req->local_size, env, err) != 0) {
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
    long long deadline = gs_now_ms() + timeout_ms;
    gs_state_t st;
    gs_error_t ignored;
    int locked;
    /* After a node-wide error the agent stays until the launcher is gone (for
     * ranks yet to read the error): waiting for it here would hold both. */
    if (gs_state_read(node_dir, &st, &ignored) == 0 && st.kind == GS_STATE_ERROR) {
        return -EAGAIN;
    }
    int fd = open(node_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return 0;
    }
    while (!(locked = flock(fd, LOCK_EX | LOCK_NB) == 0) && gs_now_ms() < deadline) {
        usleep(5000);
    }
    close(fd);
    return locked ? 0 : -ETIMEDOUT;
}
