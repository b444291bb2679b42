/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun status` output: text for people, JSON for tools (gsrun(1)). */
#include "gs_autoconf.h"

#include <string.h>

#include "runtime/files/status.h"

static const char *state_of(const gs_status_t *s)
{
    if (s->stale) {
        return "stale";
    }
    return strcmp(s->mps, "starting") == 0 ? "starting" : "running";
}

static double uptime_s(const gs_status_t *s, long long now_ms)
{
    return s->started_ms > 0 && now_ms > s->started_ms ? (double)(now_ms - s->started_ms) / 1000.0
                                                      : 0.0;
}

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
        fprintf(f, "job %s (uid %d): agent %d, launcher %d", s->job, s->uid, s->agent_pid,
                s->launcher_pid);
        if (s->gsrun_pid > 0) {
            fprintf(f, ", gsrun %d", s->gsrun_pid);
        }
        fprintf(f, ", up %.1f s, MPS %s, %d of %d ranks registered, %d alive", uptime_s(s, now_ms),
                s->mps, s->registered, s->local_size, s->alive);
        if (s->memory_limit_mb > 0) {
            fprintf(f, ", memory limit %lld MiB per rank", s->memory_limit_mb);
        }
        fputc('\n', f);
        if (s->message[0] != '\0') {
            fprintf(f, "  %s\n", s->message);
        }
        for (int g = 0; g < s->ngpus; g++) {
            const gs_status_gpu_t *x = &s->gpu[g];
            if (x->nservers > 1) {
                fprintf(f, "  GPU %d server %d of %d (%s, %s):", x->gpu, x->server, x->nservers,
                        x->name, x->uuid);
            } else {
                fprintf(f, "  GPU %d (%s, %s):", x->nservers > 0 ? x->gpu : g, x->name, x->uuid);
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

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void json_gpu(FILE *f, int g, const gs_status_gpu_t *x)
{
    /* Files without the server lines have one server per GPU, in order. */
    fprintf(f, "{\"index\":%d,\"uuid\":", x->nservers > 0 ? x->gpu : g);
    json_str(f, x->uuid);
    fputs(",\"name\":", f);
    json_str(f, x->name);
    fprintf(f, ",\"server\":%d,\"servers\":%d,\"pipe_dir\":", x->server,
            x->nservers > 0 ? x->nservers : 1);
    json_str(f, x->pipe_dir);
    fprintf(f, ",\"daemon_pid\":%d,\"server_pid\":%d,\"core\":", x->daemon_pid, x->server_pid);
    json_str(f, x->core);
    fputs(",\"percentage\":", f);
    if (x->pct[0] != '\0') {
        json_str(f, x->pct);
    } else {
        fputs("null", f);
    }
    fputs(",\"ranks\":", f);
    json_str(f, x->ranks);
    fprintf(f, ",\"registered\":%d,\"alive\":%d}", x->registered, x->alive);
}

void gs_status_print_json(FILE *f, const char *node, const gs_status_t *s, int n,
                          long long now_ms)
{
    fputs("{\"version\":1,\"node\":", f);
    json_str(f, node);
    fputs(",\"jobs\":[", f);
    for (int j = 0; j < n; j++, s++) {
        fputs(j ? ",{\"job\":" : "{\"job\":", f);
        json_str(f, s->job);
        fprintf(f, ",\"uid\":%d,\"state\":\"%s\",\"mps\":", s->uid, state_of(s));
        json_str(f, s->mps);
        fputs(",\"message\":", f);
        json_str(f, s->message);
        fputs(",\"job_dir\":", f);
        json_str(f, s->job_dir);
        fprintf(f,
                ",\"agent_pid\":%d,\"launcher_pid\":%d,\"gsrun_pid\":%d,\"uptime_s\":%.3f,"
                "\"local_size\":%d,\"registered\":%d,\"alive\":%d,\"memory_limit_mb\":%lld,"
                "\"gpus\":[",
                s->agent_pid, s->launcher_pid, s->gsrun_pid, uptime_s(s, now_ms), s->local_size,
                s->registered, s->alive, s->memory_limit_mb);
        for (int g = 0; g < s->ngpus; g++) {
            if (g) {
                fputc(',', f);
            }
            json_gpu(f, g, &s->gpu[g]);
        }
        fputs("]}", f);
    }
    fputs("]}\n", f);
}
