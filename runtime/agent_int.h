/* The node agent's parts (internal to runtime/): one file per job.
 *
 *   agent.c          the agent's life: lock, plan, start, publish, serve, end
 *   agent_mps.c      MPS per GPU: start every daemon, stop them, watch them
 *   agent_ranks.c    the ranks: registration, tracking, ending the leftovers
 *   agent_guard.c    the guard: a child that ends the node's share of the job
 *                    if the agent itself is killed
 *   agent_report.c   the report: collected during the job, delivered to gsrun */
#ifndef GS_AGENT_INT_H
#define GS_AGENT_INT_H

#include <sys/types.h>

#include "agent.h"
#include "gpu.h"
#include "mps.h"
#include "policy.h"

/* How long ranks get to exit after SIGTERM before SIGKILL, when the agent
 * ends them (the launcher or the agent died): the whole teardown of a node
 * must fit in 2 s. */
#define GS_AGENT_RANK_TERM_MS 1000

typedef struct {
    int fd; /* pidfd, or the rank's connection */
    int is_pidfd;
    pid_t pid;
    int rank;
} gs_rank_t;

typedef struct {
    const gs_agent_opts_t *o;
    char node_dir[256];
    char control[4096];
    gs_plan_t plan;
    gs_gpu_list_t gpus;
    gs_mps_daemon_t daemon[GS_MAX_GPUS];
    char pinned[GS_MAX_GPUS][96];
    int ndaemons;
    int listen_fd;
    int sig_fd;
    int watch_fd;    /* pidfd of the launcher on this node */
    int gsrun_fd;    /* pidfd of gsrun, when it runs on this node: is it still there
                      * at the end? (gsrun's death itself reaches the agent as its
                      * mpirun's: mpirun dies with gsrun) */
    int guard_fd;    /* pipe to the guard, -1 without one */
    pid_t guard_pid;
    gs_rank_t *ranks; /* live ranks */
    gs_rank_t *seen;  /* every registration, for naming ranks in MPS's log */
    int nranks;
    int registered;
    char report[16384];
    size_t report_len;
    int problems;
} gs_agent_t;

/* agent_report.c */
void gs_agent_report(gs_agent_t *a, int problem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int gs_agent_rank_of_pid(const gs_agent_t *a, pid_t pid);
/* Hands the report to gsrun: a file in the job dir that gsrun reads when it
 * runs on this node, otherwise lines written to the node leader's stderr
 * (forwarded by the launcher like the job's own output), filtered as gsrun
 * filters: everything with -v, else the problems. Closes the report fd. */
void gs_agent_deliver_report(const gs_agent_t *a);

/* agent.c: removes the job dir when nobody else will (gsrun does not run on
 * this node, or is gone): the agent's and the guard's last step. */
void gs_agent_drop_job_dir(const gs_agent_t *a);

/* agent_mps.c */
int gs_agent_start_mps(gs_agent_t *a, gs_error_t *err);
void gs_agent_stop_mps(gs_agent_t *a);
void gs_agent_note_child_exits(gs_agent_t *a);

/* agent_ranks.c */
int gs_agent_listen(gs_agent_t *a, char *path, size_t len, gs_error_t *err);
/* Reads the signalfd: SIGCHLD is a child of ours (an MPS daemon, the guard)
 * and is noted; anything else tells the agent to stop (returns why). */
const char *gs_agent_read_signals(gs_agent_t *a);
/* Serves registrations until every rank has exited, the launcher is gone,
 * or the agent is told to stop; in the last cases ends the ranks
 * still alive (SIGTERM, bounded wait, SIGKILL, through their pidfds). */
void gs_agent_serve(gs_agent_t *a);
/* Ends the given ranks: SIGTERM, up to term_ms for them to exit, SIGKILL.
 * Returns how many needed SIGKILL. */
int gs_agent_end_ranks(gs_rank_t *ranks, int n, int term_ms);

/* agent_guard.c */
int gs_agent_guard_start(gs_agent_t *a);
void gs_agent_guard_tell(gs_agent_t *a, const char *what, pid_t pid);
/* The agent is ending normally: the guard exits without doing anything. */
void gs_agent_guard_release(gs_agent_t *a);

#endif
