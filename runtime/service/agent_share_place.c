/* SPDX-License-Identifier: BSD-3-Clause */
/* --mps-share=node, the shared agent: where a lease's clients go. Each
 * entry of a lease takes the fullest server on its GPU with room, else a
 * new server, started without the loop waiting for it: one start at a
 * time, looked at every SHARE_START_LOOK_MS. A lease whose server starts
 * is answered once it serves; every other lease, and every "gpus", is
 * answered meanwhile: waiting out a start in the loop would hold every job
 * of the user for it (17-45 ms for the socket on an H100, and up to
 * --mps-timeout for a daemon that hangs before it). */
#include "gs_autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/service/service_int.h"
#include "runtime/core/proc.h"
#include "runtime/wire/lease.h"

/* How often a start under way is looked at (its socket comes 17-45 ms
 * after the spawn on an H100: every ms of it on the way to MPS ready). */
#define SHARE_START_LOOK_MS 2
/* When a new server's PIDs are asked for: the control daemon answers no
 * command while its new server sets up its GPU context (get_server_list
 * took 257 ms then on an H100, 2 ms after). The lease that started it is
 * answered at once, and every other lease meanwhile, not after that
 * silence. */
#define SHARE_CONFIRM_MS 500

int gs_agent_share_gpu_by_uuid(const gs_agent_t *a, const char *uuid)
{
    for (int g = 0; g < a->gpus.count; g++) {
        if (strcmp(a->gpus.gpu[g].uuid, uuid) == 0) {
            return g;
        }
    }
    return -1;
}

/* A server on GPU g with room for n more clients: the fullest that fits
 * (servers on one GPU time-slice: the fewer in use, the better), or -1. A
 * server still starting is not one yet. */
static int fit(const gs_agent_t *a, int g, int n)
{
    const gs_service_t *sv = gs_service_const(a);
    int best = -1, limit = a->plan.clients_per_server;
    for (int s = 0; s < a->daemons.n; s++) {
        if (s != sv->share_starting && a->daemons.gpu_of[s] == g && !sv->share_shun[s] &&
            a->daemons.daemon[s].daemon_pid > 0 && sv->leased[s] + n <= limit &&
            (best < 0 || sv->leased[s] > sv->leased[best])) {
            best = s;
        }
    }
    return best;
}

/* Begins one more server on GPU g: its index, or -1 with err. */
static int begin_server(gs_agent_t *a, int g, gs_error_t *err)
{
    gs_service_t *sv = gs_service(a);
    gs_daemons_t *ds = &a->daemons;
    int e = ds->n, k = 0;
    if (e >= GS_MAX_GPUS) {
        gs_error_set(err, ENOSPC, "the node's shared MPS runs %d servers, the most it can", e);
        return -1;
    }
    for (int o = 0; o < e; o++) {
        k += ds->gpu_of[o] == g;
    }
    a->servers.gpu[e] = a->gpus.gpu[g];
    a->servers.count = e + 1;
    gs_daemons_set_server(ds, e, g, k, k + 1);
    a->plan.server[e] = (gs_server_share_t){.gpu = g, .server = k, .gpu_servers = k + 1};
    gs_agent_count_servers(a, e + 1);
    if (gs_daemons_begin(ds, &a->servers, err) != 0) {
        a->servers.count = e;
        gs_agent_count_servers(a, e);
        return -1;
    }
    sv->share_starting = e;
    sv->share_start_deadline = gs_proc_now_ms() + (long long)a->o->cfg.timeout_s * 1000;
    return e;
}

/* Server e serves: published, a row of `gsrun status` (the plan's servers). */
static void server_ready(gs_agent_t *a, int e)
{
    gs_service_t *sv = gs_service(a);
    a->plan.nservers = a->plan.nused = e + 1;
    sv->share_confirm_ms[e] = gs_proc_now_ms() + SHARE_CONFIRM_MS;
    sv->share_answered_ms[e] = gs_proc_now_ms();
    gs_agent_publish_on(a);
}

void gs_agent_share_end(gs_agent_t *a, int i, int linger_ms)
{
    gs_service_t *sv = gs_service(a);
    gs_agent_lease_t *l = &sv->leases[i];
    for (int e = 0; e < l->n; e++) {
        sv->leased[l->server[e]] -= l->clients[e];
    }
    close(l->fd);
    *l = sv->leases[--sv->nleases];
    if (sv->nleases == 0) {
        sv->idle_since = gs_proc_now_ms();
        sv->linger_ms = linger_ms;
    }
}

void gs_agent_share_refuse(gs_agent_t *a, int i, const char *why)
{
    gs_service_t *sv = gs_service(a);
    gs_agent_lease_t *l = &sv->leases[i];
    gs_report_add(&a->report, 1, "job %s: %s", l->job, why);
    char line[GS_LINE_MAX];
    int n = gs_lease_fmt_refusal(line, sizeof(line), why);
    if (n > 0 && write(l->fd, line, (size_t)n) < 0) {
        /* Its agent is gone already. */
    }
    /* Serving no one after a refusal (a start that failed: a bad control
     * program, a broken GPU): it goes now, and the user's next job starts
     * one with its own settings. */
    gs_agent_share_end(a, i, 0);
}

/* Places lease l's entries from l->n on: 1 once all are placed (answered),
 * 0 while one waits for a server's start, -1 with err (refused). */
static int advance(gs_agent_t *a, gs_agent_lease_t *l, gs_error_t *err)
{
    gs_service_t *sv = gs_service(a);
    char line[GS_LINE_MAX];
    while (l->n < l->want_n) {
        int e = l->n, s;
        if (l->starting >= 0) {
            if (l->starting == sv->share_starting) {
                return 0;
            }
            s = l->starting; /* begun for this entry: it serves now */
            l->starting = -1;
        } else if ((s = fit(a, l->want_gpu[e], l->want_clients[e])) < 0) {
            if (sv->share_starting >= 0) {
                return 0; /* one start at a time */
            }
            if ((s = begin_server(a, l->want_gpu[e], err)) < 0) {
                return -1;
            }
            l->starting = s;
            return 0;
        } else if (!gs_agent_share_sound(a, s, 0, 0, l->wedged, sizeof(l->wedged))) {
            continue; /* dead or wedged, and no fresh one in its place: placed anew */
        }
        l->server[e] = s;
        l->clients[e] = l->want_clients[e];
        sv->leased[s] += l->clients[e];
        l->n++;
    }
    l->waiting = 0;
    gs_report_add(&a->report, 0, "job %s (agent %d) leased %d server%s", l->job, (int)l->pid, l->n,
                  l->n == 1 ? "" : "s");
    int n = gs_lease_fmt_leased(line, sizeof(line), l->n, l->server);
    if (n < 0 || write(l->fd, line, (size_t)n) < 0) {
        /* Its agent is gone: the lease ends at the next wake-up (the hang-up). */
    }
    if (l->wedged[0] != '\0' && /* after the answer: the job tells it during its run */
        (n = gs_lease_fmt_wedged_told(line, sizeof(line), l->wedged)) > 0 &&
        write(l->fd, line, (size_t)n) < 0) {
        /* The same. */
    }
    return 1;
}

void gs_agent_share_place(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    gs_error_t err;
    int changed = 0;
    for (int i = 0; i < sv->nleases;) {
        gs_agent_lease_t *l = &sv->leases[i];
        int rc = l->waiting ? advance(a, l, &err) : 0;
        changed |= rc != 0;
        if (rc < 0) {
            gs_agent_share_refuse(a, i, err.text); /* the last lease moves into slot i */
            continue;
        }
        i++;
    }
    if (changed) {
        gs_agent_write_status(a);
    }
}

void gs_agent_share_starting(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    gs_error_t err;
    int e = sv->share_starting;
    if (e < 0) {
        return;
    }
    int rc = gs_daemons_begun(&a->daemons, sv->share_start_deadline, &err);
    if (rc == 1) {
        return;
    }
    sv->share_starting = -1;
    if (rc == 0) {
        server_ready(a, e);
    } else {
        a->servers.count = e;
        gs_agent_count_servers(a, e);
        for (int i = 0; i < sv->nleases;) {
            if (sv->leases[i].starting == e) {
                gs_agent_share_refuse(a, i, err.text);
                continue;
            }
            i++;
        }
    }
    gs_agent_share_place(a);
}

int gs_agent_share_start_ms(const gs_agent_t *a)
{
    const gs_service_t *sv = gs_service_const(a);
    return sv->share_starting >= 0 ? SHARE_START_LOOK_MS : -1;
}
