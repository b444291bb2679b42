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

#include "runtime/job/job_int.h"
#include "runtime/core/proc.h"

/* A control daemon is asked for its clients at most this often (a log line said a rank's
 * state), each ask bounded; one that did not answer is asked again after the back-off. */
#define WATCH_ASK_EVERY_MS 100
#define WATCH_ASK_MS 1000
#define WATCH_ASK_BACKOFF_MS 2000
/* How long an ACTIVE line's rank the daemon does not list is asked about
 * again (the line of its context's end may come after the ask). */
#define WATCH_HINT_MS 1000
/* How long a process a "not a valid GPU ID" line names, that still runs
 * and is no client, is watched before it is told (the line is its own,
 * and anyone's of the user's to write), and how often asked meanwhile. */
#define WATCH_NODEVICE_MS 3000
#define WATCH_HINT_EVERY_MS 300
/* NVML is looked at again for the clients' trees (a worker that made a
 * context without MPS) this long after a rank became a client, then this
 * often while ranks run. */
#define WATCH_RECHECK_AFTER_MS 2000
#define WATCH_RECHECK_EVERY_MS 10000
#define WATCH_EARLY_MS 100 /* while ranks start (their environ is readable until CUDA starts) */
#define WATCH_EARLY_FOR_MS 3000
#define WATCH_SLOW_MS 1000 /* then while any is unseen */
/* A rank is looked for in NVML's listings once CUDA has run in it this
 * long without a client's line, and NVML is asked at most this often. */
#define WATCH_NVML_AFTER_MS 2000
#define WATCH_NVML_EVERY_MS 2000
/* While a rank is blocked on a wedged server, which is being replaced: it
 * loses that wait and may run only a moment after (what it became is told
 * at the end: a look every 2 s missed ranks that ran 500 ms on an H200). */
#define WATCH_BLOCKED_MS 250

/* The pipe dir gsrun gave rank r ("" unknown). */
static const char *pipe_of(const gs_agent_t *a, int r)
{
    const gs_job_t *j = gs_job_const(a);
    int e = gs_placer_gpu(&j->placer, r);
    return e >= 0 && e < a->daemons.n ? a->daemons.daemon[e].pipe_dir : "";
}

int gs_agent_watch_start(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    j->watch_due_ms = 0;
    j->nvml_due_ms = 0;
    j->fault_at_ms = 0;
    j->recheck_ms = 0;
    j->watch_final = 0;
    j->memory_due_ms = 0;
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        a->server_mib[e] = -1;
    }
    memset(j->watch_ask, 0, sizeof(j->watch_ask));
    j->watching = a->plan.use_mps && a->daemons.n > 0;
    return gs_attach_init(&j->attach, a->local_size);
}

void gs_agent_watch_registered(gs_agent_t *a, int rank, pid_t pid)
{
    gs_job_t *j = gs_job(a);
    long long now = gs_proc_now_ms();
    gs_attach_registered(&j->attach, rank, pid, -1, now);
    gs_attach_identify(&j->attach, rank, "/proc");
    if (j->watching && (j->watch_due_ms == 0 || j->watch_due_ms > now + WATCH_EARLY_MS)) {
        j->watch_due_ms = now + WATCH_EARLY_MS;
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

/* Rank r's state from what its server's log said, where its daemon can
 * no longer be asked: the process it named has exited. */
static void take_exited(gs_agent_t *a, int r, int kind, pid_t pid, int e)
{
    gs_job_t *j = gs_job(a);
    if (kind == GS_MPS_CLIENT_ACTIVE &&
        gs_attach_set(&j->attach, r, GS_ATTACH_CLIENT, pid, -1)) {
        j->attach.r[r].entry = e;
        j->watch_changed = 1;
    } else if (kind == GS_MPS_CLIENT_NODEVICE) {
        j->watch_changed |= gs_attach_set(&j->attach, r, GS_ATTACH_NODEVICE, pid, -1);
    }
}

/* Entry e's control daemon's clients now: each rank among them a client
 * of e; each rank its log named that it does not list and that still
 * runs is not (a NODEVICE line's rank is then what the line says, the
 * line being the client's own, on no server). */
static void confirm(gs_agent_t *a, int e, long long now)
{
    gs_job_t *j = gs_job(a);
    gs_daemons_t *ds = &a->daemons;
    gs_mps_word_t *w = malloc(sizeof(*w));
    gs_error_t err;
    j->watch_asked_ms[e] = now;
    if (w == NULL || gs_mps_ask_word(&ds->daemon[e], ds->control, 0, WATCH_ASK_MS, w, &err) != 0) {
        free(w);
        j->watch_asked_ms[e] = now + WATCH_ASK_BACKOFF_MS; /* NVML tells them meanwhile */
        return;
    }
    j->watch_ask[e] = 0;
    for (int i = 0; i < w->nclients; i++) {
        int r = gs_attach_rank_of(&j->attach, w->clients[i], "/proc");
        if (r >= 0 && gs_attach_set(&j->attach, r, GS_ATTACH_CLIENT, w->clients[i], -1)) {
            j->attach.r[r].entry = e;
            j->watch_changed = 1;
        }
        if (r >= 0) {
            j->attach.r[r].hint = 0;
        }
    }
    for (int r = 0; r < j->attach.n; r++) {
        gs_attach_rank_t *x = &j->attach.r[r];
        if (x->hint == 0 || x->hint_entry != e) {
            continue;
        }
        if (gs_attach_rank_of(&j->attach, x->hint_pid, "/proc") != r || x->hint_left) {
            /* It exited, or its context came and went (the server logged
             * its end), before the daemon could be asked: the lines stand,
             * and NVML's word on a context without MPS still comes first. */
            take_exited(a, r, x->hint, x->hint_pid, e);
        } else if (!j->watch_final &&
                   now - x->hint_ms < (x->hint == GS_MPS_CLIENT_NODEVICE ? WATCH_NODEVICE_MS
                                                                         : WATCH_HINT_MS)) {
            /* Asked again: an ACTIVE line's context may have ended before
             * the ask (its end's line not read yet); a process whose CUDA
             * found no device ends or stays no client, one that connects
             * later was never refused. */
            j->watch_ask[e] = 1;
            j->watch_asked_ms[e] = now + WATCH_HINT_EVERY_MS - WATCH_ASK_EVERY_MS;
            continue;
        } else if (x->hint == GS_MPS_CLIENT_NODEVICE) {
            j->watch_changed |= gs_attach_set(&j->attach, r, GS_ATTACH_NODEVICE, x->hint_pid, -1);
        }
        x->hint = 0; /* an ACTIVE line the daemon does not bear out: not a client */
    }
    free(w);
}

/* The client events the servers' logs hold since the last look: each
 * asks its server's daemon (at most every WATCH_ASK_EVERY_MS). */
static void take_events(gs_agent_t *a, long long now)
{
    gs_job_t *j = gs_job(a);
    gs_daemons_t *ds = &a->daemons;
    pid_t pids[GS_MPS_HEALTH_EVENTS];
    int kinds[GS_MPS_HEALTH_EVENTS];
    char path[GS_PATH_MAX];
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS; e++) {
        if (ds->borrowed && ds->daemon[e].log_dir[0] != '\0') {
            /* The shared agent follows its servers for faults, not for this
             * job's clients: this job reads their lines itself. */
            gs_mps_out_path(&ds->daemon[e], path, sizeof(path));
            gs_mps_health_follow(&ds->health[e], path);
        }
        int n = gs_mps_health_take(&ds->health[e], pids, kinds, GS_MPS_HEALTH_EVENTS);
        for (int i = 0; i < n; i++) {
            int r = gs_attach_rank_of(&j->attach, pids[i], "/proc");
            if (r >= 0 && kinds[i] == GS_MPS_CLIENT_GONE) {
                gs_attach_rank_t *x = &j->attach.r[r];
                x->hint_left |= x->hint == GS_MPS_CLIENT_ACTIVE && x->hint_pid == pids[i];
            } else if (r >= 0) {
                gs_attach_rank_t *x = &j->attach.r[r];
                x->hint = kinds[i];
                x->hint_pid = pids[i];
                x->hint_entry = e;
                x->hint_ms = now;
                x->hint_left = 0;
                j->watch_ask[e] = 1;
            } else if (kinds[i] != GS_MPS_CLIENT_GONE &&
                       (r = gs_attach_rank_exited(&j->attach, pids[i], "/proc")) >= 0) {
                take_exited(a, r, kinds[i], pids[i], e);
            }
        }
        int due = j->watch_final || now >= j->watch_asked_ms[e] + WATCH_ASK_EVERY_MS;
        if (j->watch_ask[e] && due) {
            confirm(a, e, now);
        }
    }
}

/* Per rank, what one NVML look saw: a context of its without MPS (and
 * where), else an MPS client's. */
struct nvml_seen {
    pid_t plain, client;
    int gpu;
};

/* The entry whose pipe dir gsrun gave rank r, and the one (another of
 * gsrun's) whose pipe dir its program was started with: -1 each none. */
static void entries_of(const gs_agent_t *a, int r, int *given, int *named)
{
    const gs_job_t *j = gs_job_const(a);
    const gs_attach_env_t *e = &j->attach.r[r].env;
    *given = gs_placer_gpu(&j->placer, r);
    *given = *given >= 0 && *given < a->daemons.n && *given < GS_MAX_GPUS ? *given : -1;
    *named = -1;
    for (int k = 0; k < a->daemons.n && k < GS_MAX_GPUS && e->has_pipe && *named < 0; k++) {
        *named = k != *given && strcmp(a->daemons.daemon[k].pipe_dir, e->pipe) == 0 ? k : -1;
    }
}

/* Entry e's daemon's clients for this look: asked once (each ask bounded,
 * one that did not answer backed off as confirm()'s); NULL unknown. */
static const gs_mps_word_t *word_of(gs_agent_t *a, int e, gs_mps_word_t **words,
                                    unsigned char *asked, long long now)
{
    gs_job_t *j = gs_job(a);
    gs_error_t err;
    if (e < 0 || asked[e]) {
        return e >= 0 ? words[e] : NULL;
    }
    asked[e] = 1;
    if (now < j->watch_asked_ms[e]) {
        return NULL; /* backed off: asked again at a later look */
    }
    words[e] = malloc(sizeof(*words[e]));
    j->watch_asked_ms[e] = now;
    if (words[e] != NULL &&
        gs_mps_ask_word(&a->daemons.daemon[e], a->daemons.control, 0, WATCH_ASK_MS, words[e],
                        &err) != 0) {
        free(words[e]);
        words[e] = NULL;
        j->watch_asked_ms[e] = now + WATCH_ASK_BACKOFF_MS;
    }
    return words[e];
}

/* NVML lists the context of each rank in seen[] with a client among MPS's,
 * but not whose server's: a rank is gsrun's client only when a control
 * daemon gsrun gave it lists it (one ask per entry per look), a client of
 * a server gsrun did not give it when they all answered without it, and
 * left as it was (asked at a later look) while one did not answer. */
static void judge_clients(gs_agent_t *a, const struct nvml_seen *seen, long long now)
{
    gs_job_t *j = gs_job(a);
    gs_mps_word_t *words[GS_MAX_GPUS] = {NULL};
    unsigned char asked[GS_MAX_GPUS] = {0};
    for (int r = 0; r < j->attach.n; r++) {
        gs_attach_rank_t *x = &j->attach.r[r];
        if (seen[r].plain > 0 || seen[r].client <= 0 || x->state == GS_ATTACH_CLIENT) {
            continue;
        }
        int e[2], known = 1, by = -1;
        entries_of(a, r, &e[0], &e[1]);
        for (int k = 0; k < 2 && by < 0; k++) {
            const gs_mps_word_t *w = word_of(a, e[k], words, asked, now);
            known &= e[k] < 0 || w != NULL;
            by = w != NULL && gs_mps_word_lists(w, seen[r].client) ? e[k] : -1;
        }
        if (by >= 0 && gs_attach_set(&j->attach, r, GS_ATTACH_CLIENT, seen[r].client, -1)) {
            x->entry = by;
            j->watch_changed = 1;
        } else if (by < 0 && known && e[0] >= 0 &&
                   gs_attach_rank_of(&j->attach, seen[r].client, "/proc") == r) {
            /* (a context whose process ended since NVML's look is no word) */
            j->watch_changed |= gs_attach_set(&j->attach, r, GS_ATTACH_OTHER, seen[r].client, -1);
        }
    }
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        free(words[e]);
    }
}

/* Contexts NVML lists now, each counted for the rank whose process tree
 * holds it: a rank with any context without MPS is told so (with how many
 * of its contexts), one whose every context is a client is a client of
 * whose daemon lists it (judge_clients). */
static void ask_nvml(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_gpu_list_t *l = calloc(1, sizeof(*l));
    if (l == NULL || gs_agent_memory_listing(a, l) != 0) {
        free(l);
        return;
    }
    gs_agent_memory_take(a, l); /* this look counts as the memory's */
    j->memory_due_ms = gs_proc_now_ms() + GS_AGENT_MEMORY_EVERY_MS;
    struct nvml_seen *seen = calloc((size_t)(j->attach.n > 0 ? j->attach.n : 1), sizeof(*seen));
    for (int r = 0; r < j->attach.n; r++) {
        j->attach.r[r].nctx = j->attach.r[r].nplain = 0;
    }
    for (int g = 0; g < l->count && seen != NULL; g++) {
        const gs_gpu_t *d = &l->gpu[g];
        for (int i = 0; i < d->nprocs && i < GS_GPU_PROCS_MAX && d->nmps >= 0; i++) {
            int r = gs_attach_rank_of(&j->attach, d->procs[i], "/proc");
            if (r < 0) {
                continue;
            }
            j->attach.r[r].nctx++;
            if (!gs_gpu_is_mps_client(d, d->procs[i])) {
                j->attach.r[r].nplain++;
                seen[r].plain = d->procs[i];
                seen[r].gpu = d->index;
            } else {
                seen[r].client = d->procs[i];
            }
        }
    }
    for (int r = 0; r < j->attach.n && seen != NULL; r++) {
        if (seen[r].plain > 0) {
            j->watch_changed |=
                gs_attach_set(&j->attach, r, GS_ATTACH_PLAIN, seen[r].plain, seen[r].gpu);
        }
    }
    if (seen != NULL) {
        judge_clients(a, seen, gs_proc_now_ms());
    }
    free(seen);
    free(l);
}

/* Each rank in trouble, told once. */
static void tell_new(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    for (int r = 0; r < j->attach.n; r++) {
        gs_attach_rank_t *x = &j->attach.r[r];
        if (x->told || (x->state != GS_ATTACH_PLAIN && x->state != GS_ATTACH_NODEVICE &&
                        x->state != GS_ATTACH_OTHER)) {
            continue;
        }
        char line[1600];
        if (x->ctx_pid > 0 && x->state == GS_ATTACH_OTHER) {
            /* The pipe dir the context's own process saw (a wrapper's
             * child's): kept as read early where it cannot be read now. */
            gs_attach_read_env(x->ctx_pid, "/proc", pipe_of(a, r), &x->env);
        } else if (x->ctx_pid > 0) { /* its own process: a wrapper may have changed user */
            gs_attach_read_uid(x->ctx_pid, "/proc", &x->env);
        }
        gs_attach_explain(x, r, pipe_of(a, r), "0", line, sizeof(line));
        gs_report_tell(&a->report, "%s", line);
        x->told = 1;
        j->watch_changed = 1;
    }
}

/* A rank whose context a fault ended still runs past the grace: it cannot
 * use the GPU again, and the others usually wait for it in MPI. */
static void grace(gs_agent_t *a, long long now)
{
    gs_job_t *j = gs_job(a);
    int g = a->o->cfg.fault_grace_s;
    char ranks[128], all[128], opt[64], why[400];
    if (j->fault_at_ms <= 0 || g <= 0 || now < j->fault_at_ms + (long long)g * 1000) {
        return;
    }
    int n = gs_agent_fault_running(a, ranks, sizeof(ranks));
    if (n == 0) {
        gs_report_add(&a->report, 0, "every rank a GPU fault ended had exited by the end of "
                      "--mps-fault-grace: the job runs on");
        j->fault_at_ms = -1; /* this grace is over: nothing to end */
        return;
    }
    gs_attach_ranks_in(&j->attach, GS_ATTACH_FAULTED, all, sizeof(all));
    snprintf(why, sizeof(why),
             "the job still ran %d s after a GPU fault ended the MPS context of rank%s %s, and "
             "rank%s %s still ran (its GPU work cannot go on; %s=%d, 0 waits)",
             g, strchr(all, ',') || strchr(all, '-') ? "s" : "", all, n > 1 ? "s" : "", ranks,
             gs_config_opt(&a->o->cfg, "mps-fault-grace", opt, sizeof(opt)), g);
    snprintf(j->fault_end_why, sizeof(j->fault_end_why), "%s", why);
    a->report.fault_end = 1;
    gs_agent_loop_end(a, j->fault_end_why);
}

void gs_agent_watch_dropped(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    unsigned char *alive = calloc((size_t)(j->attach.n > 0 ? j->attach.n : 1), 1);
    if (alive == NULL) {
        return; /* marked at the next exit */
    }
    for (int i = 0; i < j->ranks.nlive; i++) {
        int r = j->ranks.live[i].rank;
        if (r >= 0 && r < j->attach.n) {
            alive[r] = 1;
        }
    }
    for (int r = 0; r < j->attach.n; r++) {
        j->attach.r[r].gone |= j->attach.r[r].pid > 0 && !alive[r];
    }
    free(alive);
}

/* The ranks not yet seen: their environment while it can be read, when
 * CUDA started in them; 1 when one's CUDA is old enough for NVML. */
static int look_unseen(gs_agent_t *a, long long now, int *early)
{
    gs_job_t *j = gs_job(a);
    int unseen_old = 0;
    for (int r = 0; r < j->attach.n; r++) {
        gs_attach_rank_t *x = &j->attach.r[r];
        if (x->pid <= 0 || x->gone || /* a blocked rank: what it becomes is told */
            (x->state != GS_ATTACH_UNSEEN && x->state != GS_ATTACH_BLOCKED)) {
            continue;
        }
        if (now - x->since_ms < WATCH_EARLY_FOR_MS && x->cuda_ms == 0) {
            /* Unreadable once CUDA has started: what was read stays. */
            gs_attach_read_env(x->pid, "/proc", pipe_of(a, r), &x->env);
            *early = 1;
        }
        if (x->cuda_ms == 0 && cuda_in_tree(x->pid, 0)) {
            x->cuda_ms = now;
        }
        unseen_old |= x->cuda_ms > 0 && now - x->cuda_ms >= WATCH_NVML_AFTER_MS;
    }
    return unseen_old;
}

void gs_agent_watch_check(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    long long now = gs_proc_now_ms();
    if (!j->watching || j->attach.n == 0) {
        return;
    }
    take_events(a, now);
    int clients = 0;
    for (int r = 0; r < j->attach.n; r++) {
        clients |= j->attach.r[r].state == GS_ATTACH_CLIENT && !j->attach.r[r].gone;
    }
    if (clients && j->recheck_ms == 0) {
        j->recheck_ms = now + WATCH_RECHECK_AFTER_MS;
    }
    if (j->watch_due_ms > 0 && now >= j->watch_due_ms) {
        int early = 0, blocked = 0;
        for (int r = 0; r < j->attach.n; r++) {
            blocked |= j->attach.r[r].pid > 0 && !j->attach.r[r].gone &&
                       j->attach.r[r].state == GS_ATTACH_BLOCKED;
        }
        if ((look_unseen(a, now, &early) || blocked) && now >= j->nvml_due_ms) {
            ask_nvml(a);
            j->nvml_due_ms = now + (blocked ? WATCH_BLOCKED_MS : WATCH_NVML_EVERY_MS);
        }
        int unseen = 0;
        for (int r = 0, st; r < j->attach.n; r++) {
            st = j->attach.r[r].state;
            unseen |= j->attach.r[r].pid > 0 && !j->attach.r[r].gone &&
                      (st == GS_ATTACH_UNSEEN || st == GS_ATTACH_BLOCKED);
        }
        j->watch_due_ms = early     ? now + WATCH_EARLY_MS
                          : blocked ? now + WATCH_BLOCKED_MS
                          : unseen  ? now + WATCH_SLOW_MS
                                    : 0;
    }
    if (clients && j->recheck_ms > 0 && now >= j->recheck_ms) {
        /* A client's workers: each context of its tree counted. */
        if (now >= j->nvml_due_ms) {
            ask_nvml(a);
            j->nvml_due_ms = now + WATCH_NVML_EVERY_MS;
        }
        j->recheck_ms = now + WATCH_RECHECK_EVERY_MS;
    }
    gs_agent_memory_look(a, now);
    tell_new(a);
    grace(a, now);
    if (j->watch_changed) {
        j->watch_changed = 0;
        gs_agent_write_status(a);
    }
}

void gs_agent_watch_final(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    j->watch_final = 1; /* every line waiting for its daemon's word is settled now */
    gs_agent_watch_check(a);
}

int gs_agent_watch_timeout(const gs_agent_t *a)
{
    const gs_job_t *j = gs_job_const(a);
    long long now = gs_proc_now_ms(), t = -1;
    if (!j->watching) {
        return -1;
    }
    if (j->watch_due_ms > 0) {
        t = j->watch_due_ms > now ? j->watch_due_ms - now : 0;
    }
    for (int e = 0; e < a->daemons.n && e < GS_MAX_GPUS; e++) {
        if (j->watch_ask[e]) { /* a log line waits for its daemon's word */
            long long at = j->watch_asked_ms[e] + WATCH_ASK_EVERY_MS - now;
            at = at < 0 ? 0 : at;
            t = t < 0 || at < t ? at : t;
        }
    }
    if (j->recheck_ms > 0 && j->ranks.nlive > 0) {
        long long at = j->recheck_ms > now ? j->recheck_ms - now : 0;
        t = t < 0 || at < t ? at : t;
    }
    long long m = gs_agent_memory_timeout(a, now);
    t = m >= 0 && (t < 0 || m < t) ? m : t;
    if (j->fault_at_ms > 0 && a->o->cfg.fault_grace_s > 0 && j->ranks.nlive > 0) {
        /* Woken at the grace's end, when it looks again. */
        long long end = j->fault_at_ms + (long long)a->o->cfg.fault_grace_s * 1000 - now;
        end = end < 0 ? 0 : end;
        t = t < 0 || end < t ? end : t;
    }
    return t > 1 << 30 ? 1 << 30 : (int)t;
}
