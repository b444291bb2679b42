/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/agent/ranks.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/proc.h"

int gs_ranks_init(gs_ranks_t *t, int size)
{
    memset(t, 0, sizeof(*t));
    t->size = size;
    t->live = calloc((size_t)(size > 0 ? size : 1), sizeof(*t->live));
    t->seen = calloc((size_t)(size > 0 ? size : 1), sizeof(*t->seen));
    if (t->live == NULL || t->seen == NULL) {
        gs_ranks_free(t);
        return -ENOMEM;
    }
    return 0;
}

void gs_ranks_free(gs_ranks_t *t)
{
    while (t->live != NULL && t->nlive > 0) {
        gs_ranks_drop(t, t->nlive - 1);
    }
    free(t->live);
    free(t->seen);
    t->live = t->seen = NULL;
}

pid_t gs_ranks_holder(const gs_ranks_t *t, int rank)
{
    for (int i = 0; t->seen != NULL && i < t->registered; i++) {
        if (t->seen[i].rank == rank && rank >= 0) {
            return t->seen[i].pid;
        }
    }
    return 0;
}

int gs_ranks_accepts(const gs_ranks_t *t, int rank)
{
    return t->live != NULL && rank >= 0 && rank < t->size && t->registered < t->size;
}

gs_rank_t *gs_ranks_add(gs_ranks_t *t, pid_t pid, int rank, int conn)
{
    gs_rank_t *r = &t->live[t->nlive];
    r->pid = pid;
    r->rank = rank;
    r->conn = conn;
    r->fd = gs_proc_pidfd_open(pid);
    r->is_pidfd = r->fd >= 0;
    if (!r->is_pidfd) {
        r->fd = conn;
    }
    t->seen[t->registered++] = *r;
    t->nlive++;
    return r;
}

void gs_ranks_drop(gs_ranks_t *t, int i)
{
    gs_rank_t *r = &t->live[i];
    if (r->conn >= 0 && r->conn != r->fd) {
        close(r->conn);
    }
    close(r->fd);
    t->live[i] = t->live[t->nlive - 1];
    t->nlive--;
}

int gs_ranks_complete(const gs_ranks_t *t)
{
    return t->registered >= t->size;
}

int gs_ranks_rank_of_pid(const gs_ranks_t *t, pid_t pid)
{
    for (int i = 0; t->seen != NULL && i < t->registered; i++) {
        if (t->seen[i].pid == pid) {
            return t->seen[i].rank;
        }
    }
    return -1;
}

pid_t gs_ranks_pid_of_rank(const gs_ranks_t *t, int rank)
{
    for (int i = 0; t->seen != NULL && i < t->registered; i++) {
        if (t->seen[i].rank == rank) {
            return t->seen[i].pid;
        }
    }
    return 0;
}

short gs_ranks_events(const gs_rank_t *r)
{
    return r->is_pidfd ? POLLIN : 0;
}

void gs_ranks_follow(gs_rank_t *r, pid_t pid)
{
    r->pid = pid;
    r->rank = -1;
    r->conn = -1;
    r->fd = gs_proc_pidfd_open(pid);
    r->is_pidfd = r->fd >= 0;
}

/* Both kinds of descriptor become readable (pidfd) or hung up (socket) when
 * the process exits. */
static int wait_gone(gs_rank_t *ranks, int n, int *gone, int timeout_ms)
{
    long long deadline = gs_proc_now_ms() + timeout_ms;
    struct pollfd p[n > 0 ? n : 1];
    int left = 0;

    for (;;) {
        left = 0;
        for (int i = 0; i < n; i++) {
            p[i] = (struct pollfd){gone[i] ? -1 : ranks[i].fd, gs_ranks_events(&ranks[i]), 0};
            left += !gone[i];
        }
        long long t = deadline - gs_proc_now_ms();
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

int gs_ranks_end(gs_rank_t *ranks, int n, int term_ms)
{
    int gone[n > 0 ? n : 1], killed = 0;

    memset(gone, 0, sizeof(gone));
    for (int i = 0; i < n; i++) {
        gs_proc_signal(ranks[i].pid, ranks[i].is_pidfd ? ranks[i].fd : -1, SIGTERM);
    }
    if (wait_gone(ranks, n, gone, term_ms) == 0) {
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
    wait_gone(ranks, n, gone, 500);
    return killed;
}

pid_t gs_ranks_registered_pid(pid_t peer, int parent)
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
