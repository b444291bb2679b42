/* SPDX-License-Identifier: BSD-3-Clause */
/* The user's node service (--mps-share=node, `gsrun-share`): a program of
 * gsrun-agent's own, beside the job's agent (agent.c), with its own table
 * of states, run by agent_run.c:
 *
 *   DISCOVERING > STARTING > HOLDING > STOPPING > DONE
 *
 * It lists every GPU of the node (jobs that see others than the one that
 * started it lease by UUID) and keeps NVML started for the listing thread;
 * it starts no server until a job leases one (agent_share.c: its messages,
 * its wait, its leases); a node-wide error goes to FAILED (the report). */
#include "gs_autoconf.h"

#include "runtime/agent/agent.h"

#include <stdio.h>
#include <string.h>

#include "runtime/agent/agent_int.h"

static gs_agent_state_t discovering(gs_agent_t *a)
{
    gs_error_t err;

    if (gs_agent_listen(a, &err) != 0) {
        gs_agent_publish_without_mps(a, GS_STATE_ERROR, 0, GS_EXIT_SETUP, err.text, 0);
        a->code = GS_EXIT_SETUP;
        return GS_AGENT_DONE;
    }
    gs_gpu_hold();
    if (gs_gpu_discover(&a->gpus, &err) != 0) {
        snprintf(a->gpus.reason, sizeof(a->gpus.reason), "%s", err.text);
        a->gpus.count = 0;
    }
    gs_report_mark(&a->report, "gpus found");
    gs_agent_find_control(a);
    return GS_AGENT_STARTING;
}

/* No server until a job leases one (a lease names its GPUs and clients);
 * the state says the socket, or why there is no MPS. */
static gs_agent_state_t starting(gs_agent_t *a)
{
    memset(&a->plan, 0, sizeof(a->plan));
    if (a->gpus.count == 0) {
        snprintf(a->plan.reason, sizeof(a->plan.reason), "no NVIDIA GPU found on this node: %s",
                 a->gpus.reason);
        return gs_agent_fail(a, GS_EXIT_UNAVAILABLE, a->plan.reason, 1);
    }
    if (!a->have_control) {
        return gs_agent_fail(a, GS_EXIT_UNAVAILABLE, a->control_error, 1);
    }
    a->plan.use_mps = 1;
    a->plan.clients_per_server =
        gs_policy_clients_per_server(a->o->cfg.clients_per_server, a->gpus.cuda_version);
    gs_agent_share_open(a);
    gs_agent_publish_on(a);
    gs_agent_write_status(a);
    return GS_AGENT_HOLDING;
}

static gs_agent_state_t holding(gs_agent_t *a)
{
    gs_agent_share_hold(a); /* until the last lease and its linger */
    return GS_AGENT_STOPPING;
}

static gs_agent_state_t stopping(gs_agent_t *a)
{
    gs_agent_share_close(a);
    gs_daemons_stop_from(&a->daemons, 0, NULL, NULL); /* no rank of its own to name */
    return GS_AGENT_DONE;
}

/* It has no launcher to wait for: the report goes, the guard is told. */
static gs_agent_state_t failed(gs_agent_t *a)
{
    gs_report_deliver(&a->report);
    gs_guard_tell(&a->guard, "noreport", 0);
    return GS_AGENT_DONE;
}

#define BIT(s) (1u << (s))

const gs_agent_step_t gs_agent_service_states[GS_AGENT_NSTATES] = {
    [GS_AGENT_DISCOVERING] = {BIT(GS_AGENT_STARTING) | BIT(GS_AGENT_DONE), discovering},
    [GS_AGENT_STARTING] = {BIT(GS_AGENT_HOLDING) | BIT(GS_AGENT_FAILED), starting},
    [GS_AGENT_HOLDING] = {BIT(GS_AGENT_STOPPING), holding},
    [GS_AGENT_STOPPING] = {BIT(GS_AGENT_DONE), stopping},
    [GS_AGENT_FAILED] = {BIT(GS_AGENT_DONE), failed},
};

int gs_agent_service_main(const gs_agent_opts_t *o)
{
    return gs_agent_run(o, gs_agent_service_states, GS_AGENT_SHARED_COMM, NULL);
}
