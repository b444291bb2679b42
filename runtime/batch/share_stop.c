/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun stop`: the user's shared agent is told through its socket in the
 * user's private base ("stop" or "retire", runtime/wire/lease.h); its
 * report comes back on the connection, which it closes as it exits. */
#include "gs_autoconf.h"

#include "runtime/batch/share_stop.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/core/text.h"
#include "runtime/core/unixsock.h"
#include "runtime/files/rundir.h"
#include "runtime/files/share_dir.h"
#include "runtime/files/status.h"
#include "runtime/wire/lease.h"
#include "runtime/wire/protocol.h"

/* --now: the servers' quits are bounded (GS_PROTO_QUIT_TIMEOUT_MS each,
 * side by side); past this the agent is not answering. */
#define STOP_NOW_MS 30000
/* After its connection closed: until its process is gone. */
#define STOP_EXIT_MS 5000

static int gone(pid_t pid)
{
    long long state = gs_proctree_stat_field(pid, GS_STAT_STATE);
    return state < 0 || state == 'Z';
}

/* Copies the agent's lines to out until it closes the connection (0), or
 * -ETIMEDOUT by deadline (0: none), or -EAGAIN once it is seen stopped. */
static int relay(int fd, pid_t pid, FILE *out, long long deadline)
{
    char line[GS_LINE_MAX];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (deadline > 0 && gs_proc_now_ms() >= deadline) {
            return -ETIMEDOUT;
        }
        if (poll(&p, 1, 500) <= 0) {
            if (gs_proctree_stopped(pid)) {
                return -EAGAIN;
            }
            continue;
        }
        long n = gs_proc_read_line(fd, line, sizeof(line), gs_proc_now_ms() + 5000);
        if (n <= 0) {
            return n == -ETIMEDOUT ? -ETIMEDOUT : 0;
        }
        /* The socket is in the user's own base; its text is cleaned all the
         * same (no control characters reach the terminal). */
        gs_text_rstrip(line, "\r\n");
        gs_status_clean(line);
        fprintf(out, "%s\n", line);
        fflush(out);
    }
}

int gs_share_stop(int now, FILE *out, gs_error_t *err)
{
    char dir[600], node_dir[700], node[64], sock[800];
    gs_error_t why;
    gs_rundir_node_name(node, sizeof(node));
    int rc = gs_share_dir_find(0, dir, sizeof(dir), node_dir, sizeof(node_dir), sock, sizeof(sock),
                               NULL, 0, &why);
    if (rc == -ENOENT) {
        gs_error_set(err, ENOENT, "no shared MPS of the user's runs on node %s (%s; a job under "
                     "another TMPDIR keeps its own there)", node, why.text);
        return 1;
    }
    if (rc != 0) {
        return gs_error_set(err, -rc, "%s", why.text);
    }
    int fd = gs_unixsock_connect(sock, NULL);
    if (fd < 0) {
        gs_error_set(err, ENOENT, "no shared MPS of the user's runs on node %s (none answers at "
                     "%s)", node, sock);
        return 1;
    }
    pid_t pid = gs_unixsock_peer(fd);
    const char *ask = now ? GS_LEASE_STOP : GS_LEASE_RETIRE;
    rc = gs_proctree_stopped(pid) ? -EAGAIN
             : send(fd, ask, strlen(ask), MSG_NOSIGNAL) == (ssize_t)strlen(ask)
                 ? relay(fd, pid, out, now ? gs_proc_now_ms() + STOP_NOW_MS : 0)
                 : -EPIPE;
    close(fd);
    if (rc == -EAGAIN) {
        return gs_error_set(err, EAGAIN, "the user's shared MPS agent on node %s (PID %d) is "
                            "stopped (SIGSTOP, or a suspended session) and cannot be told: "
                            "`kill -CONT %d` first, or `kill %d` ends it and its servers",
                            node, (int)pid, (int)pid, (int)pid);
    }
    if (rc != 0) {
        return gs_error_set(err, -rc, "the user's shared MPS agent on node %s (PID %d) did not "
                            "end (%s); `kill %d` ends it and its servers", node, (int)pid,
                            rc == -ETIMEDOUT ? "no answer within 30 s" : strerror(-rc),
                            (int)pid);
    }
    for (long long until = gs_proc_now_ms() + STOP_EXIT_MS;
         pid > 0 && !gone(pid) && gs_proc_now_ms() < until;) {
        usleep(10000);
    }
    return 0;
}
