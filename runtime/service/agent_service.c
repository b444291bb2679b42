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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/service/service_int.h"
#include "runtime/wire/lease.h"

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

/* The jobs leasing shared server g, "<job>:<clients> ...". */
static void jobs_text(const gs_agent_t *a, int g, char *buf, size_t len)
{
    const gs_service_t *sv = gs_service_const(a);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < sv->nleases && used < len; i++) {
        const gs_agent_lease_t *l = &sv->leases[i];
        int clients = 0;
        for (int e = 0; e < l->n; e++) {
            clients += l->server[e] == g ? l->clients[e] : 0;
        }
        if (clients > 0) {
            int w =
                snprintf(buf + used, len - used, "%s%s:%d", used > 0 ? " " : "", l->job, clients);
            used += w > 0 ? (size_t)w : 0;
        }
    }
}

/* Its part of the status file: a row for each server that serves, with the
 * jobs that lease it; its "ranks" are the jobs' leases; no client of its
 * own is watched. */
static void status(const gs_agent_t *a, gs_status_t *s)
{
    const gs_service_t *sv = gs_service_const(a);
    snprintf(s->shared, sizeof(s->shared), "node");
    s->registered = s->alive = sv->nleases;
    s->nservers = a->plan.nservers;
    for (int g = 0; g < s->nservers; g++) {
        jobs_text(a, g, s->server[g].jobs, sizeof(s->server[g].jobs));
        s->server[g].nclients = -1;
        s->server[g].clients_mib = -1;
    }
}

/* A server's fault its control daemon confirmed: said in its report, and
 * told first to every job that leases the server (a job whose ranks the
 * fault ended is ending now). */
static void fault(gs_agent_t *a, int g, const char *label, const char *uuid, const char *at,
                  const pid_t *hit, int nhit, const char *who)
{
    char line[GS_MPS_HEALTH_PIDS * 12 + 64];
    gs_report_add(&a->report, 1,
                  "%s (%s): the shared MPS server hit a fatal GPU fault at %s; MPS ended every "
                  "client on it: %s",
                  label, uuid, at, who);
    gs_agent_tell_leases(a, g, line, gs_lease_fmt_fault(line, sizeof(line), g, at, hit, nhit));
}

/* A fresh server took g's place: its PIDs and core in the status before
 * the jobs read them at "renew" (else they take the retired daemon's). */
static void renewed(gs_agent_t *a, int g)
{
    char line[64];
    gs_agent_write_status(a);
    gs_agent_tell_leases(a, g, line, gs_lease_fmt_renew(line, sizeof(line), g));
}

/* It has no launcher to wait for: the report goes, the guard is told. */
static gs_agent_state_t failed(gs_agent_t *a)
{
    gs_report_deliver(&a->report);
    gs_guard_tell(&a->guard, "noreport", 0);
    return GS_AGENT_DONE;
}

/* Its GPU listing's NVML call outlived its end (agent_share.c): set before
 * the shared end, read after it. */
static int lister_stuck;

static void before_end(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    lister_stuck = sv->lister_stuck;
}

#define BIT(s) (1u << (s))

const gs_agent_step_t gs_agent_service_states[GS_AGENT_NSTATES] = {
    [GS_AGENT_DISCOVERING] = {BIT(GS_AGENT_STARTING) | BIT(GS_AGENT_DONE), discovering},
    [GS_AGENT_STARTING] = {BIT(GS_AGENT_HOLDING) | BIT(GS_AGENT_FAILED), starting},
    [GS_AGENT_HOLDING] = {BIT(GS_AGENT_STOPPING), holding},
    [GS_AGENT_STOPPING] = {BIT(GS_AGENT_DONE), stopping},
    [GS_AGENT_FAILED] = {BIT(GS_AGENT_DONE), failed},
};

static gs_agent_t *create(void)
{
    gs_service_t *sv = calloc(1, sizeof(*sv));
    return sv != NULL ? &sv->agent : NULL;
}

static void destroy(gs_agent_t *a)
{
    free(gs_service(a));
}

static const gs_agent_program_t service = {
    .states = gs_agent_service_states,
    .comm = GS_AGENT_SHARED_COMM,
    .create = create,
    .destroy = destroy,
    .before_end = before_end,
    .status = status,
    .fault = fault,
    .renewed = renewed,
};

int gs_agent_service_main(const gs_agent_opts_t *o)
{
    int code = gs_agent_run(o, &service);
    if (lister_stuck) {
        /* A thread is still in NVML: exit()'s handlers (NVML's own) could
         * wait for it; the servers are stopped, the dirs gone. */
        fflush(NULL);
        _exit(code);
    }
    return code;
}
