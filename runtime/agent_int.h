/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's parts (internal to runtime/): one file per job.
 *
 *   agent.c          the agent's life: lock, plan, start, publish, serve, end
 *   agent_mps.c      MPS per GPU: start every daemon, stop them, watch them
 *   agent_ranks.c    the ranks: registration, tracking, ending the leftovers
 *   agent_guard.c    the guard: a child that ends the node's share of the job
 *                    if the agent itself is killed
 *   agent_early.c    the early start on gsrun's node, before mpirun's ranks
 *   agent_place.c    placement: which GPU each rank gets, daemon cores clear
 *                    of the ranks' cores
 *   agent_report.c   the report: collected during the job, delivered to gsrun,
 *                    and the status file `gsrun status` reads */
#ifndef GS_AGENT_INT_H
#define GS_AGENT_INT_H

#include <sched.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent.h"
#include "gs_error.h"
#include "gpu.h"
#include "mps.h"
#include "policy.h"
#include "state.h"

/* How long ranks get to exit after SIGTERM before SIGKILL, when the agent
 * ends them (the launcher or the agent died): the whole teardown of a node
 * must fit in 2 s. */
#define GS_AGENT_RANK_TERM_MS 1000

typedef struct {
    int fd; /* pidfd, or the rank's connection */
    int is_pidfd;
    int conn; /* the registration, while its answer waits for placement; else -1 */
    pid_t pid;
    int rank;
} gs_rank_t;

typedef struct {
    const gs_agent_opts_t *o;
    char node_dir[256];
    char control[4096];
    gs_plan_t plan;
    gs_gpu_list_t gpus;
    int discovered;       /* gpus, control and have_control are set */
    int have_control;
    char control_error[GS_ERROR_LEN];
    int prestart;         /* start each daemon's server before any rank (GSRUN_MPS_PRESTART) */
    int early_rc;         /* started early (by gsrun): MPS's start failed with early_err */
    gs_error_t early_err;
    char sock[256];       /* the registration socket's path */
    long long early_ready_ms; /* early: when MPS was up (monotonic), 0 if not started */
    long long size_ms;        /* early: when the node's first rank came */
    int stop_from;            /* early: daemons from this GPU on are not in the plan;
                               * stopped once the ranks have registered, -1: none */
    gs_mps_daemon_t daemon[GS_MAX_GPUS];
    char pinned[GS_MAX_GPUS][96];
    cpu_set_t daemon_cpus[GS_MAX_GPUS];
    int ndaemons;
    /* Placement: the GPUs ranks are given (the plan's under MPS; all
     * visible ones, one rank each, without), how many each takes, and each
     * local rank's CPUs and GPU (-1 until placed). */
    int place_n;
    int place_target[GS_MAX_GPUS];
    int by_locality;      /* answers wait until every rank's CPUs are known */
    int placed;           /* the ranks that registered so far have GPUs */
    long long place_deadline;
    int *rank_gpu;
    cpu_set_t *rank_cpus;
    unsigned char *rank_known; /* rank_cpus[r] holds rank r's CPUs */
    long long started_ms; /* wall clock, for `gsrun status` */
    long long t0_ms;      /* wall clock the timeline counts from (GSRUN_T0) */
    char timeline[512];   /* "agent 612, gpus 620, ...": -vv shows it */
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
/* With o->report_rank0: tries to open local rank 0's stderr as the report's
 * way out (possible once it has exec'd). Returns the poll timeout (ms) the
 * agent should use to try again, or -1 when done trying. */
int gs_agent_report_fd_try(gs_agent_t *a);

/* agent.c: removes the job dir when nobody else will (gsrun does not run on
 * this node, or is gone): the agent's and the guard's last step. */
void gs_agent_drop_job_dir(const gs_agent_t *a);
/* agent.c: finds the GPUs (NVML, CUDA_VISIBLE_DEVICES) and the control
 * program. */
void gs_agent_discover(gs_agent_t *a);
/* agent.c: the node's plan for o->local_size ranks (discovering first if
 * needed). Returns 0, or the exit code of a node-wide error (published). */
int gs_agent_plan(gs_agent_t *a);

/* agent_early.c: the agent gsrun starts on its own node before mpirun:
 * listens, discovers, starts MPS on the visible GPUs while mpirun launches,
 * then waits for the node's first rank to say how many ranks the node has,
 * and plans (stopping the daemons the plan does not use). Returns 0, a
 * node-wide exit code (published), or GS_AGENT_NO_RANKS when the launcher
 * ended first. */
#define GS_AGENT_NO_RANKS (-1)
int gs_agent_early_start(gs_agent_t *a);

/* agent_job.c: the agent `gsrun prolog` starts for a whole batch job: MPS
 * on every visible GPU, published for `gsrun task-prolog`, until `gsrun
 * epilog` (a "stop" on the socket) or a signal. Returns 0 or the node-wide
 * exit code (published). */
int gs_agent_job_main(gs_agent_t *a);
/* agent.c: publishing the node state. */
void gs_agent_publish_on(gs_agent_t *a, const char *sock);
void gs_agent_publish_without_mps(gs_agent_t *a, gs_state_kind_t kind, int notice, int code,
                                  const char *msg, const char *sock);

/* agent_mps.c: starts MPS on the first n GPUs (those not running yet);
 * on failure stops every daemon. */
int gs_agent_start_mps(gs_agent_t *a, int n, gs_error_t *err);
void gs_agent_stop_mps(gs_agent_t *a);
/* start_server on the first n daemons (started without); on failure stops
 * every daemon. */
int gs_agent_start_servers(gs_agent_t *a, int n, gs_error_t *err);
/* Stops the daemons of GPUs first and above (the plan does not use them). */
void gs_agent_stop_mps_from(gs_agent_t *a, int first);
void gs_agent_note_child_exits(gs_agent_t *a);

/* agent_ranks.c */
/* Listens on <node dir>/agent.sock (path in a->sock). */
int gs_agent_listen(gs_agent_t *a, gs_error_t *err);
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

/* agent_place.c */
/* Sets up placement from the plan, MPS on or not, before the node state is
 * published; 0 or -ENOMEM. */
int gs_agent_place_init(gs_agent_t *a, int mps_on);
/* A rank registered with its CPUs (NULL: unknown): answers it now, or
 * holds the answer until every rank has come (by_locality). */
void gs_agent_place_rank(gs_agent_t *a, gs_rank_t *r, const cpu_set_t *cpus);
/* Places and answers the held ranks: every rank came, or the deadline
 * passed. Then moves daemons off the ranks' cores when it can. */
void gs_agent_place_flush(gs_agent_t *a);
void gs_agent_place_free(gs_agent_t *a);
/* The local ranks given GPU g so far, as "0-3" or "0,2,4". */
void gs_agent_place_ranks_text(const gs_agent_t *a, int g, char *buf, size_t len);

/* agent_report.c: notes that a step was reached now, for the timeline. */
void gs_agent_mark(gs_agent_t *a, const char *step);

/* agent_report.c: `gsrun status` reads this file in the node dir. */
void gs_agent_write_status(const gs_agent_t *a);

/* agent_guard.c */
int gs_agent_guard_start(gs_agent_t *a);
void gs_agent_guard_tell(gs_agent_t *a, const char *what, pid_t pid);
/* The agent is ending normally: the guard exits without doing anything. */
void gs_agent_guard_release(gs_agent_t *a);

#endif
