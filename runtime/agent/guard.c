/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/agent/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "runtime/agent/ranks.h"
#include "runtime/gpu/gpu.h"
#include "runtime/gpu/mps.h"
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/files/ledger.h"
#include "runtime/files/rundir.h"
#include "runtime/core/limits.h"

#define GUARD_MAX_RANKS 4096
#define GUARD_MAX_MPS (GS_MAX_GPUS * (GS_MPS_MAX_SERVERS + 1))

typedef struct {
    gs_rank_t ranks[GUARD_MAX_RANKS];
    int nranks;
    gs_rank_t mps[GUARD_MAX_MPS];
    int nmps;
} followed_t;

static void track(gs_rank_t *list, int *n, int max, pid_t pid)
{
    if (*n < max && pid > 1) {
        gs_ranks_follow(&list[(*n)++], pid);
    }
}

/* Reads the agent's lines until "done" (returns 1) or the pipe closes (0).
 * "noreport": the agent has delivered its report and closed the leader's
 * stderr; our copy must go too, or the launcher, which waits for that
 * stream's end, and the agent, which waits for the launcher, wait forever. */
static int follow_agent(int fd, followed_t *f, gs_report_t *report)
{
    char buf[GS_LINE_MAX];
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
            if (strncmp(line, "noreport", 8) == 0) {
                gs_report_close(report);
            }
            if (sscanf(line, "rank %ld", &pid) == 1) {
                track(f->ranks, &f->nranks, GUARD_MAX_RANKS, (pid_t)pid);
            } else if (sscanf(line, "mps %ld", &pid) == 1) {
                track(f->mps, &f->nmps, GUARD_MAX_MPS, (pid_t)pid);
            }
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have);
    }
}

static void clean_up(const gs_guard_cleanup_t *c, followed_t *f)
{
    int alive = 0, killed;

    for (int i = 0; i < f->nranks; i++) {
        alive += gs_proc_alive(f->ranks[i].pid, f->ranks[i].is_pidfd ? f->ranks[i].fd : -1);
    }
    killed = gs_ranks_end(f->ranks, f->nranks, GS_RANKS_TERM_MS);
    /* The daemons die with the agent (parent-death signal); their servers
     * may linger a moment: nothing of MPS may outlive the job. */
    for (int i = 0; i < f->nmps; i++) {
        gs_proc_signal(f->mps[i].pid, f->mps[i].is_pidfd ? f->mps[i].fd : -1, SIGKILL);
    }
    gs_rundir_remove(c->node_dir);
    gs_ledger_tidy(c->node_name); /* the agent's place among the user's jobs */
    gs_report_clear(c->report);
    gs_report_add(c->report, 1,
                  "the node agent died during the job; its guard ended %d rank%s still running "
                  "(%s) and MPS, and removed the node's directories",
                  alive, alive == 1 ? "" : "s", killed ? "SIGTERM, then SIGKILL" : "SIGTERM");
    gs_report_deliver(c->report);
    if (gs_proctree_gone(c->gsrun_pid, c->gsrun_fd)) {
        gs_report_drop_job_dir(c->job_dir, c->node_name); /* nobody else will */
    }
}

int gs_guard_start(gs_guard_t *g, const gs_guard_cleanup_t *c)
{
    int p[2];
    pid_t pid;

    g->fd = -1;
    g->pid = 0;
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
        static followed_t f;
        close(p[1]);
        prctl(PR_SET_NAME, "gsrun-guard");
        if (c->ready_fd >= 0) {
            close(c->ready_fd);
        }
        if (!follow_agent(p[0], &f, c->report)) {
            clean_up(c, &f);
        }
        _exit(0);
    }
    close(p[0]);
    g->fd = p[1];
    g->pid = pid;
    return 0;
}

void gs_guard_tell(gs_guard_t *g, const char *what, pid_t pid)
{
    if (g->fd >= 0 && dprintf(g->fd, "%s %d\n", what, (int)pid) < 0) {
        close(g->fd);
        g->fd = -1;
    }
}

void gs_guard_release(gs_guard_t *g)
{
    if (g->fd >= 0) {
        if (write(g->fd, "done\n", 5) < 0) {
            /* the guard is gone already */
        }
        close(g->fd);
        g->fd = -1;
    }
    if (g->pid > 0 && gs_proc_wait(g->pid, 1000, NULL) != 0) {
        gs_proc_stop_child(g->pid, 100, NULL);
    }
    g->pid = 0;
}

int gs_guard_is(const gs_guard_t *g, pid_t pid)
{
    return g->pid > 0 && g->pid == pid;
}
