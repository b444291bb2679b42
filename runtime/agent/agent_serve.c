/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's waits: on its socket (the early agent's size, the ranks'
 * registrations, the epilog's stop), on the ranks and on the launcher. Each
 * returns when its state is over; agent.c decides what comes next. */
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
#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/core/unixsock.h"
#include "runtime/gpu/affinity.h"
#include "runtime/wire/protocol.h"

int gs_agent_rank_of_pid(const void *agent, pid_t pid)
{
    return gs_ranks_rank_of_pid(&((const gs_agent_t *)agent)->ranks, pid);
}

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

/* One connection's first line (the node dir is 0700: only the job's user,
 * or root, can connect). Returns the connection, -1 if there was none. */
static int accept_line(gs_agent_t *a, char *buf, size_t len, long *n)
{
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
        *n = gs_proc_read_line(fd, buf, len, gs_proc_now_ms() + 2000);
    }
    return fd;
}

int gs_agent_wait_size(gs_agent_t *a)
{
    for (;;) {
        struct pollfd p[3] = {
            {a->listen_fd, POLLIN, 0}, {a->watch_fd, POLLIN, 0}, {a->sig_fd, POLLIN, 0}};
        if (poll(p, 3, -1) < 0 && errno != EINTR) {
            return 0;
        }
        if ((p[2].revents & POLLIN) && gs_agent_read_signals(a) != NULL) {
            return 0;
        }
        if (p[0].revents & POLLIN) {
            /* "size <local ranks> <launcher PID>" from the node's first rank
             * (the PID only for `gsrun status`: gsrun's pipe says when the
             * launcher is gone). */
            char buf[64];
            long got = 0;
            int n = 0, launcher = 0, fd = accept_line(a, buf, sizeof(buf), &got);
            if (fd < 0) {
                continue;
            }
            if (got > 0 && gs_protocol_size_parse(buf, &n, &launcher) == 0) {
                dprintf(fd, "ok\n");
                close(fd);
                a->watch_pid = launcher;
                return n;
            }
            dprintf(fd, "error expected the node's size\n");
            close(fd);
            continue;
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            return 0;
        }
    }
}

/* The answer to a registration names the rank's GPU and how it is followed;
 * with a pidfd the connection is done with, else the rank keeps it. */
static void answer(gs_rank_t *r, int gpu)
{
    char line[64];
    if (r->conn < 0) {
        return;
    }
    int len = gs_protocol_answer_format(line, sizeof(line), r->is_pidfd, gpu);
    if (len > 0 && write(r->conn, line, (size_t)len) < 0) {
        /* the rank is gone: its exit is seen through the table */
    }
    if (r->is_pidfd) {
        close(r->conn);
    }
    r->conn = -1;
}

void gs_agent_ranks_came(gs_agent_t *a)
{
    int m = 0;

    gs_report_mark(&a->report, "registered");
    if (gs_placer_pending(&a->placer)) {
        int near = gs_placer_flush(&a->placer, &m);
        gs_report_add(&a->report, 0,
                      "placement by the ranks' cores: %d of %d ranks on a GPU near "
                      "them",
                      near, m);
        for (int i = 0; i < a->ranks.nlive; i++) {
            answer(&a->ranks.live[i], gs_placer_gpu(&a->placer, a->ranks.live[i].rank));
        }
    }
    if (a->stop_from >= 0) {
        gs_daemons_stop_from(&a->daemons, a->stop_from, gs_agent_rank_of_pid, a);
        a->stop_from = -1;
    }
    /* Every rank has its answer: now the agent may wait for the servers. */
    gs_agent_confirm_pending(a);
    for (int g = 0; g < a->placer.ngpus && a->o->cfg.verbose; g++) {
        char list[256];
        gs_placer_ranks_text(&a->placer, g, list, sizeof(list));
        char who[48];
        gs_daemons_label(&a->daemons, g, who, sizeof(who));
        gs_report_add(&a->report, 0, "%s (%s): local ranks %s", who, a->servers.gpu[g].uuid,
                      list[0] ? list : "none");
    }
    /* A daemon pinned to a core a rank is bound to moves off it. */
    cpu_set_t bound;
    if (gs_placer_bound_cpus(&a->placer, sysconf(_SC_NPROCESSORS_ONLN), &bound) > 0) {
        gs_daemons_avoid(&a->daemons, &a->servers, &bound);
    }
    gs_agent_write_status(a);
}

/* Registrations are read without blocking: a connection that sends nothing
 * (or slowly, or many of them) delays no other rank. Each is kept until its
 * hello is whole (the rank half-closes after it), for at most
 * GS_AGENT_HELLO_MS; past GS_AGENT_PENDING_MAX open at once the oldest is
 * dropped (a real rank writes its hello as it connects). */
#define GS_AGENT_PENDING_MAX 64
#define GS_AGENT_HELLO_MS 2000

typedef struct {
    int fd;
    struct ucred cred;
    long long deadline;
    size_t len;
    char buf[GS_LINE_MAX];
} gs_pending_t;

static void pending_drop(gs_pending_t *q, int *nq, int i)
{
    close(q[i].fd);
    q[i] = q[--*nq];
}

/* A new connection: another user's is refused at once (the node dir is
 * 0700, so this is a stale or hostile peer); the job user's waits for its
 * hello. */
static void take_connection(gs_agent_t *a, gs_pending_t *q, int *nq)
{
    socklen_t clen = sizeof(q[0].cred);
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
        return;
    }
    if (*nq == GS_AGENT_PENDING_MAX) {
        int oldest = 0;
        for (int i = 1; i < *nq; i++) {
            oldest = q[i].deadline < q[oldest].deadline ? i : oldest;
        }
        pending_drop(q, nq, oldest);
    }
    gs_pending_t *p = &q[*nq];
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &p->cred, &clen) != 0 || p->cred.uid != getuid()) {
        close(fd);
        return;
    }
    p->fd = fd;
    p->len = 0;
    p->buf[0] = '\0';
    p->deadline = gs_proc_now_ms() + GS_AGENT_HELLO_MS;
    (*nq)++;
}

/* What a pending connection sent: 1 once its hello is whole (end of file,
 * or the buffer full), 0 for more to come, -1 when it failed. */
static int pending_read(gs_pending_t *p)
{
    ssize_t r = read(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
    if (r > 0) {
        p->len += (size_t)r;
        p->buf[p->len] = '\0';
        return p->len + 1 >= sizeof(p->buf);
    }
    if (r == 0) {
        return 1;
    }
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
}

/* One registration: "hello <local rank> <its CPUs, or -> [parent]" from a
 * rank about to exec (or its task prolog). The answer may wait for
 * placement. Takes fd (kept for the rank, or closed). */
static void register_rank(gs_agent_t *a, int fd, const struct ucred *cred, const char *buf)
{
    char cpulist[4100] = "";
    int rank = -1, parent = 0;
    pid_t pid = 0, holder = 0;
    cpu_set_t cpus;

    if (gs_protocol_hello_parse(buf, &rank, cpulist, sizeof(cpulist), &parent) != 0 ||
        (pid = gs_ranks_registered_pid(cred->pid, parent)) <= 0) {
        dprintf(fd, "error bad registration\n");
        close(fd);
        return;
    }
    if ((holder = gs_ranks_holder(&a->ranks, rank)) > 0) {
        /* Two processes cannot both be one local rank: the second one is
         * refused, and both are named. */
        dprintf(fd, "error local rank %d is already registered by PID %d (this is PID %d)\n", rank,
                (int)holder, (int)pid);
        gs_report_add(&a->report, 1,
                      "local rank %d registered again by PID %d (first by PID %d): refused", rank,
                      (int)pid, (int)holder);
        close(fd);
        return;
    }
    if (!gs_ranks_accepts(&a->ranks, rank)) {
        dprintf(fd, "error bad registration\n");
        close(fd);
        return;
    }
    gs_rank_t *r = gs_ranks_add(&a->ranks, pid, rank, fd);
    gs_guard_tell(&a->guard, "rank", pid);
    int gpu =
        gs_placer_add(&a->placer, rank,
                      cpulist[0] && gs_affinity_cpuset_parse(cpulist, &cpus) == 0 ? &cpus : NULL);
    if (gpu != GS_PLACER_WAIT) {
        answer(r, gpu);
    }
    /* Rank start-up waits here: the status file is rewritten once all have
     * come, not once per rank. */
    if (gs_ranks_complete(&a->ranks)) {
        gs_agent_ranks_came(a);
    }
}

void gs_agent_serve(gs_agent_t *a)
{
    gs_ranks_t *t = &a->ranks;
    int nfds = 3 + GS_AGENT_PENDING_MAX + a->local_size, nq = 0;
    struct pollfd *p = calloc((size_t)nfds, sizeof(*p));
    gs_pending_t *q = calloc(GS_AGENT_PENDING_MAX, sizeof(*q));
    long long last_change = gs_proc_now_ms();
    long long give_up_rank0 = a->started_ms + (long long)a->o->cfg.timeout_s * 1000;
    const char *why = p == NULL || q == NULL ? "out of memory" : NULL;
    int early = 1; /* the job did not end on its own */

    while (why == NULL) {
        int k = 0, timeout = -1;
        p[k++] = (struct pollfd){a->sig_fd, POLLIN, 0};
        p[k++] = (struct pollfd){!gs_ranks_complete(t) ? a->listen_fd : -1, POLLIN, 0};
        p[k++] = (struct pollfd){a->watch_fd, POLLIN, 0};
        long long now = gs_proc_now_ms();
        for (int i = 0; i < nq; i++) {
            p[k++] = (struct pollfd){q[i].fd, POLLIN, 0};
            long long w = q[i].deadline - now;
            timeout = w < 0 ? 0 : (timeout < 0 || w < timeout ? (int)w : timeout);
        }
        for (int i = 0; i < t->nlive; i++) {
            p[k++] = (struct pollfd){t->live[i].fd, gs_ranks_events(&t->live[i]), 0};
        }
        if (a->watch_fd < 0 && a->watch_pid > 1) {
            timeout = 1000; /* no pidfd for the launcher: look every second */
        }
        if (t->nlive == 0 && !gs_ranks_complete(t)) {
            timeout = 1000; /* ranks still expected: a bound on waiting for them */
        }
        if (gs_placer_pending(&a->placer) && t->nlive > 0) {
            /* Registered ranks wait for placement: bounded by the deadline. */
            long long w = a->placer.deadline_ms - gs_proc_now_ms();
            timeout = w < 0 ? 0 : (timeout < 0 || w < timeout ? (int)w : timeout);
        }
        int t_report = gs_report_open_rank0(&a->report, gs_ranks_pid_of_rank(t, 0),
                                            gs_proc_wall_ms(), give_up_rank0);
        if (t_report >= 0 && (timeout < 0 || t_report < timeout)) {
            timeout = t_report;
        }
        if (poll(p, (nfds_t)k, timeout) < 0 && errno != EINTR) {
            why = "poll failed";
            break;
        }
        /* Ranks first: when the job ends normally they are gone before the
         * launcher is, and the same wake-up may bring both. */
        int dropped = 0;
        for (int i = t->nlive - 1, j = k - 1; i >= 0; i--, j--) {
            if (p[j].revents & (POLLIN | POLLHUP | POLLERR)) {
                gs_ranks_drop(t, i);
                last_change = gs_proc_now_ms();
                dropped = 1;
            }
        }
        if (dropped) {
            gs_agent_write_status(a);
        }
        /* Pending registrations: those whose hello is whole are served,
         * those past their time dropped (backwards: dropping moves the last
         * one into the slot). */
        for (int i = nq - 1; i >= 0; i--) {
            int done = (p[3 + i].revents & (POLLIN | POLLHUP | POLLERR)) ? pending_read(&q[i]) : 0;
            if (done == 1) {
                gs_pending_t one = q[i];
                q[i] = q[--nq];
                register_rank(a, one.fd, &one.cred, one.buf);
                last_change = gs_proc_now_ms();
            } else if (done < 0 || gs_proc_now_ms() >= q[i].deadline) {
                pending_drop(q, &nq, i);
            }
        }
        if (p[1].revents & POLLIN) {
            take_connection(a, q, &nq);
        }
        if (p[0].revents & POLLIN) {
            why = gs_agent_read_signals(a);
        }
        if (gs_placer_pending(&a->placer) && gs_proc_now_ms() >= a->placer.deadline_ms) {
            gs_report_add(&a->report, 1, "%d of %d ranks registered in %d s; placing those",
                          t->registered, a->local_size, a->o->cfg.timeout_s);
            gs_agent_ranks_came(a);
        }
        if (t->nlive == 0 && gs_ranks_complete(t)) {
            why = "every rank has exited";
            early = 0;
        } else if ((p[2].revents & (POLLIN | POLLHUP)) ||
                   (a->watch_fd < 0 && a->watch_pid > 1 && !gs_proc_alive(a->watch_pid, -1))) {
            why = "the launcher exited";
        } else if (t->nlive == 0 &&
                   gs_proc_now_ms() - last_change > (long long)a->o->cfg.timeout_s * 1000 * 2) {
            /* Some ranks never registered (their shim failed) and the rest are
             * gone: keeping MPS up would serve nobody. */
            why = "no rank left and the missing ones never registered";
            early = 0;
        }
    }
    for (int i = 0; q != NULL && i < nq; i++) {
        close(q[i].fd);
    }
    free(q);
    free(p);
    if (early && t->nlive > 0) {
        int n = t->nlive;
        int killed = gs_ranks_end(t->live, n, GS_RANKS_TERM_MS);
        gs_report_add(&a->report, 1, "%s while %d rank%s still ran: ended %s (SIGTERM%s)", why, n,
                      n == 1 ? "" : "s", n == 1 ? "it" : "them", killed ? ", then SIGKILL" : "");
        while (t->nlive > 0) {
            gs_ranks_drop(t, t->nlive - 1);
        }
    }
    gs_report_add(&a->report, 0, "served %d of %d ranks; %s: %s", t->registered, a->local_size,
                  a->daemons.n > 0 ? "stopping MPS" : "done", why);
}

int gs_agent_hold(gs_agent_t *a, gs_servers_req_t *req)
{
    for (;;) {
        struct pollfd p[2] = {{a->listen_fd, POLLIN, 0}, {a->sig_fd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) {
            return 0;
        }
        if ((p[1].revents & POLLIN) && gs_agent_read_signals(a) != NULL) {
            gs_report_add(&a->report, 0, "stopping MPS: the agent was told to stop");
            return 0;
        }
        if (p[0].revents & POLLIN) {
            char buf[GS_LINE_MAX];
            long got = 0;
            int fd = accept_line(a, buf, sizeof(buf), &got);
            if (fd < 0) {
                continue;
            }
            if (got > 0 && strcmp(buf, GS_PROTO_STOP) == 0) {
                /* The whole report: the epilog shows what its -v asks for. */
                gs_report_to_fd(&a->report, GS_SINK_EPILOG, fd);
                a->report.verbose = 1;
                gs_report_add(&a->report, 0, "stopping MPS: the job's epilog asked");
                return 0;
            }
            if (got > 0 && gs_protocol_servers_parse(buf, GS_MAX_GPUS, &req->n, req->gpu) == 0) {
                req->fd = fd;
                return 1;
            }
            close(fd);
        }
    }
}

void gs_agent_wait_launcher(gs_agent_t *a)
{
    while (a->watch_fd >= 0 || (a->watch_pid > 1 && gs_proc_alive(a->watch_pid, -1))) {
        struct pollfd p[2] = {{a->watch_fd, POLLIN, 0}, {a->sig_fd, POLLIN, 0}};
        int r = poll(p, 2, a->watch_fd >= 0 ? -1 : 1000);
        if (r > 0 && (p[0].revents & (POLLIN | POLLHUP))) {
            break;
        }
        if (r > 0 && (p[1].revents & POLLIN) && gs_agent_read_signals(a) != NULL) {
            break;
        }
    }
}
