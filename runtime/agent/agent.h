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

#include "runtime/wire/agentcmd.h"
#include "runtime/core/config.h"

typedef struct {
    gs_config_t cfg;    /* the GSRUN_* settings */
    gs_agentcmd_t args; /* its command line (agentcmd.h) */
} gs_agent_opts_t;

/* Runs a job's agent to the end; returns its exit status. */
int gs_agent_main(const gs_agent_opts_t *o);
/* Runs the user's node service (GS_MODE_SHARED, --mps-share=node: the
 * servers the user's jobs on the node lease) to the end; its exit status. */
int gs_agent_service_main(const gs_agent_opts_t *o);

#endif
