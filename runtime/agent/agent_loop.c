/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's one event loop: its socket, its signals, the ranks' exits and
 * the launcher, for every state that waits (sizing, serving, holding,
 * failed). Connections are read without blocking, each until its line is
 * whole, and dispatched through the caller's table of messages (verb, the
 * states that take it, handler), as flux-core's modules dispatch theirs:
 * a new message is a row and a function, not a loop of its own. */
#include "gs_autoconf.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/agent/agent_int.h"
#include "runtime/core/proc.h"
#include "runtime/core/unixsock.h"
#include "runtime/wire/protocol.h"

const char *gs_agent_read_signals(gs_agent_t *a)
{
    struct signalfd_siginfo si;
    const char *why = NULL;
    while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo != SIGCHLD) {
            why = "the agent was told to stop";
            continue;
        }
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            if (gs_guard_is(&a->guard, pid)) {
                a->guard.pid = 0;
                gs_report_add(&a->report, 1,
                              "the agent's guard exited early; the agent goes on "
                              "without it");
            } else {
                gs_daemons_reaped(&a->daemons, pid, st);
            }
        }
    }
    return why;
}

int gs_agent_listen(gs_agent_t *a, gs_error_t *err)
{
    if ((size_t)snprintf(a->sock, sizeof(a->sock), "%s/%s", a->node_dir, GS_PROTO_SOCKET) >=
        sizeof(a->sock)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "agent socket path '%s' is too long; set TMPDIR "
                            "to a shorter directory",
                            a->sock);
    }
    int fd = gs_unixsock_listen(a->sock, err);
    if (fd < 0) {
        return fd;
    }
    a->listen_fd = fd;
    return 0;
}

void gs_agent_loop_end(gs_agent_t *a, const char *why)
{
    if (a->loop_end == NULL) {
        a->loop_end = why;
    }
}

/* --- connections ---------------------------------------------------------- */

/* A connection is kept until its line is whole (a newline, the end of its
 * data, or the buffer full), for at most GS_AGENT_LINE_MS; past
 * GS_AGENT_CONN_MAX open at once the oldest is dropped. A slow or silent
 * peer (or many) delays nobody: a real peer writes its line as it connects. */
#define GS_AGENT_CONN_MAX 64
#define GS_AGENT_LINE_MS 2000

typedef struct {
    gs_agent_conn_t c[GS_AGENT_CONN_MAX];
    int n;
} conns_t;

static void conn_drop(conns_t *q, int i)
{
    close(q->c[i].fd);
    q->c[i] = q->c[--q->n];
}

/* The job's user, or root (a batch job's epilog): the node dir is 0700, so
 * anyone else is a stale or hostile peer, refused at once. */
static void conn_take(gs_agent_t *a, conns_t *q)
{
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
        return;
    }
    if (q->n == GS_AGENT_CONN_MAX) {
        int oldest = 0;
        for (int i = 1; i < q->n; i++) {
            oldest = q->c[i].deadline < q->c[oldest].deadline ? i : oldest;
        }
        conn_drop(q, oldest);
    }
    gs_agent_conn_t *c = &q->c[q->n];
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
        (cred.uid != getuid() && cred.uid != 0)) {
        close(fd);
        return;
    }
    c->pid = cred.pid;
    c->uid = cred.uid;
    c->fd = fd;
    c->len = 0;
    c->line[0] = '\0';
    c->deadline = gs_proc_now_ms() + GS_AGENT_LINE_MS;
    q->n++;
}

/* 1 once the line is whole, 0 for more to come, -1 when the peer failed. */
static int conn_read(gs_agent_conn_t *c)
{
    ssize_t r = read(c->fd, c->line + c->len, sizeof(c->line) - 1 - c->len);
    if (r > 0) {
        c->len += (size_t)r;
        c->line[c->len] = '\0';
        return strchr(c->line, '\n') != NULL || c->len + 1 >= sizeof(c->line);
    }
    if (r == 0) {
        return c->len > 0 ? 1 : -1;
    }
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
}

/* The row of the line's verb that the current state takes, else NULL. */
static const gs_agent_msg_t *route(const gs_agent_t *a, const gs_agent_msg_t *msgs,
                                   const char *line)
{
    size_t n = strcspn(line, " \n");
    for (const gs_agent_msg_t *m = msgs; m->verb != NULL; m++) {
        if (strlen(m->verb) == n && strncmp(line, m->verb, n) == 0) {
            return (m->states & (1u << a->state)) ? m : NULL;
        }
    }
    return NULL;
}

static void dispatch(gs_agent_t *a, const gs_agent_msg_t *msgs, gs_agent_conn_t *c)
{
    const gs_agent_msg_t *m = route(a, msgs, c->line);
    if (m == NULL) {
        char line[96];
        int n = gs_protocol_not_now_format(line, sizeof(line), c->line);
        if (n > 0 && write(c->fd, line, (size_t)n) < 0) {
            /* the peer is gone: nothing to tell */
        }
        close(c->fd);
        return;
    }
    m->handle(a, c); /* keeps the connection or closes it */
}

/* --- the loop ------------------------------------------------------------- */

static int min_timeout(int a, long long b)
{
    if (b < 0) {
        return a;
    }
    b = b > 1 << 30 ? 1 << 30 : b;
    return a < 0 || b < a ? (int)b : a;
}

static int takes_messages(const gs_agent_t *a, const gs_agent_msg_t *msgs)
{
    for (const gs_agent_msg_t *m = msgs; m->verb != NULL; m++) {
        if (m->states & (1u << a->state)) {
            return 1;
        }
    }
    return 0;
}

const char *gs_agent_loop(gs_agent_t *a, const gs_agent_msg_t *msgs, const gs_agent_wait_t *w)
{
    /* The program's ranks (a job's): their exits are followed here. */
    gs_ranks_t none = {0};
    gs_ranks_t *t = a->prog->ranks != NULL ? a->prog->ranks(a) : &none;
    /* The rank table grows to the node's size at most (serving). */
    int nfds = 4 + GS_AGENT_CONN_MAX + GS_AGENT_EXTRA_MAX +
               (a->local_size > t->nlive ? a->local_size : t->nlive);
    struct pollfd *p = calloc((size_t)nfds, sizeof(*p));
    conns_t *q = calloc(1, sizeof(*q));

    a->loop_end = p == NULL || q == NULL ? "out of memory" : NULL;
    while (a->loop_end == NULL) {
        int k = 0, timeout = w->timeout != NULL ? w->timeout(a) : -1;
        int listen = takes_messages(a, msgs) && (w->listening == NULL || w->listening(a));
        long long now = gs_proc_now_ms();
        p[k++] = (struct pollfd){a->sig_fd, POLLIN, 0};
        p[k++] = (struct pollfd){listen ? a->listen_fd : -1, POLLIN, 0};
        p[k++] = (struct pollfd){w->launcher ? a->watch_fd : -1, POLLIN, 0};
        for (int i = 0; i < q->n; i++) {
            p[k++] = (struct pollfd){q->c[i].fd, POLLIN, 0};
            timeout = min_timeout(timeout, q->c[i].deadline > now ? q->c[i].deadline - now : 0);
        }
        int logs = -1;
        if (w->faults != NULL && a->daemons.log_fd >= 0) {
            logs = k;
            p[k++] = (struct pollfd){a->daemons.log_fd, POLLIN, 0};
            if (a->fault_due_ms > 0) {
                timeout = min_timeout(timeout, a->fault_due_ms > now ? a->fault_due_ms - now : 0);
            }
        }
        int first_extra = k;
        k += w->extra != NULL ? w->extra(a, p + k, GS_AGENT_EXTRA_MAX) : 0;
        int first_rank = k;
        for (int i = 0; i < t->nlive && k < nfds; i++) {
            p[k++] = (struct pollfd){t->live[i].fd, gs_ranks_events(&t->live[i]), 0};
        }
        if (w->launcher && a->watch_fd < 0 && a->watch_pid > 1) {
            timeout = min_timeout(timeout, 1000); /* no pidfd for the launcher: look each second */
        }
        if (poll(p, (nfds_t)k, timeout) < 0 && errno != EINTR) {
            gs_agent_loop_end(a, "poll failed");
            break;
        }
        /* Ranks first: when the job ends normally they are gone before the
         * launcher is, and the same wake-up may bring both. */
        int dropped = 0;
        for (int i = k - first_rank - 1; i >= 0; i--) {
            if (p[first_rank + i].revents & (POLLIN | POLLHUP | POLLERR)) {
                gs_ranks_drop(t, i);
                dropped = 1;
            }
        }
        if (dropped && w->ranks_dropped != NULL) {
            w->ranks_dropped(a);
        }
        /* A server's log grew: a GPU fault is acted on before any lease or
         * rank below is answered. */
        if (logs >= 0 && ((p[logs].revents & POLLIN) ||
                          (a->fault_due_ms > 0 && gs_proc_now_ms() >= a->fault_due_ms))) {
            w->faults(a);
        }
        if (w->extra_ready != NULL && first_rank > first_extra) {
            w->extra_ready(a, p + first_extra, first_rank - first_extra);
        }
        /* Lines that are whole are dispatched, peers past their time
         * dropped (backwards: dropping moves the last one into the slot). */
        for (int i = q->n - 1; i >= 0; i--) {
            int done = (p[3 + i].revents & (POLLIN | POLLHUP | POLLERR)) ? conn_read(&q->c[i]) : 0;
            if (done == 1) {
                gs_agent_conn_t one = q->c[i];
                q->c[i] = q->c[--q->n];
                dispatch(a, msgs, &one);
            } else if (done < 0 || gs_proc_now_ms() >= q->c[i].deadline) {
                conn_drop(q, i);
            }
        }
        if (p[1].revents & POLLIN) {
            conn_take(a, q);
        }
        if (p[0].revents & POLLIN) {
            const char *why = gs_agent_read_signals(a);
            if (why != NULL) {
                gs_agent_loop_end(a, why);
            }
        }
        if (w->check != NULL && a->loop_end == NULL) {
            w->check(a); /* first: a job that ended whole ends as such */
        }
        if (w->launcher && ((p[2].revents & (POLLIN | POLLHUP | POLLERR)) ||
                            (a->watch_fd < 0 && a->watch_pid > 1 &&
                             !gs_proc_alive(a->watch_pid, -1)))) {
            gs_agent_loop_end(a, "the launcher exited");
        }
    }
    for (int i = 0; q != NULL && i < q->n; i++) {
        close(q->c[i].fd);
    }
    free(q);
    free(p);
    return a->loop_end != NULL ? a->loop_end : "the loop ended";
}
