/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent: one per node per job, a daemon of the job's user.
 *
 * It plans the node (GPUs, shares), starts one MPS control daemon per GPU in
 * use, publishes the node state, registers each rank and tracks it (a pidfd,
 * or a socket the rank keeps across exec), and when the last rank is gone,
 * or the launcher is, or it is told to stop, ends the ranks still
 * alive, shuts MPS down with bounded waits, removes its directories and
 * hands its report to gsrun. A guard process ends the same if the agent
 * itself is killed. Its messages: protocol.h. Internals: agent_int.h. */
#ifndef GS_AGENT_AGENT_H
#define GS_AGENT_AGENT_H

#include <sys/types.h>

#include "config.h"

typedef struct {
    gs_config_t cfg;
    char job_dir[256];
    char node_name[64];
    int local_size;
    pid_t watch_pid; /* the launcher's process on this node (mpirun or orted) */
    pid_t gsrun_pid; /* the gsrun front end, 0 if not on this node */
    int ready_fd;    /* written once: "ok" or "error", then closed; -1 for none */
    int report_fd;   /* where the report goes when gsrun is not on this node (the
                      * node leader's stderr), -1 for none */
    int in_sequence; /* ranks start one after another: answer each at once */
    int early;       /* started by gsrun before mpirun (local_size 0 until the
                      * node's first rank tells it) */
    int watch_fd;    /* early: a pipe whose other end gsrun holds while mpirun
                      * runs (its hang-up is the launcher's end); else -1 */
    int report_rank0; /* no report fd yet: once local rank 0 has exec'd, its stderr
                       * (a Slurm task prolog as an ordinary user cannot open the
                       * task's stderr before: the task is not dumpable yet) */
    int job_long;    /* provisioned for a whole batch job (gsrun prolog): MPS on
                      * every visible GPU until told to stop (gsrun epilog) */
} gs_agent_opts_t;

/* Runs the agent to the end; returns its exit status. */
int gs_agent_main(const gs_agent_opts_t *o);

#endif
