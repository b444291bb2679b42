/* SPDX-License-Identifier: BSD-3-Clause */
/* What the agent tells others: the node state the ranks wait for (state.c's
 * file; "ok"/"error" on the ready pipe), the status `gsrun status` reads,
 * both made from the parts' state; each program adds its own part through
 * its hooks. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/agent/agent_int.h"
#include "runtime/core/proctree.h"
#include "runtime/files/status.h"

void gs_agent_signal_ready(gs_agent_t *a, const char *word)
{
    if (a->ready_fd >= 0) {
        if (write(a->ready_fd, word, strlen(word)) < 0) {
            /* The leader is gone; the state file still tells the others. */
        }
        close(a->ready_fd);
        a->ready_fd = -1;
    }
}

/* Writes st (NULL: out of memory, said as such) and frees it. */
static void publish(gs_agent_t *a, gs_state_t *st, const char *word)
{
    gs_error_t err;
    if (st != NULL) {
        if (a->prog->state != NULL) {
            a->prog->state(a, st);
        }
        st->generation = a->nstates++;
    }
    if (st == NULL) {
        gs_report_add(&a->report, 1, "out of memory for the node state");
    } else if (gs_state_write(a->node_dir, st, &err) != 0) {
        gs_report_add(&a->report, 1, "%s", err.text);
    }
    free(st);
    gs_agent_signal_ready(a, word);
}

/* Without MPS: off (with or without a notice the node leader prints; the
 * ranks still register through the socket) or an error (exit code for the
 * ranks). The report keeps the message for -v. */
void gs_agent_publish_without_mps(gs_agent_t *a, gs_state_kind_t kind, int notice, int code,
                                  const char *msg, int with_socket)
{
    gs_state_t *st = calloc(1, sizeof(*st));
    const char *word = kind == GS_STATE_ERROR ? "error\n" : "ok\n";
    /* A notice is printed by the node's first rank as the job starts:
     * the report (-v) would say it a second time. */
    if (kind != GS_STATE_OFF || !notice) {
        gs_report_add(&a->report, 0, "%s%s", kind == GS_STATE_OFF ? "MPS off: " : "", msg);
    }
    if (st == NULL) {
        publish(a, NULL, word);
        return;
    }
    st->kind = kind;
    st->notice = notice;
    st->exit_code = code;
    snprintf(st->message, sizeof(st->message), "%s", msg);
    snprintf(st->socket, sizeof(st->socket), "%s", with_socket ? a->sock : "");
    publish(a, st, word); /* a job's GPUs without MPS: its state hook */
}

void gs_agent_explain_no_gpu(gs_agent_t *a, gs_error_t *err)
{
    if (a->gpus.count == 0 && a->gpus.beyond > 0) {
        /* Not a node without GPUs: the GPUs asked for are past the limit. */
        char *why = err != NULL ? err->text : a->plan.reason;
        size_t n = strlen(why), len = err != NULL ? sizeof(err->text) : sizeof(a->plan.reason);
        snprintf(why + n, len - n, " (%s)", a->gpus.reason);
    }
}

void gs_agent_publish_on(gs_agent_t *a)
{
    gs_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        publish(a, NULL, "ok\n");
        return;
    }
    st->kind = GS_STATE_ON;
    snprintf(st->socket, sizeof(st->socket), "%s", a->sock);
    if (a->warning[0] != '\0') {
        st->notice = 1;
        snprintf(st->message, sizeof(st->message), "%s", a->warning);
    }
    st->mem_limit_mb = a->o->cfg.mem_limit_mb;
    gs_state_from_plan(st, &a->plan);
    for (int g = 0; g < a->plan.nservers; g++) {
        const gs_mps_daemon_t *d = &a->daemons.daemon[g];
        gs_state_server_t *sg = &st->server[g];
        snprintf(sg->uuid, sizeof(sg->uuid), "%s", d->uuid);
        snprintf(sg->pipe_dir, sizeof(sg->pipe_dir), "%s", d->pipe_dir);
        snprintf(sg->log_dir, sizeof(sg->log_dir), "%s", d->log_dir);
    }
    publish(a, st, "ok\n");
}

/* The ranks are on their way (or, job-long, the tasks may come; or the
 * node service's new server has set up): record the servers (for teardown
 * and the guard) and report the daemon. */
void gs_agent_confirm_server(gs_agent_t *a, int g, const char *whose)
{
    gs_mps_daemon_t *d = &a->daemons.daemon[g];
    char who[48];
    gs_daemons_label(&a->daemons, g, who, sizeof(who));
    if (a->o->cfg.prestart) {
        gs_daemons_record_servers(&a->daemons, g);
    }
    gs_report_add(&a->report, 0,
                  "%s (%s, %s): MPS control daemon %d on %s, server %d, for %s, ready in %lld ms",
                  who, a->servers.gpu[g].name, d->uuid, (int)d->daemon_pid, a->daemons.pinned[g],
                  (int)d->server_pid[0], whose, d->ready_ms - d->start_ms);
}

void gs_agent_count_servers(gs_agent_t *a, int n)
{
    gs_daemons_t *ds = &a->daemons;
    for (int e = 0; e < n && e < GS_MAX_GPUS; e++) {
        int k = 0;
        for (int o = 0; o < n; o++) {
            k += ds->gpu_of[o] == ds->gpu_of[e];
        }
        ds->servers_on[e] = k;
        a->plan.server[e].gpu_servers = k;
    }
}

void gs_agent_confirm_servers_from(gs_agent_t *a, int first)
{
    for (int g = first; g < a->plan.nservers; g++) {
        gs_agent_confirm_server(a, g,
                                first > 0 ? "the job's tasks (added for a step)" : "the job's tasks");
    }
}

int gs_agent_server_entry(const gs_agent_t *a, int pid)
{
    long long parent = -2;
    for (int e = 0; e < a->daemons.n && e < GS_MAX_GPUS && pid > 1; e++) {
        const gs_mps_daemon_t *d = &a->daemons.daemon[e];
        for (int i = 0; i < d->nservers && i < GS_MPS_MAX_SERVERS; i++) {
            if (d->server_pid[i] == pid) {
                return e;
            }
        }
        parent = parent == -2 ? gs_proctree_stat_field(pid, 4) : parent;
        if (d->daemon_pid > 1 && parent == d->daemon_pid) {
            return e;
        }
    }
    return -1;
}

int gs_agent_servers_memory(gs_agent_t *a, const gs_gpu_list_t *l)
{
    long long mib[GS_MAX_GPUS];
    int changed = 0;
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        mib[e] = -1;
    }
    for (int g = 0; l != NULL && g < l->count; g++) {
        const gs_gpu_t *d = &l->gpu[g];
        for (int i = 0; i < d->nprocs && i < GS_GPU_PROCS_MAX; i++) {
            int e = gs_agent_server_entry(a, d->procs[i]), m = d->procs_mib[i];
            if (e < 0 || mib[e] == -2) {
                continue;
            }
            /* a daemon's servers summed; one NVML cannot tell makes it unknown */
            mib[e] = m == GS_GPU_MIB_UNKNOWN ? -2 : (mib[e] < 0 ? 0 : mib[e]) + m;
        }
    }
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        mib[e] = mib[e] < 0 ? -1 : mib[e];
        changed |= mib[e] != a->server_mib[e];
        a->server_mib[e] = mib[e];
    }
    return changed;
}

/* Rewritten on every change, never read back by the agent. A failure only
 * costs the status display. What both programs write is here; each one's
 * own (the rows' count, the ranks, the jobs) is its program's status hook. */
void gs_agent_write_status(const gs_agent_t *a)
{
    gs_status_t *s = calloc(1, sizeof(*s));
    gs_error_t err;
    const gs_daemons_t *ds = &a->daemons;
    int on = a->plan.use_mps && ds->n > 0;

    if (s == NULL) {
        return; /* only the status display is lost */
    }
    snprintf(s->mps, sizeof(s->mps), "%s", on ? "on" : "off");
    if (!on) {
        snprintf(s->message, sizeof(s->message), "%s", a->plan.reason);
    }
    s->agent_pid = (int)getpid();
    s->launcher_pid = (int)a->watch_pid;
    s->gsrun_pid = (int)a->o->args.gsrun_pid;
    s->started_ms = a->started_ms;
    s->memory_limit_mb = on ? a->o->cfg.mem_limit_mb : 0;
    s->local_size = a->local_size;
    a->prog->status(a, s);
    for (int g = 0; g < s->nservers; g++) {
        gs_status_server_t *x = &s->server[g];
        snprintf(x->uuid, sizeof(x->uuid), "%s", a->servers.gpu[g].uuid);
        snprintf(x->name, sizeof(x->name), "%s", a->servers.gpu[g].name);
        x->gpu = ds->gpu_of[g];
        x->node_gpu = a->servers.gpu[g].index;
        x->server = ds->server_of[g];
        x->gpu_servers = ds->servers_on[g];
        if (g < ds->n) {
            x->daemon_pid = (int)ds->daemon[g].daemon_pid;
            x->server_pid = ds->daemon[g].nservers > 0 ? (int)ds->daemon[g].server_pid[0] : 0;
            snprintf(x->core, sizeof(x->core), "%s", ds->pinned[g]);
            snprintf(x->pipe_dir, sizeof(x->pipe_dir), "%s", ds->daemon[g].pipe_dir);
            snprintf(x->pct, sizeof(x->pct), "%s", a->plan.server[g].pct_text);
        }
        if (g < GS_MAX_GPUS) {
            snprintf(x->fault, sizeof(x->fault), "%s", a->fault_note[g]);
            snprintf(x->wedged, sizeof(x->wedged), "%s", a->stuck_note[g]);
        }
        /* the node service's from its listing, a job's from its looks */
        x->server_mib = g < GS_MAX_GPUS ? a->server_mib[g] : -1;
    }
    gs_status_write(a->node_dir, s, &err);
    free(s);
}
