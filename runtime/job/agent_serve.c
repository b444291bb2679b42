/* SPDX-License-Identifier: BSD-3-Clause */
/* What a job agent's socket takes, one row each (verb, the states that
 * take it, handler), and what each waiting state watches besides: the loop
 * is agent_loop.c's. agent.c's states call the waits here; a new message is
 * a row of the table below and its handler. The node service's messages
 * and wait are its own (agent_share.c). */
#include "gs_autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/job/job_int.h"
#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/gpu/affinity.h"
#include "runtime/wire/lease.h"
#include "runtime/wire/protocol.h"

int gs_agent_rank_of_pid(const void *agent, pid_t pid)
{
    return gs_ranks_rank_of_pid(&gs_job_const(agent)->ranks, pid);
}

#define BIT(s) (1u << (s))

/* --- the messages --------------------------------------------------------- */

/* "size <local ranks> <launcher PID>" from the node's first rank (the PID
 * only for `gsrun status`: gsrun's pipe says when the launcher is gone). */
static void on_size(gs_agent_t *a, gs_agent_conn_t *c)
{
    int n = 0, launcher = 0;
    if (gs_protocol_size_parse(c->line, &n, &launcher) != 0) {
        dprintf(c->fd, "error expected the node's size\n");
        close(c->fd);
        return;
    }
    dprintf(c->fd, "ok\n");
    close(c->fd);
    a->watch_pid = launcher;
    a->local_size = n;
    gs_agent_loop_end(a, "the node's size came");
}

/* The answer to a registration names the rank's GPU and how it is followed;
 * with a pidfd the connection is done with, else the rank keeps it. */
static void answer(gs_agent_t *a, gs_rank_t *r, int gpu)
{
    gs_job_t *j = gs_job(a);
    char line[64];
    if (r->conn < 0) {
        return;
    }
    /* The lease's news first: a shared agent that ended before this answer
     * leaves the rank servers of the job's own, not its dead ones. */
    gs_agent_lease_poll(a);
    j->answered++;
    int len = gs_protocol_answer_format(line, sizeof(line), r->is_pidfd, gpu,
                                        a->nstates > 0 ? a->nstates - 1 : 0);
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
    gs_job_t *j = gs_job(a);
    int m = 0;

    gs_report_mark(&a->report, "registered");
    if (gs_placer_pending(&j->placer)) {
        int near = gs_placer_flush(&j->placer, &m);
        gs_report_add(&a->report, 0,
                      "placement by the ranks' cores: %d of %d ranks on a GPU near "
                      "them",
                      near, m);
        for (int i = 0; i < j->ranks.nlive; i++) {
            answer(a, &j->ranks.live[i], gs_placer_gpu(&j->placer, j->ranks.live[i].rank));
        }
    }
    if (j->stop_from >= 0) {
        gs_daemons_stop_from(&a->daemons, j->stop_from, gs_agent_rank_of_pid, a);
        j->stop_from = -1;
    }
    /* Every rank has its answer: now the agent may wait for the servers. */
    gs_agent_confirm_pending(a);
    for (int g = 0; g < j->placer.ngpus && a->o->cfg.verbose; g++) {
        char list[256];
        gs_placer_ranks_text(&j->placer, g, list, sizeof(list));
        char who[48];
        gs_daemons_label(&a->daemons, g, who, sizeof(who));
        gs_report_add(&a->report, 0, "%s (%s): local ranks %s", who, a->servers.gpu[g].uuid,
                      list[0] ? list : "none");
    }
    /* A daemon pinned to a core a rank is bound to moves off it. */
    cpu_set_t bound;
    if (gs_placer_bound_cpus(&j->placer, sysconf(_SC_NPROCESSORS_ONLN), &bound) > 0) {
        gs_daemons_avoid(&a->daemons, &a->servers, &bound);
    }
    gs_agent_write_status(a);
}

/* One registration: "hello <local rank> <its CPUs, or -> [parent]" from a
 * rank about to exec (or its task prolog). The answer may wait for
 * placement. Keeps the connection for the rank, or closes it. Only the
 * job's user registers ranks. */
static void on_hello(gs_agent_t *a, gs_agent_conn_t *c)
{
    gs_job_t *j = gs_job(a);
    int fd = c->fd;
    const char *buf = c->line;
    char cpulist[4100] = "";
    int rank = -1, parent = 0;
    pid_t pid = 0, holder = 0;
    cpu_set_t cpus;

    j->last_change = gs_proc_now_ms();
    if (c->uid != getuid() ||
        gs_protocol_hello_parse(buf, &rank, cpulist, sizeof(cpulist), &parent) != 0 ||
        (pid = gs_ranks_registered_pid(c->pid, parent)) <= 0) {
        dprintf(fd, "error bad registration\n");
        close(fd);
        return;
    }
    if ((holder = gs_ranks_holder(&j->ranks, rank)) > 0) {
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
    if (!gs_ranks_accepts(&j->ranks, rank)) {
        dprintf(fd, "error bad registration\n");
        close(fd);
        return;
    }
    gs_rank_t *r = gs_ranks_add(&j->ranks, pid, rank, fd);
    gs_guard_tell(&a->guard, "rank", pid);
    gs_agent_watch_registered(a, rank, pid);
    int gpu =
        gs_placer_add(&j->placer, rank,
                      cpulist[0] && gs_affinity_cpuset_parse(cpulist, &cpus) == 0 ? &cpus : NULL);
    if (gpu != GS_PLACER_WAIT) {
        answer(a, r, gpu);
    }
    /* Rank start-up waits here: the status file is rewritten once all have
     * come, not once per rank. */
    if (gs_ranks_complete(&j->ranks)) {
        gs_agent_ranks_came(a);
    }
}

/* "stop" from the job's epilog: its connection takes the whole report
 * (the epilog shows what its -v asks for). */
static void on_stop(gs_agent_t *a, gs_agent_conn_t *c)
{
    gs_report_to_fd(&a->report, GS_SINK_EPILOG, c->fd);
    a->report.verbose = 1;
    gs_agent_loop_end(a, "the job's epilog asked");
}

/* A step of the job needs more servers than the job's agent runs (more
 * tasks on a GPU than one server takes): the missing ones are started now,
 * beside those serving other steps, and published. The step's plan must
 * begin with the servers already running (the plans are server-major: the
 * first server of each GPU first), else it is refused. Answers the task
 * prolog that asked: "ok", or "error <why>" (it then runs without them). */
static void add_servers(gs_agent_t *a, int fd, int n, const int *want)
{
    gs_job_t *j = gs_job(a);
    gs_daemons_t *ds = &a->daemons;
    gs_error_t err;
    int per_gpu[GS_MAX_GPUS] = {0}, rc = 0;

    for (int e = 0; e < n && rc == 0; e++) {
        if (want[e] >= a->plan.nused || (e < ds->n && ds->gpu_of[e] != want[e])) {
            rc = gs_error_set(&err, EINVAL,
                              "the step's server %d is on GPU %d, but the job's is on GPU %d of "
                              "%d",
                              e, want[e], e < ds->n ? ds->gpu_of[e] : -1, a->plan.nused);
        }
    }
    if (rc == 0 && n > ds->n) {
        int first = ds->n;
        for (int e = 0; e < n; e++) {
            per_gpu[want[e]]++;
        }
        for (int e = 0, seen[GS_MAX_GPUS] = {0}; e < n; e++) {
            int g = want[e];
            gs_daemons_set_server(ds, e, g, seen[g]++, per_gpu[g]);
            a->plan.server[e].gpu = g;
            a->plan.server[e].server = ds->server_of[e];
            a->plan.server[e].gpu_servers = per_gpu[g];
            if (e >= first) {
                a->servers.gpu[e] = a->gpus.gpu[g];
            }
        }
        a->servers.count = n;
        rc = gs_daemons_add(ds, &a->servers, n, &err);
        if (rc == 0) {
            int none[GS_MAX_GPUS] = {0};
            a->plan.nservers = n;
            gs_placer_free(&j->placer);
            if (gs_placer_init(&j->placer, 0, n, none, a->servers.gpu, 1, 0) != 0) {
                gs_report_add(&a->report, 1, "out of memory for the status");
            }
            gs_agent_confirm_servers_from(a, first);
            gs_agent_publish_on(a);
            gs_agent_write_status(a);
        } else {
            a->servers.count = first;
            gs_agent_count_servers(a, first); /* the running ones, as they were */
        }
    }
    if (rc == 0) {
        dprintf(fd, "ok\n");
    } else {
        gs_report_add(&a->report, 1, "a step's %d MPS servers: %s", n, err.text);
        dprintf(fd, "error %s\n", err.text);
    }
    close(fd);
}

/* "servers <n> <GPU of each>" from a task prolog whose step needs more
 * (taken while holding: job-long only). */
static void on_servers(gs_agent_t *a, gs_agent_conn_t *c)
{
    int n = 0, gpu[GS_MAX_GPUS];
    if (gs_protocol_servers_parse(c->line, GS_MAX_GPUS, &n, gpu) != 0) {
        dprintf(c->fd, "error malformed request for servers\n");
        close(c->fd);
        return;
    }
    add_servers(a, c->fd, n, gpu);
}

/* The job agent's table (the node service has its own: agent_share.c). */
const gs_agent_msg_t gs_agent_job_messages[] = {
    {"size", BIT(GS_AGENT_SIZING), on_size},
    {"hello", BIT(GS_AGENT_SERVING), on_hello},
    {"stop", BIT(GS_AGENT_HOLDING), on_stop},
    {"servers", BIT(GS_AGENT_HOLDING), on_servers},
    {NULL, 0, NULL},
};

/* --- the waiting states --------------------------------------------------- */

int gs_agent_wait_size(gs_agent_t *a)
{
    static const gs_agent_wait_t w = {.launcher = 1};
    a->local_size = 0;
    gs_agent_loop(a, gs_agent_job_messages, &w);
    return a->local_size;
}

static int serving_listens(const gs_agent_t *a)
{
    const gs_job_t *j = gs_job_const(a);
    return !gs_ranks_complete(&j->ranks);
}

static int serving_timeout(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_ranks_t *t = &j->ranks;
    long long timeout = -1;
    if (t->nlive == 0 && !gs_ranks_complete(t)) {
        timeout = 1000; /* ranks still expected: a bound on waiting for them */
    }
    if (gs_placer_pending(&j->placer) && t->nlive > 0) {
        /* Registered ranks wait for placement: bounded by the deadline. */
        long long w = j->placer.deadline_ms - gs_proc_now_ms();
        w = w < 0 ? 0 : w;
        timeout = timeout < 0 || w < timeout ? w : timeout;
    }
    long long give_up = a->started_ms + (long long)a->o->cfg.timeout_s * 1000;
    int t_report =
        gs_report_open_rank0(&a->report, gs_ranks_pid_of_rank(t, 0), gs_proc_wall_ms(), give_up);
    if (t_report >= 0 && (timeout < 0 || t_report < timeout)) {
        timeout = t_report;
    }
    int t_watch = gs_agent_watch_timeout(a), t_stuck = gs_agent_stuck_timeout(a);
    if (t_watch >= 0 && (timeout < 0 || t_watch < timeout)) {
        timeout = t_watch;
    }
    if (t_stuck >= 0 && (timeout < 0 || t_stuck < timeout)) {
        timeout = t_stuck;
    }
    return timeout > 1 << 30 ? 1 << 30 : (int)timeout;
}

static void serving_dropped(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    j->last_change = gs_proc_now_ms();
    gs_agent_watch_dropped(a);
    gs_agent_write_status(a);
}

static void serving_check(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_ranks_t *t = &j->ranks;
    gs_agent_watch_check(a);
    gs_agent_stuck_check(a);
    if (gs_placer_pending(&j->placer) && gs_proc_now_ms() >= j->placer.deadline_ms) {
        gs_report_add(&a->report, 1, "%d of %d ranks registered in %d s; placing those",
                      t->registered, a->local_size, a->o->cfg.timeout_s);
        gs_agent_ranks_came(a);
    }
    if (t->nlive == 0 && gs_ranks_complete(t)) {
        j->ended_whole = 1;
        gs_agent_loop_end(a, "every rank has exited");
    } else if (t->nlive == 0 &&
               gs_proc_now_ms() - j->last_change > (long long)a->o->cfg.timeout_s * 1000 * 2) {
        /* Some ranks never registered (their shim failed) and the rest are
         * gone: keeping MPS up would serve nobody. */
        j->ended_whole = 1;
        gs_agent_loop_end(a, "no rank left and the missing ones never registered");
    }
}

void gs_agent_serve(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    static const gs_agent_wait_t w = {.launcher = 1,
                                      .listening = serving_listens,
                                      .timeout = serving_timeout,
                                      .check = serving_check,
                                      .ranks_dropped = serving_dropped,
                                      .extra = gs_agent_lease_fds, /* its lease */
                                      .extra_ready = gs_agent_lease_ready,
                                      .faults = gs_agent_faults};
    gs_ranks_t *t = &j->ranks;
    j->last_change = gs_proc_now_ms();
    j->ended_whole = 0;
    if (gs_agent_watch_start(a) != 0) {
        gs_report_add(&a->report, 1, "out of memory for the ranks' MPS states");
    }
    const char *why = gs_agent_loop(a, gs_agent_job_messages, &w);
    gs_agent_watch_final(a); /* the logs' last lines: who was a client */
    if (!j->ended_whole && t->nlive > 0) {
        int n = t->nlive;
        int killed = gs_ranks_end(t->live, n, GS_RANKS_TERM_MS);
        gs_report_add(&a->report, 1, "%s while %d rank%s still ran: ended %s (SIGTERM%s)", why, n,
                      n == 1 ? "" : "s", n == 1 ? "it" : "them", killed ? ", then SIGKILL" : "");
        while (t->nlive > 0) {
            gs_ranks_drop(t, t->nlive - 1);
        }
    }
    char served[600];
    gs_agent_watch_summary(a, served, sizeof(served));
    gs_report_add(&a->report, 0, "%s; %s: %s", served,
                  a->daemons.borrowed ? "leaving the shared MPS"
                  : a->daemons.n > 0  ? "stopping MPS"
                                      : "done",
                  why);
    gs_agent_memory_summary(a);
    if (a->daemons.borrowed && j->share_linger_s > 0) {
        /* Said, not hidden: the user's MPS outlives the job on purpose. */
        char opt[64];
        gs_report_add(&a->report, 0,
                      "the user's shared MPS stays up to %d s after the user's last job on this "
                      "node, for the next one to find it warm (%s=0 ends it with the last job)",
                      j->share_linger_s, gs_config_opt(&a->o->cfg, "mps-linger", opt, sizeof(opt)));
    }
}

void gs_agent_hold(gs_agent_t *a)
{
    static const gs_agent_wait_t w = {.launcher = 0, .faults = gs_agent_faults};
    const char *why = gs_agent_loop(a, gs_agent_job_messages, &w);
    gs_report_add(&a->report, 0, "stopping MPS: %s", why);
}

void gs_agent_wait_launcher(gs_agent_t *a)
{
    static const gs_agent_wait_t w = {.launcher = 1};
    if (a->watch_fd >= 0 || (a->watch_pid > 1 && gs_proc_alive(a->watch_pid, -1))) {
        gs_agent_loop(a, gs_agent_job_messages, &w);
    }
}
