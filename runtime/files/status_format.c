/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun status` output: text for people, JSON for tools (gsrun(1)). */
#include "gs_autoconf.h"

#include <string.h>

#include "runtime/files/status.h"

void gs_status_print_text(FILE *f, const gs_status_t *s, int n, long long now_ms)
{
    for (int j = 0; j < n; j++, s++) {
        if (s->stale) {
            fprintf(f, "job %s (uid %d): stale: its agent %d is gone; left behind: %s (the next "
                       "gsrun job of its user removes it)\n",
                    s->job, s->uid, s->agent_pid, s->job_dir);
            continue;
        }
        if (strcmp(s->mps, "starting") == 0) {
            fprintf(f, "job %s (uid %d): starting (no agent status yet)\n", s->job, s->uid);
            continue;
        }
        if (strcmp(s->shared, "node") == 0) {
            /* The user's shared MPS (--mps-share=node): its servers and
             * the jobs each serves. */
            fprintf(f, "shared MPS %s (uid %d): agent %d, up %.1f s, %d job%s\n", s->job, s->uid,
                    s->agent_pid, gs_status_uptime_s(s, now_ms), s->alive,
                    s->alive == 1 ? "" : "s");
            for (int g = 0; g < s->nservers; g++) {
                const gs_status_server_t *x = &s->server[g];
                fprintf(f, "  GPU %d server %d of %d (%s, %s): daemon %d on %s, server %d, pipe %s, "
                           "jobs %s\n",
                        x->gpu, x->server, x->gpu_servers, x->name, x->uuid, x->daemon_pid,
                        x->core, x->server_pid, x->pipe_dir, x->jobs[0] ? x->jobs : "none");
            }
            continue;
        }
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
            const gs_status_server_t *x = &s->server[g];
            if (x->gpu_servers > 1) {
                fprintf(f, "  GPU %d server %d of %d (%s, %s):", x->gpu, x->server, x->gpu_servers,
                        x->name, x->uuid);
            } else {
                fprintf(f, "  GPU %d (%s, %s):", x->gpu_servers > 0 ? x->gpu : g, x->name, x->uuid);
            }
            if (x->daemon_pid > 0) {
                fprintf(f, " daemon %d on %s, server %d, %s%%, pipe %s,", x->daemon_pid, x->core,
                        x->server_pid, x->pct[0] ? x->pct : "100",
                        x->pipe_dir[0] ? x->pipe_dir : "?");
            }
            fprintf(f, " ranks %s: %d registered, %d alive\n", x->ranks[0] ? x->ranks : "none",
                    x->registered, x->alive);
        }
    }
}

void gs_status_print_json(FILE *f, const char *node, const gs_status_t *s, int n,
                          long long now_ms)
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
        fputs("]}", f);
    }
    fputs("]}\n", f);
}
