/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_int.h"
#include "proc.h"
#include "status.h"

void gs_agent_report(gs_agent_t *a, int problem, const char *fmt, ...)
{
    va_list ap;
    size_t room = sizeof(a->report) - a->report_len;
    int n;
    if (room < 2) {
        return;
    }
    n = snprintf(a->report + a->report_len, room, "%snode %s: ", problem ? "problem: " : "",
                 a->o->node_name);
    if (n < 0 || (size_t)n >= room) {
        return;
    }
    a->report_len += (size_t)n;
    room -= (size_t)n;
    va_start(ap, fmt);
    n = vsnprintf(a->report + a->report_len, room - 1, fmt, ap);
    va_end(ap);
    if (n > 0) {
        a->report_len += (size_t)n < room - 1 ? (size_t)n : room - 2;
    }
    a->report[a->report_len++] = '\n';
    a->report[a->report_len] = '\0';
    a->problems += problem;
}

/* "... {PID: 5480, ..." in an MPS log line names a process: which local rank. */
int gs_agent_rank_of_pid(const gs_agent_t *a, pid_t pid)
{
    for (int i = 0; a->seen != NULL && i < a->registered && i < a->o->local_size; i++) {
        if (a->seen[i].pid == pid) {
            return a->seen[i].rank;
        }
    }
    return -1;
}

static void write_file(const gs_agent_t *a)
{
    char path[512], tmp[520];
    int fd;
    snprintf(path, sizeof(path), "%s/%s.report", a->o->job_dir, a->o->node_name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return;
    }
    dprintf(fd, "gsrun-report problems=%d\n%s", a->problems, a->report);
    close(fd);
    rename(tmp, path);
}

/* The launcher forwards these lines as the node leader's stderr; one write
 * per line keeps them whole among the job's own output. */
static void write_lines(const gs_agent_t *a, const char *text)
{
    const char *p = text;
    while (*p != '\0') {
        size_t n = strcspn(p, "\n");
        if (a->o->cfg.verbose || strncmp(p, "problem: ", 9) == 0) {
            char line[1100];
            int len = snprintf(line, sizeof(line), "gsrun: %.*s\n", (int)(n < 1000 ? n : 1000), p);
            if (write(a->o->report_fd, line, (size_t)len) < 0) {
                return; /* the launcher is gone: nobody to tell */
            }
        }
        p += n + (p[n] == '\n');
    }
}

void gs_agent_deliver_report(const gs_agent_t *a)
{
    if (a->o->gsrun_pid > 1) {
        write_file(a);
    } else if (a->o->report_fd >= 0) {
        write_lines(a, a->report);
    }
    if (a->o->report_fd >= 0) {
        close(a->o->report_fd);
        ((gs_agent_opts_t *)a->o)->report_fd = -1;
    }
}

int gs_agent_report_fd_try(gs_agent_t *a)
{
    gs_agent_opts_t *o = (gs_agent_opts_t *)a->o;
    char path[64];

    if (!o->report_rank0 || o->report_fd >= 0) {
        return -1;
    }
    for (int i = 0; i < a->registered; i++) {
        if (a->seen[i].rank != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%d/fd/2", (int)a->seen[i].pid);
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd >= 0 || errno == ENOENT) {
            o->report_fd = fd; /* gone: nobody to tell */
            o->report_rank0 = 0;
            return -1;
        }
        /* Not dumpable until its exec; a program that stays so never
         * opens: give up after the start-up bound. */
        if (gs_wall_ms() - a->started_ms > (long long)o->cfg.timeout_s * 1000) {
            o->report_rank0 = 0;
            return -1;
        }
        return 20;
    }
    return 50; /* rank 0 has not registered yet */
}

/* The status `gsrun status` shows; rewritten on every change, never read
 * back by the agent. A failure only costs the status display. */
void gs_agent_write_status(const gs_agent_t *a)
{
    static gs_status_t s;
    gs_error_t err;
    int on = a->plan.use_mps && a->ndaemons > 0;

    memset(&s, 0, sizeof(s));
    snprintf(s.mps, sizeof(s.mps), "%s", on ? "on" : "off");
    if (!on) {
        snprintf(s.message, sizeof(s.message), "%s", a->plan.reason);
    }
    s.agent_pid = (int)getpid();
    s.launcher_pid = (int)a->o->watch_pid;
    s.gsrun_pid = (int)a->o->gsrun_pid;
    s.started_ms = a->started_ms;
    s.memory_limit_mb = on ? a->o->cfg.mem_limit_mb : 0;
    s.local_size = a->o->local_size;
    s.registered = a->registered;
    s.alive = a->nranks;
    s.ngpus = a->place_n;
    for (int g = 0; g < a->place_n; g++) {
        gs_status_gpu_t *x = &s.gpu[g];
        snprintf(x->uuid, sizeof(x->uuid), "%s", a->gpus.gpu[g].uuid);
        snprintf(x->name, sizeof(x->name), "%s", a->gpus.gpu[g].name);
        if (g < a->ndaemons) {
            x->daemon_pid = (int)a->daemon[g].daemon_pid;
            x->server_pid = a->daemon[g].nservers > 0 ? (int)a->daemon[g].server_pid[0] : 0;
            snprintf(x->core, sizeof(x->core), "%s", a->pinned[g]);
            if (a->plan.gpu[g].pct_set) {
                gs_policy_format_percentage(a->plan.gpu[g].pct, x->pct, sizeof(x->pct));
            }
        }
        if (a->rank_gpu != NULL) {
            gs_agent_place_ranks_text(a, g, x->ranks, sizeof(x->ranks));
            for (int r = 0; r < a->o->local_size; r++) {
                x->registered += a->rank_gpu[r] == g;
            }
            for (int i = 0; i < a->nranks; i++) {
                x->alive += a->rank_gpu[a->ranks[i].rank] == g;
            }
        }
    }
    gs_status_write(a->node_dir, &s, &err);
}

void gs_agent_mark(gs_agent_t *a, const char *step)
{
    size_t n = strlen(a->timeline);
    if (n + 40 < sizeof(a->timeline)) {
        snprintf(a->timeline + n, sizeof(a->timeline) - n, "%s%s %lld", n ? ", " : "", step,
                 gs_wall_ms() - a->t0_ms);
    }
}
