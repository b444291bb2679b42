/* SPDX-License-Identifier: BSD-3-Clause */
/* What the watch (agent_watch.c) says of the ranks at the job's end: one
 * line of the node's report, every word of it what the driver showed or
 * what the agent saw of the rank's process:
 *   - served: the ranks a control daemon gsrun gave them listed as its
 *     clients (and those a GPU fault then ended);
 *   - each other state counted apart, with its ranks: without MPS, no
 *     device, a client of a server gsrun did not give it, blocked on a
 *     wedged MPS server;
 *   - a rank never seen on the GPU by what is known of it: CUDA never
 *     started in it (libcuda never mapped) and it exited, or it still ran
 *     at the end, or CUDA started without a context MPS or NVML saw.
 * A program without CUDA runs as well with --mps=off, but a program that
 * exited before CUDA because it could not run (a missing library: 127)
 * is no such program: the words that hang on how the job ended carry a
 * mark that gsrun fills with mpirun's status (runtime/files/status_end.h). */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/job/job_int.h"
#include "runtime/files/status_end.h"

/* A rank not seen on the GPU: what the agent knows of it. */
enum { UNSEEN_EXITED, UNSEEN_RUNNING, UNSEEN_NO_CONTEXT, UNSEEN_KINDS };

typedef struct {
    int n[UNSEEN_KINDS];
    char list[UNSEEN_KINDS][128];
} unseen_t;

static int unseen_kind(const gs_attach_rank_t *x)
{
    return x->cuda_ms > 0 ? UNSEEN_NO_CONTEXT : x->gone ? UNSEEN_EXITED : UNSEEN_RUNNING;
}

static void unseen_split(const gs_attach_t *t, unseen_t *u)
{
    unsigned char *pick = calloc((size_t)(t->n > 0 ? t->n : 1), 1);
    memset(u, 0, sizeof(*u));
    for (int k = 0; k < UNSEEN_KINDS && pick != NULL; k++) {
        for (int i = 0; i < t->n; i++) {
            const gs_attach_rank_t *x = &t->r[i];
            pick[i] = x->pid > 0 && x->state == GS_ATTACH_UNSEEN && unseen_kind(x) == k;
            u->n[k] += pick[i];
        }
        gs_attach_ranks_where(t, pick, u->list[k], sizeof(u->list[k]));
    }
    free(pick);
}

static const char *ranks_word(int n)
{
    return n > 1 ? "ranks" : "rank";
}

/* No rank seen on the GPU: why, as far as the agent knows. */
static void none_seen(const gs_agent_t *a, const unseen_t *u, char *buf, size_t len)
{
    const gs_job_t *j = gs_job_const(a);
    size_t used = (size_t)snprintf(buf, len,
                                   "no rank of the %d used the GPU (MPS saw no client, NVML no "
                                   "context of theirs): ",
                                   j->ranks.registered);
    const char *sep = "";
    if (u->n[UNSEEN_EXITED] > 0 && used < len) {
        used += (size_t)snprintf(buf + used, len - used,
                                 "CUDA never started in %s %s: %s exited before using the GPU",
                                 ranks_word(u->n[UNSEEN_EXITED]), u->list[UNSEEN_EXITED],
                                 u->n[UNSEEN_EXITED] > 1 ? "they" : "it");
        sep = ", ";
    }
    if (u->n[UNSEEN_RUNNING] > 0 && used < len) {
        used += (size_t)snprintf(buf + used, len - used,
                                 "%sCUDA never started in %s %s (still running at the end)", sep,
                                 ranks_word(u->n[UNSEEN_RUNNING]), u->list[UNSEEN_RUNNING]);
        sep = ", ";
    }
    if (u->n[UNSEEN_NO_CONTEXT] > 0 && used < len) {
        used += (size_t)snprintf(buf + used, len - used,
                                 "%sCUDA started in %s %s without a context MPS or NVML saw", sep,
                                 ranks_word(u->n[UNSEEN_NO_CONTEXT]), u->list[UNSEEN_NO_CONTEXT]);
    }
    if (used < len) {
        /* The advice only where CUDA started in no rank, and (filled in)
         * only for a job that ended 0. */
        snprintf(buf + used, len - used, "%s",
                 u->n[UNSEEN_NO_CONTEXT] > 0 ? GS_END_MARK_STATUS : GS_END_MARK_ADVICE);
    }
}

void gs_agent_watch_summary(const gs_agent_t *a, char *buf, size_t len)
{
    const gs_job_t *j = gs_job_const(a);
    int c[GS_ATTACH_NSTATES];
    char list[128];
    unseen_t u;
    gs_attach_counts(&j->attach, c);
    buf[0] = '\0';
    if (!j->watching) {
        snprintf(buf, len, "served %d of %d ranks", j->ranks.registered, a->local_size);
        return;
    }
    unseen_split(&j->attach, &u);
    int seen = 0;
    for (int s = GS_ATTACH_UNSEEN + 1; s < GS_ATTACH_NSTATES; s++) {
        seen += c[s];
    }
    if (seen == 0) {
        none_seen(a, &u, buf, len);
        return;
    }
    size_t used = (size_t)snprintf(buf, len, "served %d of %d ranks as MPS clients",
                                   c[GS_ATTACH_CLIENT] + c[GS_ATTACH_FAULTED], a->local_size);
    static const char *const what[GS_ATTACH_NSTATES] = {
        [GS_ATTACH_PLAIN] = "ran on the GPU without MPS",
        [GS_ATTACH_NODEVICE] = "found no device",
        [GS_ATTACH_FAULTED] = "lost their context to a GPU fault",
        [GS_ATTACH_OTHER] = "were MPS clients of a server gsrun did not give them",
        [GS_ATTACH_BLOCKED] = "blocked on a wedged MPS server"};
    for (int s = 0; s < GS_ATTACH_NSTATES && used < len; s++) {
        if (what[s] == NULL || c[s] == 0) {
            continue;
        }
        gs_attach_ranks_in(&j->attach, s, list, sizeof(list));
        used += (size_t)snprintf(buf + used, len - used, "; %d %s (%s %s)", c[s], what[s],
                                 ranks_word(c[s]), list);
    }
    static const char *const unseen_what[UNSEEN_KINDS] = {
        [UNSEEN_EXITED] =
            "exited before using the GPU (%s %s: CUDA never started in them)" GS_END_MARK_STATUS,
        [UNSEEN_RUNNING] = "never used the GPU (%s %s: CUDA never started in them)",
        [UNSEEN_NO_CONTEXT] = "started CUDA without a context MPS or NVML saw (%s %s)"};
    for (int k = 0; k < UNSEEN_KINDS && used < len; k++) {
        if (u.n[k] == 0) {
            continue;
        }
        used += (size_t)snprintf(buf + used, len - used, "; %d ", u.n[k]);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        if (used < len) { /* unseen_what holds this file's literals only */
            used += (size_t)snprintf(buf + used, len - used, unseen_what[k], ranks_word(u.n[k]),
                                     u.list[k]);
        }
#pragma GCC diagnostic pop
    }
}
