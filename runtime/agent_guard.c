/* SPDX-License-Identifier: BSD-3-Clause */
/* The guard: a child of the node agent that outlives it only to clean up.
 *
 * The agent tells it every process it is responsible for (ranks, MPS
 * daemons and servers) through a pipe, and "done" when it ends normally.
 * If the pipe closes without "done", the agent was killed (SIGKILL, the OOM
 * killer): the guard ends the node's ranks of the job, the MPS processes,
 * removes the node's directories and reports it. Without it, a killed agent
 * would leave ranks running without MPS and its directories behind. The
 * guard inherits the node dir's lock, so gsrun still waits for the cleanup,
 * and the agent's blocked signals, so only SIGKILL stops it. */
#include "gs_autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_int.h"
#include "proc.h"
#include "rundir.h"

#define GS_GUARD_MAX (GS_MAX_GPUS * (GS_MPS_MAX_SERVERS + 1))

typedef struct {
    gs_rank_t ranks[4096];
    int nranks;
    gs_rank_t mps[GS_GUARD_MAX];
    int nmps;
} gs_guard_t;

static void track(gs_rank_t *list, int *n, int max, pid_t pid)
{
    if (*n >= max || pid <= 1) {
        return;
    }
    gs_rank_t *r = &list[(*n)++];
    r->pid = pid;
    r->rank = -1;
    r->fd = gs_proc_pidfd_open(pid);
    r->is_pidfd = r->fd >= 0;
}

/* Reads the agent's lines until "done" (returns 1) or the pipe closes (0).
 * "noreport": the agent has delivered its report and closed the leader's
 * stderr; our copy must go too, or the launcher, which waits for that
 * stream's end, and the agent, which waits for the launcher, wait forever. */
static int follow_agent(gs_agent_t *a, int fd, gs_guard_t *g)
{
    char buf[4096];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return 0;
        }
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            long pid;
            *nl = '\0';
            if (strcmp(line, "done") == 0) {
                return 1;
            }
            if (strncmp(line, "noreport", 8) == 0 && a->o->report_fd >= 0) {
                close(a->o->report_fd);
                ((gs_agent_opts_t *)a->o)->report_fd = -1;
            }
            if (sscanf(line, "rank %ld", &pid) == 1) {
                track(g->ranks, &g->nranks, 4096, (pid_t)pid);
            } else if (sscanf(line, "mps %ld", &pid) == 1) {
                track(g->mps, &g->nmps, GS_GUARD_MAX, (pid_t)pid);
            }
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have);
    }
}

static void clean_up(gs_agent_t *a, gs_guard_t *g)
{
    int alive = 0, killed;

    for (int i = 0; i < g->nranks; i++) {
        alive += gs_proc_alive(g->ranks[i].pid, g->ranks[i].is_pidfd ? g->ranks[i].fd : -1);
    }
    killed = gs_agent_end_ranks(g->ranks, g->nranks, GS_AGENT_RANK_TERM_MS);
    /* The daemons die with the agent (parent-death signal); their servers
     * may linger a moment: nothing of MPS may outlive the job. */
    for (int i = 0; i < g->nmps; i++) {
        gs_proc_signal(g->mps[i].pid, g->mps[i].is_pidfd ? g->mps[i].fd : -1, SIGKILL);
    }
    gs_rundir_remove(a->node_dir);
    a->report_len = 0;
    a->report[0] = '\0';
    a->problems = 0;
    gs_agent_report(a, 1,
                    "the node agent died during the job; its guard ended %d rank%s still running "
                    "(%s) and MPS, and removed the node's directories",
                    alive, alive == 1 ? "" : "s", killed ? "SIGTERM, then SIGKILL" : "SIGTERM");
    gs_agent_deliver_report(a);
}

int gs_agent_guard_start(gs_agent_t *a)
{
    int p[2];
    pid_t pid;

    a->guard_fd = -1;
    if (pipe2(p, O_CLOEXEC) != 0) {
        return -errno;
    }
    pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    if (pid == 0) {
        static gs_guard_t g;
        close(p[1]);
        prctl(PR_SET_NAME, "gsrun-guard");
        if (a->o->ready_fd >= 0) {
            close(a->o->ready_fd); /* the leader must see the agent's death */
        }
        if (!follow_agent(a, p[0], &g)) {
            clean_up(a, &g);
            gs_agent_drop_job_dir(a);
        }
        _exit(0);
    }
    close(p[0]);
    a->guard_fd = p[1];
    a->guard_pid = pid;
    return 0;
}

void gs_agent_guard_tell(gs_agent_t *a, const char *what, pid_t pid)
{
    if (a->guard_fd >= 0 && dprintf(a->guard_fd, "%s %d\n", what, (int)pid) < 0) {
        close(a->guard_fd);
        a->guard_fd = -1;
    }
}

void gs_agent_guard_release(gs_agent_t *a)
{
    if (a->guard_fd >= 0) {
        if (write(a->guard_fd, "done\n", 5) < 0) {
            /* the guard is gone already */
        }
        close(a->guard_fd);
        a->guard_fd = -1;
    }
    if (a->guard_pid > 0 && gs_proc_wait(a->guard_pid, 1000, NULL) != 0) {
        gs_proc_stop_child(a->guard_pid, 100, NULL);
    }
    a->guard_pid = 0;
}
