/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether an MPS control daemon and its servers answer (mps_probe.h). */
#include "gs_autoconf.h"

#include "runtime/gpu/mps_probe.h"

#include <dirent.h>
#include <poll.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/proc.h"

/* A process that is gone or a zombie: nothing there answers or holds. */
static int gone(pid_t pid)
{
    char f[64];
    return pid <= 1 || gs_proc_stat_fields(NULL, pid, f, sizeof(f)) != 0 || f[0] == 'Z' ||
           f[0] == 'X';
}

/* Stopped by a signal (state T) and still so 200 ms later: a job that
 * Slurm resumes gets SIGCONT process by process, and a tracer's stop (t:
 * strace, gdb) is nobody's wedge. Rare: only a process seen stopped waits. */
static int stays_stopped(pid_t pid)
{
    char f[64];
    if (pid <= 1 || gs_proc_stat_fields(NULL, pid, f, sizeof(f)) != 0 || f[0] != 'T') {
        return 0;
    }
    poll(NULL, 0, 200);
    return gs_proc_stat_fields(NULL, pid, f, sizeof(f)) == 0 && f[0] == 'T';
}

/* The children of pid (an MPS daemon's: its servers), read from each of
 * its threads' children lists: how many, at most max in out. */
static int children_of(pid_t pid, pid_t *out, int max)
{
    char path[96], buf[4096];
    int n = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *dir = opendir(path);
    struct dirent *de;
    while (dir != NULL && (de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", (int)pid, de->d_name);
        FILE *f = fopen(path, "re");
        size_t got = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f != NULL) {
            fclose(f);
        }
        buf[got] = '\0';
        for (char *p = buf, *end; *p != '\0' && n < max; p = end) {
            long c = strtol(p, &end, 10);
            if (end == p) {
                break;
            }
            if (c > 1) {
                out[n++] = (pid_t)c;
            }
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return n;
}

int gs_mps_probe(gs_mps_daemon_t *d, const char *control, int bound_ms, char *why, size_t len)
{
    char reply[1024];
    pid_t pids[GS_MPS_MAX_SERVERS];
    gs_error_t err;
    pid_t dp = d->daemon_pid;

    why[0] = '\0';
    if (gone(dp)) {
        return GS_MPS_PROBE_GONE;
    }
    /* Stopped: it answers nothing until resumed, and nobody resumes it. */
    if (stays_stopped(dp)) {
        snprintf(why, len, "the MPS control daemon %d is stopped (state T)", (int)dp);
        return GS_MPS_PROBE_WEDGED;
    }
    for (int i = 0; i < d->nservers && i < GS_MPS_MAX_SERVERS; i++) {
        /* A recorded PID counts only through its pidfd (it may be reused). */
        if (d->server_pidfd[i] >= 0 && gs_proc_alive(d->server_pid[i], d->server_pidfd[i]) &&
            stays_stopped(d->server_pid[i])) {
            snprintf(why, len, "MPS server %d (of control daemon %d) is stopped (state T)",
                     (int)d->server_pid[i], (int)dp);
            return GS_MPS_PROBE_WEDGED;
        }
    }
    if (bound_ms <= 0) {
        /* It answered a moment ago: the processes alone. Its servers' PIDs
         * may not be known yet (they are asked for once a new server has
         * set up its context, while the daemon answers nothing): then its
         * children are its servers. A question now would wait out that
         * silence, and hold up every lease behind it. */
        pid_t kids[GS_MPS_MAX_SERVERS];
        int known = d->nservers > 0 && d->server_pidfd[0] >= 0; /* looked at above */
        int n = known ? 0 : children_of(dp, kids, GS_MPS_MAX_SERVERS);
        for (int i = 0; i < n; i++) {
            if (stays_stopped(kids[i])) {
                snprintf(why, len, "MPS server %d (of control daemon %d) is stopped (state T)",
                         (int)kids[i], (int)dp);
                return GS_MPS_PROBE_WEDGED;
            }
        }
        return GS_MPS_PROBE_OK;
    }
    long long t0 = gs_proc_now_ms();
    int rc = gs_mps_command(control, d->pipe_dir, "get_server_list", reply, sizeof(reply),
                            bound_ms, &err);
    if (rc == -ETIMEDOUT) {
        snprintf(why, len, "the MPS control daemon %d did not answer get_server_list within %d ms",
                 (int)dp, bound_ms);
        return GS_MPS_PROBE_WEDGED;
    }
    if (rc != 0) {
        /* It answered, or its client could not reach it: not a wedge to act
         * on (when in doubt, gsrun tells and does not end it). */
        snprintf(why, len, "%s", err.text);
        return gone(dp) ? GS_MPS_PROBE_GONE : GS_MPS_PROBE_OK;
    }
    int n = gs_mps_parse_server_list(reply, pids, GS_MPS_MAX_SERVERS);
    for (int i = 0; i < n; i++) {
        if (stays_stopped(pids[i])) {
            snprintf(why, len, "MPS server %d (of control daemon %d) is stopped (state T)",
                     (int)pids[i], (int)dp);
            return GS_MPS_PROBE_WEDGED;
        }
    }
    snprintf(why, len, "answered in %lld ms", gs_proc_now_ms() - t0);
    return GS_MPS_PROBE_OK;
}

/* SIGKILL to every child of pid (its MPS servers: the daemon starts them).
 * A wedged daemon reaps none of them, so their PIDs stay theirs. */
static void kill_children(pid_t pid)
{
    pid_t kids[256];
    int n = children_of(pid, kids, 256);
    for (int i = 0; i < n; i++) {
        kill(kids[i], SIGKILL);
    }
}

void gs_mps_end_wedged(gs_mps_daemon_t *d)
{
    pid_t dp = d->daemon_pid;
    if (dp > 1 && !d->daemon_reaped) {
        kill_children(dp);
    }
    for (int i = 0; i < d->nservers && i < GS_MPS_MAX_SERVERS; i++) {
        if (d->server_pid[i] > 1 && d->server_pidfd[i] >= 0) {
            /* Through its pidfd only: a bare PID recorded long ago may be
             * anyone's now (a live server is the daemon's child, above). */
            gs_proc_signal(d->server_pid[i], d->server_pidfd[i], SIGKILL);
        }
        if (d->server_pidfd[i] >= 0) {
            close(d->server_pidfd[i]);
        }
        d->server_pidfd[i] = -1;
        d->server_pid[i] = 0;
    }
    d->nservers = 0;
    if (dp > 1 && !d->daemon_reaped) {
        kill(dp, SIGKILL); /* our child: its PID is not reused before it is reaped */
        if (gs_proc_wait(dp, 2000, &d->daemon_status) == 0) {
            d->daemon_reaped = 1;
        }
    }
    d->daemon_pid = 0;
}
