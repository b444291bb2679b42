/* SPDX-License-Identifier: BSD-3-Clause */
/* Stopping an MPS control daemon and its servers, leaving nothing.
 *
 * What bounds it (measured on an H200, tests/bench/mps_teardown.sh and
 * doc/benchmarks.md): the server's own exit, 70 to 170 ms from the last
 * client's exit until the whole process is gone (its GPU context), whether
 * it is told by quit, by "shutdown_server PID [-f]" or the daemon by
 * SIGTERM. So quit stays, and the quits of several GPUs' daemons are sent
 * before waiting for any, so that their servers end together. */
#include "gs_autoconf.h"

#include "runtime/gpu/mps.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"

void gs_mps_quit_begin(gs_mps_daemon_t *d, const char *control, int timeout_ms)
{
    d->quit_sent = 0;
    if (d->daemon_pid > 1 && !gs_mps_daemon_exited(d)) {
        d->quit_rc = gs_mps_command(control, d->pipe_dir, "quit", NULL, 0, timeout_ms,
                                    &d->quit_err);
        d->quit_sent = 1;
    }
}

int gs_mps_stop(gs_mps_daemon_t *d, const char *control, int quit_timeout_ms, char *note,
                size_t notelen)
{
    int escalated = 0;
    long long deadline = gs_proc_now_ms() + quit_timeout_ms;

    if (note != NULL && notelen > 0) {
        note[0] = '\0';
    }
    if (d->daemon_pid > 1 && !gs_mps_daemon_exited(d)) {
        if (!d->quit_sent) {
            gs_mps_quit_begin(d, control, quit_timeout_ms);
        }
        long long left = deadline - gs_proc_now_ms();
        if (d->quit_rc != 0 && left > 200) {
            left = 200; /* quit did not reach it (no socket, say): it will not go by itself */
        }
        if (gs_proc_wait(d->daemon_pid, left > 0 ? (int)left : 0, &d->daemon_status) == 0) {
            d->daemon_reaped = 1;
        } else {
            escalated = 1;
            gs_proc_stop_child(d->daemon_pid, 2000, &d->daemon_status);
            d->daemon_reaped = 1;
            if (note != NULL && d->quit_rc != 0) {
                /* Not a slow quit: none reached it (a fork that failed, no
                 * socket): say what failed. */
                snprintf(note, notelen, "quit could not be sent to the control daemon (%s); "
                         "stopped with SIGTERM/SIGKILL",
                         d->quit_err.text);
            } else if (note != NULL) {
                snprintf(note, notelen, "control daemon did not quit within %d ms; stopped with "
                         "SIGTERM/SIGKILL",
                         quit_timeout_ms);
            }
        }
    }
    /* The servers exit with their daemon; one that does not is stopped by
     * the PID we recorded (through its pidfd, so never a recycled PID). */
    for (int i = 0; i < d->nservers; i++) {
        int fd = d->server_pidfd[i];
        pid_t pid = d->server_pid[i];
        if (pid > 1 && gs_proc_alive(pid, fd) && fd >= 0) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 2000) == 0) {
                escalated = 1;
                gs_proc_signal(pid, fd, SIGTERM);
                if (poll(&p, 1, 2000) == 0) {
                    gs_proc_signal(pid, fd, SIGKILL);
                }
                if (note != NULL && note[0] == '\0') {
                    snprintf(note, notelen, "MPS server %d outlived its control daemon; stopped",
                             (int)pid);
                }
            }
        }
        if (fd >= 0) {
            close(fd);
        }
        d->server_pidfd[i] = -1;
        d->server_pid[i] = 0;
    }
    d->nservers = 0;
    d->daemon_pid = 0;
    d->quit_sent = 0;
    return escalated;
}
