/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun-agent's command line, one table for both sides: node.c writes it
 * (gs_agentcmd_to_argv), gsrun-agent reads it (gs_agentcmd_parse). The
 * settings travel separately, as GSRUN_* (config.h). */
#ifndef GS_AGENTCMD_H
#define GS_AGENTCMD_H

#include <stddef.h>
#include <sys/types.h>

#include "runtime/core/gs_error.h"

/* The three ways an agent runs (one loop, different paths: agent/agent.c). */
typedef enum {
    GS_MODE_PER_JOB,  /* started by the node's first rank (or a front end) */
    GS_MODE_EARLY,    /* started on mpirun's node with it (by gsrun, or in
                       * mpirun by the Open MPI component), before the ranks */
    GS_MODE_JOB_LONG, /* a whole batch job's (gsrun prolog), until gsrun epilog */
    GS_MODE_SHARED,   /* a user's MPS on a node, leased to the user's jobs' agents
                       * (--mps-share=node), until the last lease and its linger */
} gs_agentcmd_mode_t;

/* The shared agent's process name (a job's agent is "gsrun-agent"). */
#define GS_AGENT_SHARED_COMM "gsrun-share"

/* Where the agent's report goes. */
typedef enum {
    GS_SINK_NOWHERE,   /* nobody to tell (yet: job-long's epilog connection comes later) */
    GS_SINK_FILE,      /* <job dir>/<node>.report, which gsrun reads on this node */
    GS_SINK_LEADER_FD, /* lines on the node leader's stderr (the launcher forwards them) */
    GS_SINK_RANK0,     /* the same on local rank 0's stderr once it has exec'd (a Slurm
                        * task prolog cannot open the task's before) */
    GS_SINK_EPILOG,    /* the whole report on `gsrun epilog`'s connection */
} gs_sink_t;

typedef struct {
    char job_dir[256];
    char node_name[64];
    int local_size;  /* 0 for early and job-long (not known yet, or none) */
    pid_t watch_pid; /* the launcher's process on this node (mpirun or orted) */
    pid_t gsrun_pid; /* gsrun, when it runs on this node; else 0 */
    int ready_fd;    /* "ok"/"error" once (early: "listening" first); -1: none */
    int watch_fd;    /* early: a pipe gsrun holds while mpirun runs; else -1 */
    int report_fd;   /* GS_SINK_LEADER_FD: that stderr; else -1 */
    gs_agentcmd_mode_t mode;
    gs_sink_t report;
    int in_sequence; /* ranks start one after another: answer each at once */
    long long t0_ms; /* wall clock the -vv timeline counts from; 0: the agent's start */
    int ranks_at_most; /* early: the job's rank count as the launcher's arguments give
                        * it (no node has more); 0 unknown */
} gs_agentcmd_t;

void gs_agentcmd_init(gs_agentcmd_t *a);
/* argv[0] = program, then every row of the table; the strings live in buf.
 * 0, or -ENOSPC when buf or argv (max entries) is too small. */
int gs_agentcmd_to_argv(const gs_agentcmd_t *a, const char *program, char *buf, size_t len,
                        char **argv, int max);
/* Reads what gs_agentcmd_to_argv wrote (argv[0] skipped). 0, or -EINVAL
 * with err naming the argument. */
int gs_agentcmd_parse(int argc, char **argv, gs_agentcmd_t *a, gs_error_t *err);

#endif
