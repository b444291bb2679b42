/* SPDX-License-Identifier: BSD-3-Clause */
/* --mps-share=node: one user's jobs on a node share one set of MPS servers,
 * as one job's ranks do.
 *
 * Each job keeps its own agent (its ranks, report, end and teardown are its
 * own); only the servers are the user's. They belong to a shared agent
 * (GS_MODE_SHARED) in the user's private base, <base>/mps-share/<node>: a
 * job's agent leases a server with room for its ranks on each GPU of its
 * plan ("lease", protocol.h), keeps the connection while the job runs and
 * closes it at the end (the kernel closes it when the agent is killed). The
 * shared agent starts a server on a GPU when none there has room (the
 * client limit), counts the leases, and once the last is gone and its
 * linger is over it stops MPS. No other user can reach it: the base is
 * the user's own (0700, never one another user made), and its socket takes
 * the user's connections only. */
#include "gs_autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/service/service_int.h"
#include "runtime/service/lister.h"
#include "runtime/core/proc.h"
#include "runtime/core/unixsock.h"
#include "runtime/files/rundir.h"
#include "runtime/files/share_dir.h"
#include "runtime/files/status.h"
#include "runtime/wire/lease.h"

/* How long a shared agent waits for its first lease: the job that started
 * it asks right after its start. */
#define SHARE_FIRST_LEASE_MS 30000

static int idle_ms(const gs_agent_t *a);
/* --- the shared agent ------------------------------------------------------- */

void gs_agent_share_open(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    gs_share_dir_unmark(a->node_dir); /* one that was killed as it ended */
    sv->leases = calloc(GS_AGENT_LEASES_MAX, sizeof(*sv->leases));
    sv->lister = gs_lister_start(); /* NULL: the loop lists them itself */
    if (sv->lister != NULL) {
        gs_gpu_list_t first; /* the first listing starts now, for the first job */
        gs_lister_get(sv->lister, &first, 0);
    }
    sv->idle_since = gs_proc_now_ms();
    a->servers.count = 0;
    sv->share_starting = -1;
}

/* Whether the job that asked on fd has given up and closed its end (this
 * agent was stopped, or slow, and the job went on with servers of its own):
 * a server started for it now would serve nobody and linger. */
static int abandoned(int fd)
{
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* "error <why>" on fd, in one write, and the connection closed. */
static void refuse(int fd, const char *why)
{
    char line[GS_LINE_MAX];
    int n = gs_lease_fmt_refusal(line, sizeof(line), why);
    if (n > 0 && write(fd, line, (size_t)n) < 0) {
        /* Its asker is gone already. */
    }
    close(fd);
}

static void on_lease(gs_agent_t *a, gs_agent_conn_t *c)
{
    gs_service_t *sv = gs_service(a);
    gs_lease_req_t q;

    if (c->uid != getuid() ||
        gs_lease_parse_lease(c->line, GS_MAX_GPUS, &q) != 0) {
        refuse(c->fd, "malformed lease");
        return;
    }
    if (!a->plan.use_mps || sv->leases == NULL || sv->nleases == GS_AGENT_LEASES_MAX ||
        sv->retiring) {
        refuse(c->fd, !a->plan.use_mps ? a->plan.reason
                      : sv->retiring    ? "it stops (gsrun stop) once its running jobs end"
                                       : "the node's shared MPS serves as many jobs as it can");
        return;
    }
    if (abandoned(c->fd)) {
        gs_report_add(&a->report, 0, "job %s gave up its lease before it was answered: nothing "
                      "started for it", q.job);
        close(c->fd);
        return;
    }
    gs_agent_lease_t *l = &sv->leases[sv->nleases];
    memset(l, 0, sizeof(*l));
    l->fd = c->fd;
    l->pid = c->pid;
    l->linger_s = q.linger_s;
    snprintf(l->job, sizeof(l->job), "%s", q.job);
    l->want_n = q.n;
    l->starting = -1;
    l->waiting = 1;
    sv->nleases++;
    sv->ever_leased = 1;
    for (int e = 0; e < q.n; e++) {
        l->want_clients[e] = q.clients[e];
        if ((l->want_gpu[e] = gs_agent_share_gpu_by_uuid(a, q.uuid[e])) < 0) {
            char why[160];
            snprintf(why, sizeof(why), "GPU %s is not one the node's shared MPS found", q.uuid[e]);
            gs_agent_share_refuse(a, sv->nleases - 1, why);
            return;
        }
    }
    gs_agent_share_place(a); /* answered now, or once a server it needs serves */
}

/* The listing a job is told: asked for afresh once older than FRESH (a
 * burst of jobs keeps the thread listing), and a job waits for a fresh one
 * only when the latest is older than STALE (the first after a quiet spell:
 * other users' processes on the GPUs count by it). */
#define SHARE_LISTING_FRESH_MS 250
#define SHARE_LISTING_STALE_MS 2000
/* A listing that has run this long is NVML slow or stuck: the jobs that
 * wait are told at once, and list the GPUs themselves rather than wait
 * on it. */
#define SHARE_LISTING_SLOW_MS 1000
/* How long its end waits for a listing under way (a hung NVML call): the
 * servers are stopped all the same, and the process ends without it. */
#define SHARE_LISTER_STOP_MS 1000

/* Tells fd the GPUs of sv->listing and closes it. */
static void tell_gpus(gs_agent_t *a, int fd)
{
    gs_service_t *sv = gs_service(a);
    size_t cap = (size_t)GS_MAX_GPUS * GS_GPU_LINE_MAX + 256, n = 0;
    char *buf = malloc(cap);
    const gs_gpu_list_t *l = sv->listing;
    if (buf == NULL) {
        refuse(fd, "out of memory");
        return;
    }
    int head = gs_lease_fmt_gpus(buf, cap, l->count, l->cuda_version, l->beyond, l->reason);
    n = head < 0 ? 0 : (size_t)head;
    for (int g = 0; g < l->count && n > 0 && n < cap; g++) {
        if (gs_gpu_to_line(&l->gpu[g], buf + n, cap - n - 1) != 0) {
            n = 0; /* a device the line cannot carry: the job lists them itself */
            break;
        }
        n += strlen(buf + n);
        buf[n++] = '\n';
    }
    int told = n > 0 && gs_proc_write_all(fd, buf, n, gs_proc_now_ms() + 2000) == 0;
    free(buf);
    if (!told) {
        refuse(fd, "the GPUs could not be told");
        return;
    }
    close(fd);
}

/* A listing that has run busy ms: the job lists the GPUs itself. */
static void refuse_slow(int fd, long long busy)
{
    char why[96];
    snprintf(why, sizeof(why), "its GPU listing has run %lld ms (NVML slow or stuck)", busy);
    refuse(fd, why);
}

/* The latest listing into sv->listing: 1 if it is fresh enough to tell. */
static int listing_ready(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    if (sv->listing == NULL && (sv->listing = calloc(1, sizeof(*sv->listing))) == NULL) {
        return 0;
    }
    if (sv->lister == NULL) {
        gs_error_t err; /* no thread: listed here, in the loop */
        if (gs_gpu_discover(sv->listing, &err) != 0) {
            sv->listing->count = 0;
            snprintf(sv->listing->reason, sizeof(sv->listing->reason), "%s", err.text);
        }
        if (gs_agent_servers_memory(a, sv->listing)) {
            gs_agent_write_status(a);
        }
        return 1;
    }
    long long age = gs_lister_get(sv->lister, sv->listing, SHARE_LISTING_FRESH_MS);
    int ready = age >= 0 && age <= SHARE_LISTING_STALE_MS;
    if (ready && gs_agent_servers_memory(a, sv->listing)) {
        gs_agent_write_status(a); /* its servers' own memory, for gsrun status */
    }
    return ready;
}

static void on_retire(gs_agent_t *a, gs_agent_conn_t *c)
{
    gs_service_t *sv = gs_service(a);
    if (c->uid != getuid()) {
        refuse(c->fd, "only the user's shared MPS takes gsrun stop");
        return;
    }
    sv->retiring = 1;
    sv->ever_leased = 1;
    sv->linger_ms = 0;
    if (sv->nleases == 0) {
        sv->idle_since = gs_proc_now_ms(); /* it ends at the loop's next check */
    }
    /* Said at once (the report comes at the end); what it did before is
     * nobody's now; from here on, the caller's. */
    dprintf(c->fd,
            "gsrun: node %s: the user's shared MPS (agent %d) stops once the %d job%s that "
            "hold%s its servers end%s; a new job meanwhile runs servers of its own\n",
            a->o->args.node_name, (int)getpid(), sv->nleases, sv->nleases == 1 ? "" : "s",
            sv->nleases == 1 ? "s" : "", sv->nleases == 1 ? "s" : "");
    gs_report_clear(&a->report);
    gs_report_to_fd(&a->report, GS_SINK_EPILOG, c->fd);
    a->report.verbose = 1;
}

static void on_gpus(gs_agent_t *a, gs_agent_conn_t *c)
{
    gs_service_t *sv = gs_service(a);
    if (c->uid != getuid()) {
        refuse(c->fd, "the GPUs are told to the user's own jobs only");
        return;
    }
    long long busy;
    if (listing_ready(a)) {
        tell_gpus(a, c->fd);
    } else if ((busy = gs_lister_busy_ms(sv->lister)) >= SHARE_LISTING_SLOW_MS) {
        refuse_slow(c->fd, busy);
    } else if (sv->ngpus_waiting < GS_AGENT_GPUS_WAITING) {
        sv->gpus_waiting[sv->ngpus_waiting++] = c->fd; /* told by tell_waiting */
    } else {
        refuse(c->fd, "too many jobs wait for the GPUs' listing");
    }
}

static void tell_waiting(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    if (sv->ngpus_waiting == 0) {
        return;
    }
    long long busy = 0;
    if (listing_ready(a)) {
        for (int i = 0; i < sv->ngpus_waiting; i++) {
            tell_gpus(a, sv->gpus_waiting[i]);
        }
        sv->ngpus_waiting = 0;
    } else if ((busy = gs_lister_busy_ms(sv->lister)) >= SHARE_LISTING_SLOW_MS) {
        for (int i = 0; i < sv->ngpus_waiting; i++) {
            refuse_slow(sv->gpus_waiting[i], busy);
        }
        sv->ngpus_waiting = 0;
    }
}

static void tell_lost(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    int changed = 0;
    for (int s = 0; s < a->daemons.n; s++) {
        const gs_mps_daemon_t *d = &a->daemons.daemon[s];
        if (!d->daemon_reaped || sv->lost_told[s]) {
            continue;
        }
        sv->lost_told[s] = 1;
        changed = 1;
        int st = d->daemon_status;
        char line[64];
        int n = gs_lease_fmt_lost(line, sizeof(line), s,
                                  sv->share_shun[s] == 2 ? GS_LEASE_LOST_WEDGED
                                  : WIFSIGNALED(st)     ? GS_LEASE_LOST_SIGNAL
                                                        : GS_LEASE_LOST_STATUS,
                                  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        gs_agent_tell_leases(a, s, line, n);
    }
    if (changed) {
        gs_agent_write_status(a);
    }
}

/* Lease i has ended: its job's agent closed the connection, or exited.
 * The service lingers as the last job asked. */
static void drop(gs_agent_t *a, int i)
{
    gs_service_t *sv = gs_service(a);
    const gs_agent_lease_t *l = &sv->leases[i];
    gs_report_add(&a->report, 0, "job %s ended its lease", l->job);
    gs_agent_share_end(a, i, sv->retiring ? 0 : l->linger_s * 1000);
}

static void confirm_due(gs_agent_t *a, int all)
{
    gs_service_t *sv = gs_service(a);
    long long now = gs_proc_now_ms();
    int changed = 0;
    for (int e = 0; e < a->daemons.n && e < GS_MAX_GPUS; e++) {
        if (sv->share_confirm_ms[e] > 0 && (all || now >= sv->share_confirm_ms[e])) {
            sv->share_confirm_ms[e] = 0;
            gs_agent_confirm_server(a, e, "the user's jobs on this node");
            changed = 1;
        }
    }
    if (changed) {
        gs_agent_write_status(a);
    }
}

static int timeout_ms(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    long long next = idle_ms(a), now = gs_proc_now_ms();
    if (sv->ngpus_waiting > 0) {
        next = next < 0 || next > 5 ? 5 : next; /* the listing's end, looked for every 5 ms */
    }
    int start = gs_agent_share_start_ms(a); /* a server's start under way */
    if (start >= 0) {
        next = next < 0 || next > start ? start : next;
    }
    for (int e = 0; e < a->daemons.n && e < GS_MAX_GPUS; e++) {
        long long due = sv->share_confirm_ms[e];
        if (due > 0) {
            long long left = due > now ? due - now : 0;
            next = next < 0 || left < next ? left : next;
        }
    }
    return next > INT_MAX ? INT_MAX : (int)next;
}

/* How long it waits for a job while none holds a lease: the first job's
 * agent leases right after it started this one (SHARE_FIRST_LEASE_MS at
 * most); after that, the last job's linger (0 after a failed start). */
static int idle_ms(const gs_agent_t *a)
{
    const gs_service_t *sv = gs_service_const(a);
    if (sv->nleases > 0) {
        return -1;
    }
    long long first = (long long)a->o->cfg.timeout_s * 1000;
    if (first > SHARE_FIRST_LEASE_MS) {
        first = SHARE_FIRST_LEASE_MS; /* not the first job's --mps-timeout, up to an hour */
    }
    long long bound = sv->ever_leased ? sv->linger_ms : first;
    long long left = sv->idle_since + bound - gs_proc_now_ms();
    return left < 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

static int lease_fds(gs_agent_t *a, struct pollfd *p, int max)
{
    gs_service_t *sv = gs_service(a);
    int k = 0;
    for (int i = 0; i < sv->nleases && k < max; i++) {
        p[k++] = (struct pollfd){sv->leases[i].fd, POLLIN, 0};
    }
    return k;
}

static void lease_ready(gs_agent_t *a, const struct pollfd *p, int n)
{
    gs_service_t *sv = gs_service(a);
    int changed = 0;
    /* Backwards: dropping moves the last lease into the slot. */
    for (int i = n - 1; i >= 0; i--) {
        char buf[256];
        ssize_t r = 0;
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) {
            continue;
        }
        if ((p[i].revents & POLLIN) && (r = read(sv->leases[i].fd, buf, sizeof(buf) - 1)) > 0) {
            buf[r] = '\0'; /* a job's lines: "wedged S", each one short write */
            for (char *line = buf, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
                *nl = '\0';
                gs_agent_share_on_wedged(a, i, line);
            }
            continue;
        }
        drop(a, i);
        changed = 1;
    }
    if (changed) {
        gs_agent_write_status(a);
    }
}

void gs_agent_share_close(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    confirm_due(a, 1); /* the servers' PIDs, for a bounded stop */
    /* A job that comes now finds no socket and starts the next shared
     * agent once this one is gone, instead of waiting on a backlog. */
    if (a->listen_fd >= 0) {
        gs_share_dir_mark_ending(a->node_dir); /* a job waits a second for it, no longer */
        close(a->listen_fd);
        a->listen_fd = -1;
        unlink(a->sock);
    }
    for (int i = sv->nleases - 1; i >= 0; i--) {
        close(sv->leases[i].fd); /* a signal ended it: its jobs see the hang-up */
    }
    sv->nleases = 0;
    free(sv->leases);
    sv->leases = NULL;
    for (int i = 0; i < sv->ngpus_waiting; i++) {
        close(sv->gpus_waiting[i]); /* they list the GPUs themselves */
    }
    sv->ngpus_waiting = 0;
    if (gs_lister_stop(sv->lister, SHARE_LISTER_STOP_MS) != 0) {
        sv->lister_stuck = 1;
        gs_report_add(&a->report, 1,
                      "an NVML call of its GPU listing did not end within %lld ms of the "
                      "agent's end (NVML stuck): its servers are stopped without it",
                      (long long)SHARE_LISTER_STOP_MS);
    }
    sv->lister = NULL;
    free(sv->listing);
    sv->listing = NULL;
}

/* --- its messages and its wait ---------------------------------------------- */

/* "stop" (`gsrun stop --now`): its jobs are told their servers are gone;
 * what it did before is nobody's (it has no report sink), what it does now
 * goes to the connection. */
static void on_stop_now(gs_agent_t *a, gs_agent_conn_t *c)
{
    gs_report_clear(&a->report);
    gs_report_to_fd(&a->report, GS_SINK_EPILOG, c->fd);
    a->report.verbose = 1;
    gs_agent_loop_end(a, "gsrun stop --now asked");
}

#define BIT(s) (1u << (s))
/* The service's own table: a job's agent's verbs (size, hello, servers)
 * are not taken here, and the job's table takes none of these. */
const gs_agent_msg_t gs_agent_service_messages[] = {
    {GS_LEASE_VERB_LEASE, BIT(GS_AGENT_HOLDING), on_lease},
    {GS_LEASE_VERB_GPUS, BIT(GS_AGENT_HOLDING), on_gpus},
    {GS_LEASE_VERB_RETIRE, BIT(GS_AGENT_HOLDING), on_retire},
    {"stop", BIT(GS_AGENT_HOLDING), on_stop_now},
    {NULL, 0, NULL},
};

static void hold_check(gs_agent_t *a)
{
    gs_service_t *sv = gs_service(a);
    gs_agent_share_starting(a);
    confirm_due(a, 0);
    tell_waiting(a);
    tell_lost(a);
    if (idle_ms(a) == 0) {
        gs_agent_loop_end(a, sv->retiring      ? "gsrun stop asked, and the last job ended"
                             : sv->ever_leased ? "the last job ended (and its linger)"
                                              : "no job came");
    }
}

void gs_agent_share_hold(gs_agent_t *a)
{
    static const gs_agent_wait_t w = {.launcher = 0,
                                      .timeout = timeout_ms,
                                      .check = hold_check,
                                      .extra = lease_fds,
                                      .extra_ready = lease_ready,
                                      .faults = gs_agent_faults};
    const char *why = gs_agent_loop(a, gs_agent_service_messages, &w);
    gs_report_add(&a->report, 0, "stopping the shared MPS: %s", why);
}
