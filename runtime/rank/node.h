/* SPDX-License-Identifier: BSD-3-Clause */
/* The rank side of the node rendezvous, shared by every front end.
 *
 * Each rank of a node calls gs_node_join. The node leader (local rank 0)
 * starts the node agent; every rank then waits for the agent's state file
 * (inotify, bounded by --mps-timeout: no sleeps), and, when MPS is on,
 * registers with the agent so that it is tracked until it exits. */
#ifndef GS_NODE_H
#define GS_NODE_H

#include <stdio.h>
#include <sys/types.h>

#include "runtime/core/config.h"
#include "runtime/core/gs_error.h"
#include "runtime/files/state.h"

typedef struct {
    const gs_config_t *cfg;
    const char *job_dir;    /* gsrun's job dir (GSRUN_JOB_DIR) */
    const char *gsrun_node; /* gs_node_id() of gsrun's node (GSRUN_NODE_ID), or NULL */
    const char *agent_path; /* the gsrun-agent executable (node leader only) */
    int local_rank;
    int local_size;
    pid_t launcher_pid;     /* the process that started this rank */
    pid_t gsrun_pid;        /* 0 if unknown */
    char *const *agent_env; /* "NAME=VALUE" set for the agent on top of ours
                             * (the job's environment), or NULL */
    int early;              /* set by gs_node_start_early: the agent starts early, */
    int early_watch_fd;     /* watching this pipe */
    int in_sequence;        /* the launcher starts each rank only once the one
                             * before has exec'd (ORTE's rtc set): the agent must
                             * answer each rank at once, so it places in blocks */
    int for_parent;         /* the rank is this process's parent, which runs the
                             * program once we exit (a Slurm task prolog) */
    int job_long;           /* the agent serves a whole batch job (gsrun prolog) */
    int report_rank0;       /* our stderr is not the rank's: the agent reports to
                             * local rank 0's once it can open it */
    int early_agent;        /* gsrun started this node's agent early (GSRUN_EARLY_AGENT):
                             * the leader only tells it the node's size */
    long long t0_ms;        /* wall clock the agent's -vv timeline counts from
                             * (GSRUN_T0: gsrun's start), 0: the agent's own */
    int ranks_at_most;      /* early: the job's rank count from the launcher's
                             * arguments (no node has more), 0 unknown */
} gs_node_req_t;

/* Names this node (this kernel and PID namespace) so that processes can tell
 * whether they run where gsrun runs: "<boot id>/<PID namespace>". */
void gs_node_id(char *buf, size_t len);

/* Where this node keeps the job's run dir: gsrun's own job dir on gsrun's
 * node; on any other node a directory of the same name in this node's
 * TMPDIR (nothing is shared between nodes). Sets *here. */
int gs_node_job_dir(const gs_node_req_t *req, char *out, size_t len, int *here, gs_error_t *err);

/* Starts this node's agent (req->agent_path) for a launcher that provisions
 * the node itself before its ranks exist (the Open MPI component), and waits
 * for its state, as gs_node_join does without registering a rank. */
int gs_node_start(const gs_node_req_t *req, gs_state_t *st, gs_error_t *err);

/* On mpirun's node, before the job's ranks (gsrun before it starts mpirun,
 * the Open MPI component in mpirun): makes the node dir and starts the agent
 * early (it finds the GPUs and starts MPS while mpirun launches). Returns
 * once the agent listens, with *launcher_fd the end of a pipe the caller
 * holds while mpirun runs (close-on-exec; its closing tells the agent that
 * the launcher is gone). The node's first rank then only tells the agent
 * the node's size (req->early_agent). The agent is the caller's child. It
 * is waited for as long as a rank waits for its agent (the timeout plus
 * 10 s); one that exits first, or stays silent that long (then ended), is
 * waited for with its guard before this returns the error, so a failure
 * may take about twice that: the node's first rank may then start its own. */
int gs_node_start_early(const gs_node_req_t *req, int *launcher_fd, gs_error_t *err);

/* Joins the node: with req->agent_path (the node leader) starts the agent
 * first, or tells the one gsrun started how many ranks the node has. On success st holds the node
 * state (on, off); an error state is returned as a failure with st->exit_code and the message in
 * err. *gpu is the GPU the agent gave this rank (an index into st's, -1: none). *keep_fd is a
 * descriptor the rank must keep open across exec (or -1). */
int gs_node_join(const gs_node_req_t *req, gs_state_t *st, int *gpu, int *keep_fd, gs_error_t *err);

/* The directory of this node inside a job dir. */
int gs_node_dir(const char *job_dir, char *out, size_t len, gs_error_t *err);

/* The node leader's lines for the user: MPS off and why (when that is news
 * or verbose), or with verbose each GPU's ranks and share. */
void gs_node_print_plan(FILE *f, const char *node, const gs_state_t *st, const char *source,
                        int verbose);

#endif
