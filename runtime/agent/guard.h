/* SPDX-License-Identifier: BSD-3-Clause */
/* The guard: a child of the node agent that outlives it only to clean up.
 *
 * The agent tells it every process it is responsible for (ranks, MPS
 * daemons and servers) through a pipe, one line each ("rank PID", "mps
 * PID"), "noreport" once the agent has delivered its report, and "done"
 * when it ends normally. If the pipe closes without "done", the agent was
 * killed (SIGKILL, the OOM killer): the guard ends the node's ranks of the
 * job and the MPS processes, removes the node's directories, and delivers a
 * report that says so. The guard inherits the node dir's lock, so gsrun
 * still waits for the cleanup, and the agent's blocked signals, so only
 * SIGKILL stops it. */
#ifndef GS_AGENT_GUARD_H
#define GS_AGENT_GUARD_H

#include <sys/types.h>

#include "runtime/agent/report.h"

typedef struct {
    int fd;    /* pipe to the guard, -1 without one */
    pid_t pid; /* 0 once gone */
} gs_guard_t;

/* What the guard needs to clean up after a killed agent. */
typedef struct {
    const char *node_dir; /* removed */
    const char *job_dir;  /* dropped too unless gsrun, on this node, still runs */
    const char *node_name;
    pid_t gsrun_pid;     /* gsrun on this node, 0 if not here */
    int gsrun_fd;        /* its pidfd, -1 for none */
    int ready_fd;        /* closed in the guard: the leader must see the agent's death */
    gs_report_t *report; /* the guard's copy: cleared, its own lines, delivered */
} gs_guard_cleanup_t;

/* Forks the guard. 0, or -errno (the agent goes on without one). */
int gs_guard_start(gs_guard_t *g, const gs_guard_cleanup_t *c);
/* "rank PID", "mps PID" or "noreport" (pid ignored). */
void gs_guard_tell(gs_guard_t *g, const char *what, pid_t pid);
/* The agent ends normally: the guard exits without doing anything. */
void gs_guard_release(gs_guard_t *g);
/* Whether pid is the guard (reaped: it exited early). */
int gs_guard_is(const gs_guard_t *g, pid_t pid);

#endif
