/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether each rank really is an MPS client, while the job runs.
 *
 * gsrun gives every rank a server's pipe dir, but the program may never
 * reach it: a wrapper that drops CUDA_MPS_PIPE_DIRECTORY, a container that
 * hides the directory, a site's per-rank CUDA_VISIBLE_DEVICES (under MPS a
 * client sees only its server's device, as device 0), or a program without
 * CUDA. So the agent watches what the driver says (attach.h):
 *   - the servers' logs (followed as they grow): "Status of client {PID: P,
 *     Context ID: 1} is ACTIVE" makes a rank served; a client's own line
 *     "Client requested N which is not a valid GPU ID" tells a device it
 *     cannot see;
 *   - NVML, only for a rank in which CUDA started (libcuda mapped, or the
 *     process made itself unreadable as CUDA does) 2 s ago without its
 *     context becoming a client: a context in the compute listing but not
 *     the MPS listing is a rank on the GPU without MPS. Not sooner: while
 *     the ranks create their contexts the driver is busiest, and the MPS
 *     log tells the clients by then. The node's NVML is asked where it is
 *     kept (the user's node service when the job leases its servers; else
 *     this agent's own, loaded then and kept), never once per rank, at most
 *     every 2 s; a program without CUDA never costs a listing;
 *   - what each rank's program was started with (/proc/PID/environ, read
 *     early: CUDA makes the process unreadable once it starts), for the
 *     cause.
 * A rank without MPS or without its device is told at once, one line, in
 * the job's output (gs_report_tell). A GPU fault that ended a rank's
 * context is told as MPS lists it (agent_fault.c); if the job still runs
 * --mps-fault-grace seconds later, the agent ends it: a rank whose context
 * is gone cannot use the GPU again, and the others usually wait for it in
 * MPI until the wall-clock limit. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/agent/agent_int.h"
#include "runtime/core/proc.h"
#include "runtime/files/status.h"

/* Look often while ranks start (their environment is readable only until
 * CUDA starts in them), then once a second while any is still unseen. */
#define WATCH_EARLY_MS 100
#define WATCH_EARLY_FOR_MS 3000
#define WATCH_SLOW_MS 1000
/* A rank is looked for in NVML's listings once CUDA has run in it this
 * long without a client's line, and NVML is asked at most this often. */
#define WATCH_NVML_AFTER_MS 2000
#define WATCH_NVML_EVERY_MS 2000

static int live(const gs_agent_t *a, int rank)
{
    for (int i = 0; i < a->ranks.nlive; i++) {
        if (a->ranks.live[i].rank == rank) {
            return 1;
        }
    }
    return 0;
}

/* The pipe dir gsrun gave rank r ("" unknown). */
static const char *pipe_of(const gs_agent_t *a, int r)
{
    int e = gs_placer_gpu(&a->placer, r);
    return e >= 0 && e < a->daemons.n ? a->daemons.daemon[e].pipe_dir : "";
}

int gs_agent_watch_start(gs_agent_t *a)
{
    a->watch_due_ms = 0;
    a->nvml_due_ms = 0;
    a->fault_at_ms = 0;
    a->watching = a->plan.use_mps && a->daemons.n > 0;
    return gs_attach_init(&a->attach, a->local_size);
}

void gs_agent_watch_registered(gs_agent_t *a, int rank, pid_t pid)
{
    long long now = gs_proc_now_ms();
    gs_attach_registered(&a->attach, rank, pid, -1, now);
    if (a->watching && (a->watch_due_ms == 0 || a->watch_due_ms > now + WATCH_EARLY_MS)) {
        a->watch_due_ms = now + WATCH_EARLY_MS;
    }
}

/* CUDA started in pid or in a process of its own (a wrapper's child). */
static int cuda_in_tree(pid_t pid, int depth)
{
    char path[96], buf[512];
    if (gs_attach_cuda_started(pid, "/proc")) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = depth < 3 ? fopen(path, "re") : NULL;
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    for (char *p = buf, *end; *p != '\0'; p = end) {
        long c = strtol(p, &end, 10);
        if (end == p) {
            break;
        }
        if (c > 0 && cuda_in_tree((pid_t)c, depth + 1)) {
            return 1;
        }
    }
    return 0;
}

/* The client events the servers' logs hold since the last look. */
static void take_events(gs_agent_t *a)
{
    gs_daemons_t *ds = &a->daemons;
    pid_t pids[GS_MPS_HEALTH_EVENTS];
    int kinds[GS_MPS_HEALTH_EVENTS];
    char path[GS_PATH_MAX];
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS; e++) {
        if (ds->borrowed && ds->daemon[e].log_dir[0] != '\0') {
            /* The shared agent follows its servers for faults, not for this
             * job's clients: this job reads their lines itself. */
            snprintf(path, sizeof(path), "%s/" GS_MPS_CONTROL_OUT, ds->daemon[e].log_dir);
            gs_mps_health_follow(&ds->health[e], path);
        }
        int n = gs_mps_health_take(&ds->health[e], pids, kinds, GS_MPS_HEALTH_EVENTS);
        for (int i = 0; i < n; i++) {
            int r = gs_attach_rank_of(&a->attach, pids[i], "/proc");
            if (r < 0) {
                continue;
            }
            if (kinds[i] == GS_MPS_CLIENT_ACTIVE) {
                a->watch_changed |= gs_attach_set(&a->attach, r, GS_ATTACH_CLIENT, pids[i], -1);
                a->attach.r[r].entry = e;
            } else if (kinds[i] == GS_MPS_CLIENT_NODEVICE) {
                a->watch_changed |= gs_attach_set(&a->attach, r, GS_ATTACH_NODEVICE, pids[i], -1);
            }
        }
    }
}

/* NVML's listing of the node's GPUs now: the node service's where the job
 * leases its servers, else this agent's own NVML (kept started). */
static int list_gpus(gs_agent_t *a, gs_gpu_list_t *l)
{
    gs_error_t err;
    if (a->daemons.borrowed && !a->watch_own_nvml) {
        if (gs_agent_share_listing(a, l) == 0) {
            return 0;
        }
        a->watch_own_nvml = 1; /* the service did not answer: not asked again (2 s each) */
    }
    gs_gpu_hold();
    return gs_gpu_discover(l, &err);
}

static int listed(const int *pids, int n, int pid)
{
    for (int i = 0; i < n && i < GS_GPU_PROCS_MAX; i++) {
        if (pids[i] == pid) {
            return 1;
        }
    }
    return 0;
}

/* Contexts NVML lists now: a rank's without MPS, or its client's (where
 * the log's line was missed). */
static void ask_nvml(gs_agent_t *a)
{
    gs_gpu_list_t *l = calloc(1, sizeof(*l));
    if (l == NULL || list_gpus(a, l) != 0) {
        free(l);
        return;
    }
    for (int g = 0; g < l->count; g++) {
        const gs_gpu_t *d = &l->gpu[g];
        for (int i = 0; i < d->nprocs && i < GS_GPU_PROCS_MAX && d->nmps >= 0; i++) {
            int r = gs_attach_rank_of(&a->attach, d->procs[i], "/proc");
            if (r >= 0) {
                int mps = listed(d->mps, d->nmps, d->procs[i]);
                a->watch_changed |= gs_attach_set(
                    &a->attach, r, mps ? GS_ATTACH_CLIENT : GS_ATTACH_PLAIN, d->procs[i], d->index);
            }
        }
    }
    free(l);
}

/* Each rank in trouble, told once. */
static void tell_new(gs_agent_t *a)
{
    for (int r = 0; r < a->attach.n; r++) {
        gs_attach_rank_t *x = &a->attach.r[r];
        if (x->told || (x->state != GS_ATTACH_PLAIN && x->state != GS_ATTACH_NODEVICE)) {
            continue;
        }
        char line[1600];
        if (x->ctx_pid > 0) { /* the context's own process: a wrapper may have changed user */
            gs_attach_read_uid(x->ctx_pid, "/proc", &x->env);
        }
        gs_attach_explain(x, r, pipe_of(a, r), "0", line, sizeof(line));
        gs_report_tell(&a->report, "%s", line);
        x->told = 1;
        a->watch_changed = 1;
    }
}

/* The job still runs past the grace after a fault ended a rank's context. */
static void grace(gs_agent_t *a, long long now)
{
    int g = a->o->cfg.fault_grace_s;
    if (a->fault_at_ms == 0 || g <= 0 || a->ranks.nlive == 0 ||
        now < a->fault_at_ms + (long long)g * 1000) {
        return;
    }
    char ranks[128], opt[64], why[400];
    gs_attach_ranks_in(&a->attach, GS_ATTACH_FAULTED, ranks, sizeof(ranks));
    snprintf(why, sizeof(why),
             "the job still ran %d s after a GPU fault ended the MPS context of rank%s %s (its "
             "GPU work cannot go on; %s=%d, 0 waits)",
             g, strchr(ranks, ',') || strchr(ranks, '-') ? "s" : "", ranks,
             gs_config_opt(&a->o->cfg, "mps-fault-grace", opt, sizeof(opt)), g);
    snprintf(a->fault_end_why, sizeof(a->fault_end_why), "%s", why);
    a->report.fault_end = 1;
    gs_agent_loop_end(a, a->fault_end_why);
}

void gs_agent_watch_check(gs_agent_t *a)
{
    long long now = gs_proc_now_ms();
    if (!a->watching || a->attach.n == 0) {
        return;
    }
    take_events(a);
    if (a->watch_due_ms > 0 && now >= a->watch_due_ms) {
        int early = 0, unseen_old = 0;
        for (int r = 0; r < a->attach.n; r++) {
            gs_attach_rank_t *x = &a->attach.r[r];
            if (x->pid <= 0 || x->state != GS_ATTACH_UNSEEN || !live(a, r)) {
                continue;
            }
            if (now - x->since_ms < WATCH_EARLY_FOR_MS && x->cuda_ms == 0) {
                /* Unreadable once CUDA has started: what was read stays. */
                gs_attach_read_env(x->pid, "/proc", pipe_of(a, r), &x->env);
                early = 1;
            }
            if (x->cuda_ms == 0 && cuda_in_tree(x->pid, 0)) {
                x->cuda_ms = now;
            }
            unseen_old |= x->cuda_ms > 0 && now - x->cuda_ms >= WATCH_NVML_AFTER_MS;
        }
        if (unseen_old && now >= a->nvml_due_ms) {
            ask_nvml(a);
            a->nvml_due_ms = now + WATCH_NVML_EVERY_MS;
        }
        int unseen = 0;
        for (int r = 0; r < a->attach.n; r++) {
            unseen |= a->attach.r[r].pid > 0 && a->attach.r[r].state == GS_ATTACH_UNSEEN &&
                      live(a, r);
        }
        a->watch_due_ms = early ? now + WATCH_EARLY_MS : unseen ? now + WATCH_SLOW_MS : 0;
    }
    tell_new(a);
    grace(a, now);
    if (a->watch_changed) {
        a->watch_changed = 0;
        gs_agent_write_status(a);
    }
}

int gs_agent_watch_timeout(const gs_agent_t *a)
{
    long long now = gs_proc_now_ms(), t = -1;
    if (!a->watching) {
        return -1;
    }
    if (a->watch_due_ms > 0) {
        t = a->watch_due_ms > now ? a->watch_due_ms - now : 0;
    }
    if (a->fault_at_ms > 0 && a->o->cfg.fault_grace_s > 0 && a->ranks.nlive > 0) {
        long long end = a->fault_at_ms + (long long)a->o->cfg.fault_grace_s * 1000 - now;
        end = end < 0 ? 0 : end;
        t = t < 0 || end < t ? end : t;
    }
    return t > 1 << 30 ? 1 << 30 : (int)t;
}

void gs_agent_watch_summary(const gs_agent_t *a, char *buf, size_t len)
{
    int c[GS_ATTACH_NSTATES];
    char list[128];
    size_t used = 0;
    gs_attach_counts(&a->attach, c);
    buf[0] = '\0';
    if (!a->watching) {
        snprintf(buf, len, "served %d of %d ranks", a->ranks.registered, a->local_size);
        return;
    }
    int seen = c[GS_ATTACH_CLIENT] + c[GS_ATTACH_PLAIN] + c[GS_ATTACH_NODEVICE] +
               c[GS_ATTACH_FAULTED];
    if (seen == 0) {
        snprintf(buf, len,
                 "no rank of the %d used the GPU (MPS saw no client, NVML no context of theirs): "
                 "its MPS had no client (a program without CUDA runs as well with --mps=off)",
                 a->ranks.registered);
        return;
    }
    used += (size_t)snprintf(buf, len, "served %d of %d ranks as MPS clients",
                             c[GS_ATTACH_CLIENT] + c[GS_ATTACH_FAULTED], a->local_size);
    static const char *what[GS_ATTACH_NSTATES] = {"never used the GPU", NULL,
                                                  "ran on the GPU without MPS",
                                                  "found no device", "lost their context to a "
                                                                     "GPU fault"};
    for (int s = 0; s < GS_ATTACH_NSTATES && used < len; s++) {
        if (what[s] == NULL || c[s] == 0) {
            continue;
        }
        gs_attach_ranks_in(&a->attach, s, list, sizeof(list));
        used += (size_t)snprintf(buf + used, len - used, "; %d %s (rank%s %s)", c[s], what[s],
                                 c[s] > 1 ? "s" : "", list);
    }
}
