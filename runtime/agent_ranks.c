/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "affinity.h"
#include "agent_int.h"
#include "proc.h"

int gs_agent_listen(gs_agent_t *a, gs_error_t *err)
{
    struct sockaddr_un addr;
    char *path = a->sock;
    size_t len = sizeof(a->sock);
    int fd;

    if ((size_t)snprintf(path, len, "%s/%s", a->node_dir, GS_AGENT_SOCKET) >= len ||
        strlen(path) >= sizeof(addr.sun_path)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "agent socket path '%s' is too long; set TMPDIR to a shorter "
                            "directory",
                            path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return gs_error_set(err, errno, "socket: %s", strerror(errno));
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    unlink(path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return gs_error_set(err, e, "cannot listen on '%s': %s", path, strerror(e));
    }
    a->listen_fd = fd;
    return 0;
}

/* The process a registration speaks for: the peer, or with "parent" the
 * peer's parent (a Slurm task prolog speaks for its task), which must be
 * ours too. 0 if not acceptable. */
static pid_t registered_pid(pid_t peer, int parent)
{
    char path[64], line[256];
    pid_t ppid = 0;
    uid_t uid = (uid_t)-1;
    FILE *f;

    if (!parent) {
        return peer;
    }
    snprintf(path, sizeof(path), "/proc/%d/status", (int)peer);
    if ((f = fopen(path, "re")) == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        sscanf(line, "PPid: %d", &ppid);
    }
    fclose(f);
    snprintf(path, sizeof(path), "/proc/%d/status", (int)ppid);
    if (ppid <= 1 || (f = fopen(path, "re")) == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned r;
        if (sscanf(line, "Uid: %u", &r) == 1) {
            uid = (uid_t)r;
        }
    }
    fclose(f);
    return uid == getuid() ? ppid : 0;
}

/* One registration: "hello <local rank> <its CPUs, or -> [parent]\n" from a
 * rank about to exec (or its task prolog). The answer names its GPU; it may
 * wait for placement. */
static void accept_rank(gs_agent_t *a)
{
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    char buf[4200], cpulist[4100] = "", who[16] = "";
    int fd, rank = -1;
    pid_t pid = 0;
    long n;
    cpu_set_t cpus;

    fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != getuid()) {
        /* The node dir is 0700, so this cannot be another user's rank. */
        close(fd);
        return;
    }
    n = gs_read_all(fd, buf, sizeof(buf), gs_now_ms() + 2000);
    if (n <= 0 || sscanf(buf, "hello %d %4095s %15s", &rank, cpulist, who) < 1 || rank < 0 ||
        rank >= a->o->local_size || a->registered >= a->o->local_size ||
        (pid = registered_pid(cred.pid, strcmp(who, "parent") == 0)) <= 0) {
        dprintf(fd, "error bad registration\n");
        close(fd);
        return;
    }
    gs_rank_t *r = &a->ranks[a->nranks];
    r->pid = pid;
    r->rank = rank;
    r->conn = fd;
    r->fd = gs_proc_pidfd_open(pid);
    /* With a pidfd, the pidfd tracks the process and the connection goes
     * once answered. Without one, the rank keeps the connection across
     * exec, and the kernel closes it when the rank exits, even on SIGKILL. */
    r->is_pidfd = r->fd >= 0;
    if (!r->is_pidfd) {
        r->fd = fd;
    }
    a->seen[a->registered++] = *r;
    a->nranks++;
    gs_agent_guard_tell(a, "rank", pid);
    gs_agent_place_rank(a, r, cpulist[0] && gs_cpuset_parse(cpulist, &cpus) == 0 ? &cpus : NULL);
    /* Rank start-up waits here: the status file is rewritten once all have
     * come (in the flush), not once per rank. */
    if (a->registered == a->o->local_size) {
        gs_agent_place_flush(a);
    }
}

static void drop_rank(gs_agent_t *a, int i)
{
    if (a->ranks[i].conn >= 0 && a->ranks[i].conn != a->ranks[i].fd) {
        close(a->ranks[i].conn);
    }
    close(a->ranks[i].fd);
    a->ranks[i] = a->ranks[a->nranks - 1];
    a->nranks--;
}

/* What says a rank has exited: a pidfd becomes readable; a connection kept
 * across exec hangs up when the kernel closes it. Its read side is at end of
 * file from the start (the rank shut down its writing after "hello"), so
 * only the hang-up counts: asking for POLLIN would see every rank gone. */
static short rank_events(const gs_rank_t *r)
{
    return r->is_pidfd ? POLLIN : 0;
}

/* Both kinds of descriptor become readable (pidfd) or hung up (socket) when
 * the rank exits. */
static int wait_ranks_gone(gs_rank_t *ranks, int n, int *gone, int timeout_ms)
{
    long long deadline = gs_now_ms() + timeout_ms;
    struct pollfd p[n > 0 ? n : 1];
    int left = 0;

    for (;;) {
        left = 0;
        for (int i = 0; i < n; i++) {
            p[i] = (struct pollfd){gone[i] ? -1 : ranks[i].fd, rank_events(&ranks[i]), 0};
            left += !gone[i];
        }
        long long t = deadline - gs_now_ms();
        if (left == 0 || t <= 0) {
            return left;
        }
        if (poll(p, (nfds_t)n, (int)t) < 0 && errno != EINTR) {
            return left;
        }
        for (int i = 0; i < n; i++) {
            if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                gone[i] = 1;
            }
        }
    }
}

int gs_agent_end_ranks(gs_rank_t *ranks, int n, int term_ms)
{
    int gone[n > 0 ? n : 1], killed = 0;

    memset(gone, 0, sizeof(gone));
    for (int i = 0; i < n; i++) {
        gs_proc_signal(ranks[i].pid, ranks[i].is_pidfd ? ranks[i].fd : -1, SIGTERM);
    }
    if (wait_ranks_gone(ranks, n, gone, term_ms) == 0) {
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (!gone[i]) {
            gs_proc_signal(ranks[i].pid, ranks[i].is_pidfd ? ranks[i].fd : -1, SIGKILL);
            killed++;
        }
    }
    /* SIGKILL is not ignorable; this only lets the kernel finish, so that
     * MPS sees its clients gone before it is told to quit. */
    wait_ranks_gone(ranks, n, gone, 500);
    return killed;
}

const char *gs_agent_read_signals(gs_agent_t *a)
{
    struct signalfd_siginfo si;
    const char *why = NULL;
    while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            gs_agent_note_child_exits(a);
        } else {
            why = "the agent was told to stop";
        }
    }
    return why;
}

void gs_agent_serve(gs_agent_t *a)
{
    int nfds = 3 + a->o->local_size;
    struct pollfd *p = calloc((size_t)nfds, sizeof(*p));
    long long last_change = gs_now_ms();
    const char *why = p == NULL ? "out of memory" : NULL;
    int early = 1; /* the job did not end on its own */

    while (why == NULL) {
        int k = 0, timeout = -1;
        p[k++] = (struct pollfd){a->sig_fd, POLLIN, 0};
        p[k++] = (struct pollfd){a->registered < a->o->local_size ? a->listen_fd : -1, POLLIN, 0};
        p[k++] = (struct pollfd){a->watch_fd, POLLIN, 0};
        for (int i = 0; i < a->nranks; i++) {
            p[k++] = (struct pollfd){a->ranks[i].fd, rank_events(&a->ranks[i]), 0};
        }
        if (a->watch_fd < 0 && a->o->watch_pid > 1) {
            timeout = 1000; /* no pidfd for the launcher: look every second */
        }
        if (a->nranks == 0 && a->registered < a->o->local_size) {
            timeout = 1000; /* ranks still expected: a bound on waiting for them */
        }
        if (!a->placed && a->by_locality && a->nranks > 0) {
            /* Registered ranks wait for placement: bounded by the deadline. */
            long long t = a->place_deadline - gs_now_ms();
            timeout = t < 0 ? 0 : (timeout < 0 || t < timeout ? (int)t : timeout);
        }
        int t_report = gs_agent_report_fd_try(a);
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
        for (int i = a->nranks - 1, j = k - 1; i >= 0; i--, j--) {
            if (p[j].revents & (POLLIN | POLLHUP | POLLERR)) {
                drop_rank(a, i);
                last_change = gs_now_ms();
                dropped = 1;
            }
        }
        if (dropped) {
            gs_agent_write_status(a);
        }
        if (p[1].revents & POLLIN) {
            accept_rank(a);
            last_change = gs_now_ms();
        }
        if (p[0].revents & POLLIN) {
            why = gs_agent_read_signals(a);
        }
        if (!a->placed && a->by_locality && gs_now_ms() >= a->place_deadline) {
            gs_agent_report(a, 1, "%d of %d ranks registered in %d s; placing those", a->registered,
                            a->o->local_size, a->o->cfg.timeout_s);
            gs_agent_place_flush(a);
        }
        if (a->nranks == 0 && a->registered >= a->o->local_size) {
            why = "every rank has exited";
            early = 0;
        } else if ((p[2].revents & (POLLIN | POLLHUP)) ||
                   (a->watch_fd < 0 && a->o->watch_pid > 1 &&
                    !gs_proc_alive(a->o->watch_pid, -1))) {
            why = "the launcher exited";
        } else if (a->nranks == 0 &&
                   gs_now_ms() - last_change > (long long)a->o->cfg.timeout_s * 1000 * 2) {
            /* Some ranks never registered (their shim failed) and the rest are
             * gone: keeping MPS up would serve nobody. */
            why = "no rank left and the missing ones never registered";
            early = 0;
        }
    }
    free(p);
    if (early && a->nranks > 0) {
        int n = a->nranks;
        int killed = gs_agent_end_ranks(a->ranks, n, GS_AGENT_RANK_TERM_MS);
        gs_agent_report(a, 1, "%s while %d rank%s still ran: ended %s (SIGTERM%s)", why, n,
                        n == 1 ? "" : "s", n == 1 ? "it" : "them",
                        killed ? ", then SIGKILL" : "");
        while (a->nranks > 0) {
            drop_rank(a, a->nranks - 1);
        }
    }
    gs_agent_report(a, 0, "served %d of %d ranks; %s: %s", a->registered, a->o->local_size,
                    a->ndaemons > 0 ? "stopping MPS" : "done", why);
}
