/* SPDX-License-Identifier: BSD-3-Clause */
/* --mps-share=node, a job's side: its agent leases servers of the user's
 * shared agent (agent_share.c), starting one when none runs, takes them as
 * its daemons (borrowed), and gives the lease back at the job's end (what
 * it hears on the lease meanwhile: agent_lease_watch.c). */
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
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/job/job_int.h"
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/core/unixsock.h"
#include "runtime/files/rundir.h"
#include "runtime/files/share_dir.h"
#include "runtime/files/status.h"
#include "runtime/wire/lease.h"
#include "runtime/wire/protocol.h"

#define RETRY_MS 20           /* between tries to reach a shared agent that comes or goes */
#define ENDING_WAIT_MS 1000   /* the longest a job waits for an ending one to be gone */
#define FAULT_WORD_MS 500     /* the longest a job's end waits for a fault to be confirmed */
static void lease_name(const gs_agent_t *a, char *out, size_t len);

/* How often a job's agent that waits for the shared agent's answer looks
 * whether it has been stopped. */
#define STOPPED_CHECK_MS 100

/* Said apart: stopped when the job came (it was sent nothing), or while
 * the job waited for its answer (it has the request; resumed, it starts
 * nothing for a job that gave up). */
static int stopped_error(const gs_agent_t *a, pid_t peer, int asked, gs_error_t *err)
{
    const gs_job_t *j = gs_job_const(a);
    return gs_error_set(err, EAGAIN,
                        "the user's shared MPS agent on this node (PID %d, %s) %s (SIGSTOP, or a "
                        "suspended session)%s: `kill -CONT %d` resumes it, `kill %d` ends it and "
                        "its servers",
                        (int)peer, j->share_dir, asked ? "was stopped" : "is stopped",
                        asked ? " before it answered this job's lease" : " and answers no job",
                        (int)peer, (int)peer);
}

/* A line from the shared agent (fd) by deadline: its length, -ETIMEDOUT,
 * -EAGAIN as soon as peer (the shared agent; 0: none to watch) is seen
 * stopped, or -ECANCELED as soon as the job ends (its launcher exited:
 * gsrun closed the watch pipe) or this agent is told to stop. A shared
 * agent that is stuck (stopped, hung) answers nothing: a job that ends
 * must not wait for it up to --mps-timeout and leave its own agent behind. */
static long read_reply(gs_agent_t *a, int fd, char *buf, size_t len, long long deadline,
                       pid_t peer)
{
    for (;;) {
        struct pollfd p[3] = {{fd, POLLIN, 0}, {a->sig_fd, POLLIN, 0}, {a->watch_fd, POLLIN, 0}};
        long long left = deadline - gs_proc_now_ms();
        if (left <= 0) {
            return -ETIMEDOUT;
        }
        if (peer > 0 && left > STOPPED_CHECK_MS) {
            left = STOPPED_CHECK_MS;
        }
        if (poll(p, 3, (int)left) <= 0) {
            if (gs_proctree_stopped(peer)) {
                return -EAGAIN;
            }
            continue; /* EINTR, or the deadline: checked above */
        }
        if (((p[1].revents & POLLIN) && gs_agent_read_signals(a) != NULL) ||
            (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            return -ECANCELED;
        }
        if (p[0].revents != 0) {
            return gs_proc_read_line(fd, buf, len, deadline);
        }
    }
}

static int told_to_stop(gs_error_t *err)
{
    return gs_error_set(err, ECANCELED,
                        "the job ended while its agent waited for the user's shared MPS");
}

/* --- a job's agent ---------------------------------------------------------- */

/* What the shared agent's daemon runs: this program in node-share mode. */
typedef struct {
    const char *self, *dir, *node, *control;
} share_child_t;

static void share_child(void *ctx, int ready_w)
{
    const share_child_t *c = ctx;
    static char buf[1024];
    char *argv[40];
    gs_agentcmd_t args;
    /* Not a rank's: what ends a job's leftovers by a rank's variable must
     * not see it. */
    unsetenv("GSRUN_LOCAL_RANK");
    /* It outlives the job that started it: it, its guard and its daemons
     * must not keep that job's directory busy (a tmpfs to unmount). The
     * control program goes by the path this job found (absolute). */
    if (chdir("/") != 0) {
        _exit(127);
    }
    if (c->control[0] == '/') {
        setenv("GSRUN_MPS_CONTROL", c->control, 1);
    }
    gs_agentcmd_init(&args);
    snprintf(args.job_dir, sizeof(args.job_dir), "%s", c->dir);
    snprintf(args.node_name, sizeof(args.node_name), "%s", c->node);
    args.mode = GS_MODE_SHARED;
    args.report = GS_SINK_NOWHERE;
    args.ready_fd = fcntl(ready_w, F_DUPFD, 3);
    if (gs_agentcmd_to_argv(&args, c->self, buf, sizeof(buf), argv, 40) == 0) {
        execv(c->self, argv);
    }
    _exit(127);
}

/* Starts the shared agent (this program, as a daemon of its own session);
 * returns what it said on its ready pipe: 0 "ok" (listening, state
 * published), 1 otherwise ("error": another holds the dir, or it failed),
 * or -errno with err when it could not be started. */
static int spawn(gs_agent_t *a, const char *dir, gs_error_t *err)
{
    char self[PATH_MAX], line[64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    int ready_rd, rc;
    if (n <= 0) {
        return gs_error_set(err, errno, "cannot start the shared MPS agent: %s", strerror(errno));
    }
    self[n] = '\0';
    /* Absolute: the shared agent runs in '/'. */
    char control[PATH_MAX];
    if (a->control[0] == '/' || realpath(a->control, control) == NULL) {
        snprintf(control, sizeof(control), "%s", a->control);
    }
    share_child_t c = {self, dir, a->o->args.node_name, control};
    if ((rc = gs_proc_spawn_daemon(share_child, &c, &ready_rd, err)) != 0) {
        return gs_error_set(err, -rc, "cannot start the shared MPS agent: %s", strerror(-rc));
    }
    long r = read_reply(a, ready_rd, line, sizeof(line),
                        gs_proc_now_ms() + (long long)a->o->cfg.timeout_s * 1000 + 5000, 0);
    close(ready_rd);
    if (r == -ECANCELED) {
        return told_to_stop(err);
    }
    return r > 0 && strncmp(line, "ok", 2) == 0 ? 0 : 1;
}

/* One try at a lease: 0 with *fd kept, 1 when no shared agent takes
 * leases there now (none, or one that is stopping), or -errno with err
 * (it refused the lease). */
static int try_lease(gs_agent_t *a, const char *sock, const char *req, int *server, int *fd,
                     long long deadline, gs_error_t *err)
{
    char reply[GS_LINE_MAX];
    gs_error_t ignored;
    int c = gs_unixsock_connect(sock, &ignored);
    if (c < 0) {
        return 1;
    }
    pid_t peer = gs_unixsock_peer(c);
    int asked = 0;
    long r = gs_proctree_stopped(peer) ? -EAGAIN
             : (asked = write(c, req, strlen(req)) == (ssize_t)strlen(req))
                 ? read_reply(a, c, reply, sizeof(reply), deadline, peer)
                 : -EPIPE;
    if (r == -EAGAIN) {
        close(c); /* the agent, once resumed, sees the job gave up: starts nothing for it */
        return stopped_error(a, peer, asked, err);
    }
    if (r <= 0) {
        close(c);
        return r == -ECANCELED ? told_to_stop(err) : 1; /* else it closed: stopping */
    }
    reply[strcspn(reply, "\n")] = '\0';
    if (gs_lease_parse_leased(reply, a->plan.nservers, GS_MAX_GPUS, server) == 0) {
        *fd = c;
        return 0;
    }
    close(c);
    if (gs_protocol_not_now_parse(reply)) {
        return 1; /* between its start and its end */
    }
    const char *why = reply;
    gs_lease_parse_refusal(reply, &why); /* else the whole line, as it came */
    return gs_error_set(err, EPROTO, "the user's shared MPS on this node refused the job: %s", why);
}

/* The leased servers as this job's daemons (agent_lease_watch.c's
 * gs_agent_lease_take, as a renewed server is taken). */
static int take_servers(gs_agent_t *a, const int *server, gs_error_t *err)
{
    gs_state_t *st = NULL;
    gs_status_t *ss = NULL;
    int rc = gs_agent_lease_read_service(a, &st, &ss, err);
    for (int e = 0; rc == 0 && e < a->plan.nservers; e++) {
        int s = server[e];
        if (s >= st->nservers) {
            rc = gs_error_set(err, EPROTO, "the shared MPS's state has no server %d", s);
            break;
        }
        gs_agent_lease_take(a, e, s, st, ss);
    }
    if (rc == 0) {
        a->daemons.n = a->plan.nservers;
        a->daemons.borrowed = 1;
    }
    free(st);
    free(ss);
    return rc;
}

/* A shared agent that ends (its socket gone) holds its dir until its
 * servers have stopped: a job waits that long for the next one to start, at
 * most ENDING_WAIT_MS, then goes on without (an NVML call or a server's stop
 * that hangs must not cost it --mps-timeout). 0 while it may wait. */
static int ending_too_long(gs_agent_t *a, int held, long long *since, gs_error_t *err)
{
    gs_job_t *j = gs_job(a);
    pid_t pid = held ? gs_share_dir_ending(j->share_dir) : 0;
    if (pid == 0) {
        *since = 0;
        return 0;
    }
    long long now = gs_proc_now_ms();
    if (*since == 0) {
        *since = now;
    }
    if (now - *since < ENDING_WAIT_MS) {
        return 0;
    }
    return gs_error_set(err, ETIMEDOUT,
                        "the user's shared MPS agent on this node (PID %d, %s) is ending and "
                        "has not let go of its directory within %d ms (its servers' stop or an "
                        "NVML call is slow or hangs; `kill %d` ends it)",
                        (int)pid, j->share_dir, ENDING_WAIT_MS, (int)pid);
}

int gs_agent_share_join(gs_agent_t *a, gs_error_t *err)
{
    gs_job_t *j = gs_job(a);
    char dir[560], sock[700], req[GS_LINE_MAX];
    gs_lease_req_t q;
    int server[GS_MAX_GPUS], rc, started = 0;
    long long ending_since = 0;
    long long t0 = gs_proc_now_ms(), deadline = gs_proc_now_ms() + (long long)a->o->cfg.timeout_s * 1000;

    if ((rc = gs_agent_share_socket(a, dir, sizeof(dir), sock, sizeof(sock), 1, err)) != 0) {
        return rc;
    }
    /* The shared servers' sockets are longer than a job's own (mps-share/
     * in the user's base): a TMPDIR they do not fit is the job's to find,
     * before a shared agent refuses it as if MPS could not start. */
    char pipe[700];
    snprintf(pipe, sizeof(pipe), "%s/g%d", j->share_dir, GS_MAX_GPUS - 1);
    if (!gs_rundir_socket_fits(pipe)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "its servers' sockets in '%s' would be too long (108 bytes); set "
                            "TMPDIR to a shorter directory to share them",
                            j->share_dir);
    }
    memset(&q, 0, sizeof(q));
    int exclusive = 0;
    for (int e = 0; e < a->plan.nservers; e++) {
        exclusive |= a->servers.gpu[e].exclusive;
    }
    q.linger_s = j->share_linger_s = gs_policy_linger(&a->o->cfg, exclusive);
    lease_name(a, q.job, sizeof(q.job));
    q.n = a->plan.nservers;
    for (int e = 0; e < q.n; e++) {
        snprintf(q.uuid[e], sizeof(q.uuid[e]), "%s", a->servers.gpu[e].uuid);
        q.clients[e] = a->plan.server[e].nranks > 0 ? a->plan.server[e].nranks : 1;
    }
    if (gs_lease_fmt_lease(req, sizeof(req), &q) < 0) {
        return gs_error_set(err, E2BIG, "the lease of %d servers does not fit a message", q.n);
    }
    j->share_refused_own = 0;
    for (;;) {
        rc = try_lease(a, sock, req, server, &j->share_fd, deadline, err);
        if (rc <= 0) {
            /* Refused by the shared agent this job started, with this job's
             * settings: MPS itself failed here, not the sharing. */
            j->share_refused_own = rc < 0 && rc != -ECANCELED && started;
            break;
        }
        if (gs_proc_now_ms() >= deadline) {
            return gs_error_set(err, ETIMEDOUT,
                                "the user's shared MPS on this node (%s) took no lease within "
                                "%d s",
                                j->share_dir, a->o->cfg.timeout_s);
        }
        /* None takes leases: start one (a second start, by another job at
         * the same time or while the last one stops, fails on its lock,
         * and the next try finds the one that won). */
        rc = gs_rundir_ensure(dir, err);
        rc = rc == 0 ? gs_rundir_ensure(j->share_dir, err) : rc;
        if (rc != 0 && rc != -ENOENT) {
            return rc; /* ENOENT: the last shared agent removed it as we looked */
        }
        /* One start while another agent holds the dir is all it takes to
         * know: starting them in a loop would fill the node with agents
         * that each find the dir taken. */
        int held = rc == 0 && gs_share_dir_held(j->share_dir);
        int up = rc != 0 || held ? 1 : spawn(a, dir, err);
        if (up < 0) {
            return up;
        }
        if (up == 0) {
            started = 1;
            continue;
        }
        if ((rc = ending_too_long(a, held, &ending_since, err)) != 0) {
            return rc;
        }
        gs_state_t st;
        gs_error_t ignored;
        if (rc == 0 && gs_state_read(j->share_dir, &st, &ignored) == 0 &&
            st.kind == GS_STATE_ERROR) {
            return gs_error_set(err, EIO, "%s", st.message);
        }
        char none[1]; /* the pause, which the job's end cuts short */
        if (read_reply(a, -1, none, sizeof(none), gs_proc_now_ms() + RETRY_MS, 0) == -ECANCELED) {
            return told_to_stop(err);
        }
    }
    if (rc == 0 && (rc = take_servers(a, server, err)) != 0) {
        gs_agent_share_leave(a);
    }
    if (rc == 0) {
        gs_report_add(&a->report, 0, "the user's shared MPS on this node (%s): %s, leased in %lld ms",
                      j->share_dir, started ? "started for this job" : "found running",
                      gs_proc_now_ms() - t0);
    }
    return rc;
}

/* The job's name as its lease gives it (the job dir's last part). */
static void lease_name(const gs_agent_t *a, char *out, size_t len)
{
    snprintf(out, len, "%s", gs_rundir_job_name(a->o->args.job_dir));
    for (char *p = out; *p != '\0'; p++) {
        *p = *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ? '_' : *p;
    }
}

/* Whether the shared agent's status still lists job on a server. */
static int listed(const gs_status_t *ss, const char *job)
{
    size_t n = strlen(job);
    for (int g = 0; g < ss->nservers; g++) {
        for (const char *p = ss->server[g].jobs; (p = strstr(p, job)) != NULL; p += n) {
            if ((p == ss->server[g].jobs || p[-1] == ' ') && p[n] == ':') {
                return 1;
            }
        }
    }
    return 0;
}

/* A job that gave back the last lease, with no linger asked for: the
 * shared agent stops its servers now. The job's end waits for that
 * (bounded), so that nothing of the job's MPS outlives it, as with servers
 * of its own; it stops waiting as soon as the status shows other jobs'
 * leases without this one's (the servers stay for them). */
static void wait_shared_end(gs_agent_t *a, int dirfd)
{
    gs_job_t *j = gs_job(a);
    char job[96];
    gs_status_t *ss = malloc(sizeof(*ss));
    gs_error_t ignored;
    long long deadline = gs_proc_now_ms() + GS_DAEMON_QUIT_TIMEOUT_MS + 2000;
    lease_name(a, job, sizeof(job));
    while (ss != NULL && gs_proc_now_ms() < deadline) {
        if (flock(dirfd, LOCK_EX | LOCK_NB) == 0) {
            break; /* its lock is free: it has ended */
        }
        if (gs_status_read(j->share_dir, ss, &ignored) == 0 && ss->alive > 0 && !listed(ss, job)) {
            break;
        }
        usleep(5000);
    }
    free(ss);
}

void gs_agent_share_leave(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    if (j->share_fd < 0) {
        return;
    }
    /* A fault its log shows that the shared agent has not told yet (the
     * job's ranks it ended, the job ends at once): its word comes within
     * ms. The log is the user's to write; the shared agent told only what
     * the control daemon confirmed, so nothing else is told. */
    long long end = gs_proc_now_ms() + FAULT_WORD_MS;
    while (j->share_fd >= 0 && gs_agent_fault_untold(a) && gs_proc_now_ms() < end) {
        struct pollfd p = {j->share_fd, POLLIN, 0};
        if (poll(&p, 1, (int)(end - gs_proc_now_ms())) == 1) {
            gs_agent_lease_ready(a, &p, 1); /* its "fault" line: told now */
        }
    }
    if (j->share_fd < 0) {
        return;
    }
    /* The shared agent holds its dir's flock while it runs. */
    int dirfd = open(j->share_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    close(j->share_fd);
    j->share_fd = -1;
    if (dirfd >= 0 && j->share_linger_s == 0 && a->state == GS_AGENT_STOPPING) {
        wait_shared_end(a, dirfd);
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
}
