/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/agent/report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/files/preflight.h" /* GS_OWNER_FILE */
#include "runtime/files/status_end.h"
#include "runtime/core/proc.h"

void gs_report_init(gs_report_t *r, const char *node_name, int verbose, long long t0_ms)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->node_name, sizeof(r->node_name), "%s", node_name);
    r->verbose = verbose;
    r->t0_ms = t0_ms;
    r->fd = -1;
}

void gs_report_add(gs_report_t *r, int problem, const char *fmt, ...)
{
    va_list ap;
    size_t room = sizeof(r->text) - r->len;
    int n;
    if (room < 2) {
        return;
    }
    n = snprintf(r->text + r->len, room, "%snode %s: ", problem ? "problem: " : "", r->node_name);
    if (n < 0 || (size_t)n >= room) {
        return;
    }
    r->len += (size_t)n;
    room -= (size_t)n;
    va_start(ap, fmt);
    n = vsnprintf(r->text + r->len, room - 1, fmt, ap);
    va_end(ap);
    if (n > 0) {
        r->len += (size_t)n < room - 1 ? (size_t)n : room - 2;
    }
    r->text[r->len++] = '\n';
    r->text[r->len] = '\0';
    r->problems += problem;
}

int gs_report_tell(gs_report_t *r, const char *fmt, ...)
{
    char text[1600], line[1800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    /* One write: whole among the job's own lines. */
    int len = snprintf(line, sizeof(line), "gsrun: node %s: %s\n", r->node_name, text);
    int told = r->fd >= 0 && r->sink != GS_SINK_NOWHERE && r->sink != GS_SINK_EPILOG &&
               len > 0 && write(r->fd, line, (size_t)len) == len;
    if (told) {
        r->told++;
    } else {
        gs_report_add(r, 1, "%s", text);
    }
    return told;
}

void gs_report_clear(gs_report_t *r)
{
    r->len = 0;
    r->text[0] = '\0';
    r->problems = 0;
}

void gs_report_mark(gs_report_t *r, const char *step)
{
    size_t n = strlen(r->timeline);
    if (n + 40 < sizeof(r->timeline)) {
        snprintf(r->timeline + n, sizeof(r->timeline) - n, "%s%s %lld", n ? ", " : "", step,
                 gs_proc_wall_ms() - r->t0_ms);
    }
}

void gs_report_to_file(gs_report_t *r, const char *job_dir)
{
    r->sink = GS_SINK_FILE;
    snprintf(r->job_dir, sizeof(r->job_dir), "%s", job_dir);
}

void gs_report_to_fd(gs_report_t *r, gs_sink_t sink, int fd)
{
    if (r->fd >= 0 && r->fd != fd) {
        close(r->fd);
    }
    r->sink = sink;
    r->fd = fd;
}

void gs_report_file_path(const char *job_dir, const char *node_name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s.report", job_dir, node_name);
}

static void write_file(const gs_report_t *r)
{
    char path[512], tmp[520];
    int fd;
    gs_report_file_path(r->job_dir, r->node_name, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return;
    }
    dprintf(fd, "gsrun-report problems=%d fault_end=%d\n%s", r->problems, r->fault_end, r->text);
    close(fd);
    rename(tmp, path);
}

static void write_lines(const gs_report_t *r)
{
    const char *p = r->text;
    while (*p != '\0') {
        size_t n = strcspn(p, "\n");
        if (r->verbose || strncmp(p, "problem: ", 9) == 0) {
            char raw[1100], line[1300];
            /* No launcher here to say how the job ended: its marks filled
             * for a status unknown (status_end.h). */
            snprintf(raw, sizeof(raw), "gsrun: %.*s\n", (int)(n < 1000 ? n : 1000), p);
            gs_status_end_fill(raw, -1, line, sizeof(line));
            size_t len = strlen(line);
            if (write(r->fd, line, len) < 0) {
                return; /* the launcher is gone: nobody to tell */
            }
        }
        p += n + (p[n] == '\n');
    }
}

void gs_report_close(gs_report_t *r)
{
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
}

void gs_report_write(gs_report_t *r)
{
    if (r->delivered) {
        return;
    }
    r->delivered = 1;
    if (r->sink == GS_SINK_FILE) {
        write_file(r);
    } else if (r->sink != GS_SINK_NOWHERE && r->fd >= 0) {
        write_lines(r);
    }
}

void gs_report_deliver(gs_report_t *r)
{
    gs_report_write(r);
    gs_report_close(r);
}

int gs_report_open_rank0(gs_report_t *r, pid_t pid, long long now_ms, long long give_up_ms)
{
    char path[64];

    if (r->sink != GS_SINK_RANK0 || r->fd >= 0) {
        return -1;
    }
    if (pid <= 0) {
        return 50; /* rank 0 has not registered yet */
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/2", (int)pid);
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0 || errno == ENOENT) {
        gs_report_to_fd(r, fd >= 0 ? GS_SINK_LEADER_FD : GS_SINK_NOWHERE, fd);
        return -1; /* gone: nobody to tell */
    }
    /* Not dumpable until its exec; a program that stays so never opens:
     * give up after the start-up bound. */
    if (now_ms > give_up_ms) {
        gs_report_to_fd(r, GS_SINK_NOWHERE, -1);
        return -1;
    }
    return 20;
}

void gs_report_drop_job_dir(const char *job_dir, const char *node_name)
{
    char path[512];

    gs_report_file_path(job_dir, node_name, path, sizeof(path));
    unlink(path);
    snprintf(path, sizeof(path), "%s/%s", job_dir, GS_OWNER_FILE);
    unlink(path);
    rmdir(job_dir);
}
