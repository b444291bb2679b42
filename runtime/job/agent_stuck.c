/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's ranks that wait on MPS: found, told, and their daemon replaced.
 *
 * No CUDA variable bounds a client's wait for its control daemon or
 * server: one that is wedged (stopped, or accepting and never replying)
 * holds each rank that starts CUDA on it for as long as the rank runs, and
 * without this the job hangs silently (measured on an H200: both ranks
 * blocked in CUDA's start until killed at 40 s). So a rank whose CUDA
 * started STUCK_AFTER_MS ago and is no client yet (neither its server's
 * daemon nor NVML has it) has its daemon probed (mps_probe.h: stopped
 * processes, get_server_list bounded by GS_MPS_ANSWER_MS). A daemon that
 * answers leaves the rank alone (a slow start is no fault). A wedged one:
 *   - the ranks waiting on it are told in one line, with the daemon or
 *     server, its PID, how long they waited and what gsrun did, and
 *     counted blocked until they become something else;
 *   - the job's own daemon is ended (SIGKILL: it answered nothing within
 *     the bound) and a fresh one starts in its dirs, where the ranks given
 *     its pipe dir that start CUDA from now on find it; the ranks already
 *     waiting see their connection close: on an H200 (driver 580) their
 *     CUDA then ran without MPS, and they are told so by the watch;
 *   - a shared one is the user's node service's to replace: the lease
 *     says "wedged S", the service probes it itself and replaces it;
 *   - when in doubt gsrun does not kill: a daemon whose server holds ranks'
 *     contexts (or other jobs' leases), or one replaced twice already,
 *     stays, and is told. Each wedge is told once, until it answers. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/job/job_int.h"
#include "runtime/core/proc.h"
#include "runtime/wire/lease.h"

/* A context comes 0.2-1 s after CUDA's start on an idle H200 (seconds with
 * dozens starting at once): a rank is looked at after this long, and its
 * daemon probed at most this often while ranks wait on it. */
#define STUCK_AFTER_MS 1500
#define STUCK_PROBE_EVERY_MS 3000

/* Entry e's ranks whose CUDA started STUCK_AFTER_MS ago without a context
 * seen: how many, their list ("0,3"), the longest wait. */
static int waiting_on(const gs_agent_t *a, int e, long long now, char *list, size_t len,
                      long long *longest)
{
    const gs_job_t *j = gs_job_const(a);
    int n = 0;
    size_t used = 0;
    list[0] = '\0';
    *longest = 0;
    for (int r = 0; r < j->attach.n; r++) {
        const gs_attach_rank_t *x = &j->attach.r[r];
        long long waited = now - x->cuda_ms;
        if (x->pid <= 0 || x->gone || x->cuda_ms <= 0 || waited < STUCK_AFTER_MS ||
            (x->state != GS_ATTACH_UNSEEN && x->state != GS_ATTACH_BLOCKED) ||
            gs_placer_gpu(&j->placer, r) != e) {
            continue;
        }
        n++;
        *longest = waited > *longest ? waited : *longest;
        if (used < len) {
            used += (size_t)snprintf(list + used, len - used, "%s%d", n > 1 ? "," : "", r);
        }
    }
    return n;
}

/* Entry e's ranks that are its MPS clients now: how many, and their list. */
static int clients_on(const gs_agent_t *a, int e, char *list, size_t len)
{
    const gs_job_t *j = gs_job_const(a);
    int n = 0;
    size_t used = 0;
    list[0] = '\0';
    for (int r = 0; r < j->attach.n; r++) {
        const gs_attach_rank_t *x = &j->attach.r[r];
        if (x->state == GS_ATTACH_CLIENT && !x->gone && gs_placer_gpu(&j->placer, r) == e) {
            n++;
            if (used < len) {
                used += (size_t)snprintf(list + used, len - used, "%s%d", n > 1 ? "," : "", r);
            }
        }
    }
    return n;
}

/* The wedged daemon of entry e dealt with: what gsrun did, into did. When
 * in doubt it does not kill: a daemon whose server holds ranks' contexts
 * stays (ending it would end them), as does one replaced twice already. */
static void act(gs_agent_t *a, int e, int n, const char *ranks, char *did, size_t len)
{
    gs_job_t *j = gs_job(a);
    gs_daemons_t *ds = &a->daemons;
    gs_error_t err;
    char clients[160];
    const char *s = n > 1 ? "s" : "", *lose = n > 1 ? "lose" : "loses";
    long long t0 = gs_proc_now_ms();
    int c = clients_on(a, e, clients, sizeof(clients));
    if (c > 0) {
        snprintf(did, len, "gsrun leaves it running: rank%s %s %s its clients (ending it would "
                 "end their contexts); rank%s %s cannot start CUDA on it until it answers",
                 c > 1 ? "s" : "", clients, c > 1 ? "are" : "is", s, ranks);
    } else if (a->stuck_ended[e] >= 2) {
        snprintf(did, len, "gsrun leaves it: it ended this GPU's wedged MPS twice already (the "
                 "GPU itself may be stuck: see nvidia-smi)");
    } else if (ds->borrowed) {
        char line[32];
        int w = gs_lease_fmt_wedged(line, sizeof(line), j->share_server[e]);
        int asked = j->share_fd >= 0 && j->share_server[e] >= 0 && w > 0 &&
                    write(j->share_fd, line, (size_t)w) > 0;
        snprintf(did, len, "%s; rank%s %s, already waiting, %s that wait once it is ended (CUDA "
                 "then fails, or runs without MPS) and each is told as what it becomes",
                 asked ? "the user's node service was asked to end it and start a fresh one"
                       : "no node service runs to replace it (it has ended)",
                 s, ranks, lose);
    } else {
        gs_mps_end_wedged(&ds->daemon[e]);
        a->stuck_ended[e]++;
        if (gs_daemons_refill(ds, &a->servers, e, 1, &err) == 0) {
            snprintf(did, len,
                     "gsrun ended it and started a fresh one (control daemon %d) in %lld ms: "
                     "ranks that start CUDA from now on get it; rank%s %s, already waiting, %s "
                     "that wait (CUDA then fails, or runs without MPS) and each is told as what "
                     "it becomes",
                     (int)ds->daemon[e].daemon_pid, gs_proc_now_ms() - t0, s, ranks, lose);
            gs_agent_publish_on(a);
        } else {
            snprintf(did, len, "gsrun ended it; a fresh one could not start (%s): the job's "
                     "ranks on it run without MPS", err.text);
        }
    }
    snprintf(a->stuck_note[e], sizeof(a->stuck_note[e]), "while rank%s %.60s waited: %.240s", s,
             ranks, did);
}

void gs_agent_stuck_check(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_daemons_t *ds = &a->daemons;
    long long now = gs_proc_now_ms(), longest;
    char ranks[160], why[300], did[400], who[48];
    if (!j->watching) {
        return;
    }
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS; e++) {
        if (now < j->stuck_next_ms[e]) {
            continue;
        }
        int n = waiting_on(a, e, now, ranks, sizeof(ranks), &longest);
        if (n == 0) {
            continue;
        }
        j->stuck_next_ms[e] = now + STUCK_PROBE_EVERY_MS;
        int rc = gs_mps_probe(&ds->daemon[e], ds->control, GS_MPS_ANSWER_MS, why, sizeof(why));
        if (rc != GS_MPS_PROBE_WEDGED || j->stuck_told[e]) {
            /* It answers (a slow start), or it died (told by its reaping),
             * or this wedge was told: once until it answers again. */
            j->stuck_told[e] &= rc == GS_MPS_PROBE_WEDGED;
            continue;
        }
        for (int r = 0; r < j->attach.n; r++) {
            const gs_attach_rank_t *x = &j->attach.r[r];
            if (x->pid > 0 && !x->gone && x->cuda_ms > 0 && now - x->cuda_ms >= STUCK_AFTER_MS &&
                x->state == GS_ATTACH_UNSEEN && gs_placer_gpu(&j->placer, r) == e) {
                gs_attach_set(&j->attach, r, GS_ATTACH_BLOCKED, x->pid, -1);
            }
        }
        gs_daemons_label(ds, e, who, sizeof(who));
        act(a, e, n, ranks, did, sizeof(did));
        j->stuck_told[e] = 1;
        /* What the blocked ranks become may last a moment (on an H200 they
         * ran 500 ms without MPS, then exited): the watch looks at them
         * from now on, not when its NVML look comes round again. */
        j->nvml_due_ms = j->watch_due_ms = now;
        gs_report_tell(&a->report,
                       "%s: rank%s %s waited %.1f s for %s CUDA context on %s MPS, which is "
                       "wedged: %s; %s",
                       who, n > 1 ? "s" : "", ranks, (double)longest / 1000.0,
                       n > 1 ? "their" : "its", ds->borrowed ? "the user's shared" : "the job's",
                       why, did);
        gs_agent_write_status(a);
    }
}

int gs_agent_stuck_timeout(const gs_agent_t *a)
{
    const gs_job_t *j = gs_job_const(a);
    long long now = gs_proc_now_ms(), t = -1;
    if (!j->watching) {
        return -1;
    }
    for (int r = 0; r < j->attach.n; r++) {
        const gs_attach_rank_t *x = &j->attach.r[r];
        int e = gs_placer_gpu(&j->placer, r);
        if (x->pid <= 0 || x->gone || x->cuda_ms <= 0 || x->state != GS_ATTACH_UNSEEN || e < 0 ||
            e >= a->daemons.n || e >= GS_MAX_GPUS) {
            continue;
        }
        long long at = x->cuda_ms + STUCK_AFTER_MS;
        at = at > j->stuck_next_ms[e] ? at : j->stuck_next_ms[e];
        at = at > now ? at - now : 0;
        t = t < 0 || at < t ? at : t;
    }
    return t > 1 << 30 ? 1 << 30 : (int)t;
}
