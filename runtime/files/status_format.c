/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun status` output: text for people, JSON for tools (gsrun(1)). */
#include "gs_autoconf.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/files/status.h"

/* "GPU 2", the node's number as nvidia-smi shows it, and the job's own
 * where its CUDA_VISIBLE_DEVICES renumbers the GPUs ("GPU 2, the job's 0"). */
static void server_title(FILE *f, const gs_status_server_t *x, int job_gpu, int shared)
{
    fprintf(f, "  GPU %d", x->node_gpu);
    if (!shared && job_gpu != x->node_gpu) {
        fprintf(f, ", the job's %d", job_gpu);
    }
    if (x->gpu_servers > 1) {
        fprintf(f, " server %d of %d", x->server, x->gpu_servers);
    }
    fprintf(f, " (%s, %s):", x->name, x->uuid);
}

/* A server's PID, or that its daemon has not started it (no PID yet: MPS
 * starts a server when the first client comes, unless pre-started). */
static void server_pid(FILE *f, int pid)
{
    if (pid > 0) {
        fprintf(f, "server %d", pid);
    } else {
        fprintf(f, "no server process yet");
    }
}

/* " 530 MiB" of memory NVML gave, or that it could not tell. */
static void mib(FILE *f, const char *what, long long m)
{
    if (m >= 0) {
        fprintf(f, "%s%lld MiB", what, m);
    } else {
        fprintf(f, "%sunknown", what);
    }
}

/* Server entry g's ranks, one line each: its MPS state and its GPU memory
 * as the driver shows them. */
static void rank_lines(FILE *f, const gs_status_t *s, int g)
{
    for (int i = 0; i < s->nranks; i++) {
        const gs_status_rank_t *r = &s->rank[i];
        if (r->entry != g || r->pid <= 0) {
            continue;
        }
        fprintf(f, "    rank %d (pid %d): %s, ", r->rank, r->pid, r->state);
        if (r->alive) {
            mib(f, "GPU memory ", r->memory_mib);
            mib(f, ", peak ", r->peak_mib);
        } else {
            mib(f, "exited, peak GPU memory ", r->peak_mib);
        }
        fputc('\n', f);
    }
}

/* A server's fault and wedge, under its line. */
static void server_notes(FILE *f, const gs_status_server_t *x)
{
    if (x->fault[0] != '\0') {
        fprintf(f, "    FAULT: %s\n", x->fault);
    }
    if (x->wedged[0] != '\0') {
        fprintf(f, "    WEDGED: %s\n", x->wedged);
    }
}

/* The user's shared MPS (--mps-share=node): its servers and the jobs each
 * serves. */
static void print_shared(FILE *f, const gs_status_t *s, long long now_ms)
{
    fprintf(f, "shared MPS %s (uid %d): agent %d, up %.1f s, %d job%s\n", s->job, s->uid,
            s->agent_pid, gs_status_uptime_s(s, now_ms), s->alive, s->alive == 1 ? "" : "s");
    for (int g = 0; g < s->nservers; g++) {
        const gs_status_server_t *x = &s->server[g];
        server_title(f, x, x->gpu, 1);
        if (x->daemon_pid > 0) {
            fprintf(f, " daemon %d on %s, ", x->daemon_pid, x->core);
            server_pid(f, x->server_pid);
            fprintf(f, ", pipe %s, ", x->pipe_dir);
        } else {
            fprintf(f, " control daemon exited, ");
        }
        fprintf(f, "jobs %s", x->jobs[0] ? x->jobs : "none");
        if (x->server_mib >= 0) {
            fprintf(f, "; GPU memory: server %lld MiB", x->server_mib);
        }
        fputc('\n', f);
        server_notes(f, x);
    }
}

/* Job s's server g: its line, then its ranks'. */
static void print_job_server(FILE *f, const gs_status_t *s, int g)
{
    const gs_status_server_t *x = &s->server[g];
    server_title(f, x, x->gpu_servers > 0 ? x->gpu : g, 0);
    if (x->daemon_pid > 0) {
        fprintf(f, " daemon %d on %s, ", x->daemon_pid, x->core);
        server_pid(f, x->server_pid);
        fprintf(f, ", %s%%, pipe %s,", x->pct[0] ? x->pct : "100",
                x->pipe_dir[0] ? x->pipe_dir : "?");
    }
    fprintf(f, " ranks %s: %d registered, %d alive", x->ranks[0] ? x->ranks : "none",
            x->registered, x->alive);
    if (x->clients[0] != '\0') {
        /* What MPS says, not what gsrun set: "3/4 2:no-mps". */
        fprintf(f, ", MPS clients %s", x->clients);
    }
    if (s->memory_every_ms > 0 && s->shared[0] != '\0') {
        /* the shared server's own memory is on the shared MPS's line */
        mib(f, "; GPU memory: the job's clients ", x->clients_mib);
    } else if (s->memory_every_ms > 0) {
        mib(f, "; GPU memory: server ", x->server_mib);
        mib(f, ", its clients ", x->clients_mib);
    }
    fputc('\n', f);
    rank_lines(f, s, g);
    server_notes(f, x);
}

static void print_job(FILE *f, const gs_status_t *s, long long now_ms)
{
    fprintf(f, "job %s (uid %d): agent %d, launcher %d", s->job, s->uid, s->agent_pid,
            s->launcher_pid);
    if (s->gsrun_pid > 0) {
        fprintf(f, ", gsrun %d", s->gsrun_pid);
    }
    fprintf(f, ", up %.1f s, MPS %s, %d of %d ranks registered, %d alive",
            gs_status_uptime_s(s, now_ms), s->mps, s->registered, s->local_size, s->alive);
    if (s->memory_limit_mb > 0) {
        fprintf(f, ", memory limit %lld MiB per rank", s->memory_limit_mb);
    }
    fputc('\n', f);
    if (s->message[0] != '\0') {
        fprintf(f, "  %s\n", s->message);
    }
    if (s->shared[0] != '\0') {
        fprintf(f, "  MPS servers shared with the user's other jobs (%s)\n", s->shared);
    }
    for (int g = 0; g < s->nservers; g++) {
        print_job_server(f, s, g);
    }
}

void gs_status_print_text(FILE *f, const gs_status_t *s, int n, long long now_ms)
{
    for (int j = 0; j < n; j++, s++) {
        if (s->stale && s->agent_pid <= 0) {
            /* Its agent never wrote a status: the reader said why. */
            fprintf(f, "job %s (uid %d): stale: %s; left behind: %s\n", s->job, s->uid,
                    s->message, s->job_dir);
        } else if (s->stale) {
            fprintf(f, "job %s (uid %d): stale: its agent %d is gone; left behind: %s (the next "
                       "gsrun job of its user removes it)\n",
                    s->job, s->uid, s->agent_pid, s->job_dir);
        } else if (strcmp(s->mps, "starting") == 0) {
            fprintf(f, "job %s (uid %d): starting (no agent status yet)\n", s->job, s->uid);
        } else if (strcmp(s->shared, "node") == 0) {
            print_shared(f, s, now_ms);
        } else {
            print_job(f, s, now_ms);
        }
    }
}

void gs_status_print_placement(FILE *f, const gs_ledger_summary_t *pl, const char *dir,
                               int (*gpu_of)(const char *uuid))
{
    if (pl == NULL || pl->n == 0) {
        return;
    }
    fprintf(f, "the user's jobs by GPU (placement record %s):\n", dir);
    for (int g = 0; g < pl->n; g++) {
        int idx = gpu_of != NULL ? gpu_of(pl->gpu[g].uuid) : -1;
        if (idx >= 0) {
            fprintf(f, "  GPU %d (%s):", idx, pl->gpu[g].uuid);
        } else {
            fprintf(f, "  %s:", pl->gpu[g].uuid);
        }
        fprintf(f, " %d job%s, %d rank%s: %s", pl->gpu[g].njobs, pl->gpu[g].njobs == 1 ? "" : "s",
                pl->gpu[g].ranks, pl->gpu[g].ranks == 1 ? "" : "s", pl->gpu[g].jobs);
        if (pl->gpu[g].more > 0) {
            fprintf(f, " and %d more", pl->gpu[g].more);
        }
        fputc('\n', f);
    }
}

void gs_status_print_json(FILE *f, const char *node, const gs_status_t *s, int n,
                          long long now_ms)
{
    gs_status_print_json_placed(f, node, s, n, now_ms, NULL, NULL);
}

/* "job:3 job2:1" as [{"job":"job","ranks":3},...]. */
static void json_jobs(FILE *f, const char *jobs)
{
    char buf[sizeof(((gs_ledger_summary_t *)0)->gpu[0].jobs)], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", jobs);
    fputc('[', f);
    int first = 1;
    for (char *w = strtok_r(buf, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
        char *colon = strrchr(w, ':');
        if (colon == NULL) {
            continue;
        }
        *colon = '\0';
        fputs(first ? "{\"job\":" : ",{\"job\":", f);
        gs_rec_json_str(f, w);
        fprintf(f, ",\"ranks\":%d}", atoi(colon + 1));
        first = 0;
    }
    fputc(']', f);
}

void gs_status_print_json_placed(FILE *f, const char *node, const gs_status_t *s, int n,
                                 long long now_ms, const gs_ledger_summary_t *pl,
                                 int (*gpu_of)(const char *uuid))
{
    fputs("{\"version\":1,\"node\":", f);
    gs_rec_json_str(f, node);
    fputs(",\"jobs\":[", f);
    for (int j = 0; j < n; j++, s++) {
        fputs(j ? ",{" : "{", f);
        gs_rec_json(f, gs_status_fields, s, &now_ms);
        fputs(",\"gpus\":[", f);
        for (int g = 0; g < s->nservers; g++) {
            fputs(g ? ",{" : "{", f);
            gs_rec_json(f, gs_status_server_fields, &s->server[g], &g);
            fputc('}', f);
        }
        fputs("],\"ranks\":[", f);
        for (int r = 0; r < s->nranks; r++) {
            fputs(r ? ",{" : "{", f);
            gs_rec_json(f, gs_status_rank_fields, &s->rank[r], s);
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputc(']', f);
    if (pl != NULL) {
        fputs(",\"placement\":[", f);
        for (int g = 0; g < pl->n; g++) {
            fputs(g ? ",{\"uuid\":" : "{\"uuid\":", f);
            gs_rec_json_str(f, pl->gpu[g].uuid);
            fprintf(f, ",\"gpu\":%d,\"ranks\":%d,\"more_jobs\":%d,\"jobs\":",
                    gpu_of != NULL ? gpu_of(pl->gpu[g].uuid) : -1, pl->gpu[g].ranks,
                    pl->gpu[g].more);
            json_jobs(f, pl->gpu[g].jobs);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
}
