/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank's side of the node for every front end: join the node and compute
 * the rank's environment (gsrun-shim, the Open MPI component, the SPANK
 * plugin, the Slurm task prolog), plus what the Slurm front ends share: the
 * run dir a job step uses on each node, and the wait for an agent's end. */
#ifndef GS_TASK_H
#define GS_TASK_H

#include <stddef.h>
#include <sys/types.h>

#include "runtime/rank/clientenv.h"
#include "runtime/core/gs_error.h"
#include "runtime/rank/node.h"
#include "runtime/files/state.h"

/* Joins the node (gs_node_join: st gets the node state) and builds this
 * rank's environment. On failure returns the exit code for this rank, sets
 * *node_wide when the whole node failed (its leader reports that once),
 * and err. */
int gs_task_join(const gs_node_req_t *req, gs_state_t *st, gs_clientenv_t *env, int *keep_fd,
                 int *node_wide, gs_error_t *err);

/* A rank of a job gsrun started, as its front end found it (gsrun-shim
 * under mpirun, gsrun-srun-task under srun). */
typedef struct {
    const gs_config_t *cfg;
    const char *job_dir;  /* gsrun's job dir (GSRUN_JOB_DIR) */
    int local_rank;
    int local_size;
    pid_t launcher_pid;   /* the process whose end is the launcher's */
    int for_parent;       /* registers the caller's parent (a task prolog) */
    int report_rank0;     /* the agent reports on local rank 0's stderr */
    const char *program;  /* what the rank execs (its default share), NULL: unknown */
} gs_task_rank_t;

/* The spine every rank-side front end shares: the node leader finds
 * gsrun-agent, the rank's request is made from gsrun's GSRUN_* variables
 * (its node, PID, early agent, timeline clock), and the rank joins
 * (gs_task_join). Returns 0 or the rank's exit code, with *node_wide and
 * err as gs_task_join's. */
int gs_task_run_rank(const gs_task_rank_t *rank, gs_state_t *st, gs_clientenv_t *env,
                     int *keep_fd, int *node_wide, gs_error_t *err);

/* The name of a Slurm job step's dir on a node, "slurm-<job>.<step>" (the
 * decimal ids); root makes it for the step's user in its own base (see
 * gs_provision_make_dir), so no user can take the guessable name first. */
int gs_task_step_name(unsigned long job, unsigned long step, char *out, size_t len);

/* Waits, bounded, until the agent of node_dir has finished (it holds an
 * exclusive lock on the dir until it has cleaned up and reported). Polled
 * every 5 ms: a launcher's daemon must not be disturbed by an alarm. Returns
 * at once (-EAGAIN) where the node's state is an error: that agent ends
 * only once the launcher calling this is gone. 0: the agent is done (or
 * there is none); -ETIMEDOUT: it still runs. */
int gs_task_wait_agent(const char *node_dir, int timeout_ms);

#endif
