/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's life: lock the node dir, plan, start MPS, publish the
 * node state, serve the ranks, tear down, report. The parts are in
 * agent_mps.c, agent_ranks.c, agent_guard.c and agent_report.c. */
#include "gs_autoconf.h"

#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent_int.h"
#include "preflight.h"
#include "proc.h"
#include "rundir.h"
#include "state.h"

static void signal_ready(gs_agent_t *a, const char *word)
{
    if (a->o->ready_fd >= 0) {
        if (write(a->o->ready_fd, word, strlen(word)) < 0) {
            /* The leader is gone; the state file still tells the others. */
        }
        close(a->o->ready_fd);
        ((gs_agent_opts_t *)a->o)->ready_fd = -1;
    }
}

static void publish(gs_agent_t *a, gs_state_t *st, const char *word)
{
    gs_error_t err;
    if (gs_state_write(a->node_dir, st, &err) != 0) {
        gs_agent_report(a, 1, "%s", err.text);
    }
    signal_ready(a, word);
}

/* Publishes a state without MPS: off (with or without a notice the node
 * leader prints; the ranks still register through sock) or an error (exit
 * code for the ranks). The report keeps the message for -v. */
void gs_agent_publish_without_mps(gs_agent_t *a, gs_state_kind_t kind, int notice, int code,
                                  const char *msg, const char *sock)
{
    static gs_state_t st;
    memset(&st, 0, sizeof(st));
    st.kind = kind;
    st.notice = notice;
    st.exit_code = code;
    snprintf(st.message, sizeof(st.message), "%s", msg);
    snprintf(st.socket, sizeof(st.socket), "%s", sock ? sock : "");
    /* Without MPS the ranks still get a GPU each (gpu-bind): the list. */
    st.ngpus = kind == GS_STATE_OFF ? a->place_n : 0;
    for (int g = 0; g < st.ngpus; g++) {
        st.gpu[g].nranks = a->place_target[g];
        snprintf(st.gpu[g].uuid, sizeof(st.gpu[g].uuid), "%s", a->gpus.gpu[g].uuid);
    }
    for (int g = 1; g < st.ngpus; g++) {
        st.gpu[g].first_rank = st.gpu[g - 1].first_rank + st.gpu[g - 1].nranks;
    }
    gs_agent_report(a, 0, "%s%s", kind == GS_STATE_OFF ? "MPS off: " : "", msg);
    publish(a, &st, kind == GS_STATE_ERROR ? "error\n" : "ok\n");
}

void gs_agent_publish_on(gs_agent_t *a, const char *sock)
{
    static gs_state_t st;
    memset(&st, 0, sizeof(st));
    st.kind = GS_STATE_ON;
    snprintf(st.socket, sizeof(st.socket), "%s", sock);
    st.mem_limit_mb = a->o->cfg.mem_limit_mb;
    st.ngpus = a->plan.ngpus;
    for (int g = 0; g < a->plan.ngpus; g++) {
        const gs_gpu_share_t *s = &a->plan.gpu[g];
        gs_state_gpu_t *sg = &st.gpu[g];
        sg->first_rank = s->first_rank;
        sg->nranks = s->nranks;
        sg->pct_set = s->pct_set;
        if (s->pct_set) {
            gs_policy_format_percentage(s->pct, sg->pct, sizeof(sg->pct));
        }
        snprintf(sg->uuid, sizeof(sg->uuid), "%s", a->daemon[g].uuid);
        snprintf(sg->pipe_dir, sizeof(sg->pipe_dir), "%s", a->daemon[g].pipe_dir);
        snprintf(sg->log_dir, sizeof(sg->log_dir), "%s", a->daemon[g].log_dir);
    }
    publish(a, &st, "ok\n");
}

/* The ranks are on their way; record the servers (for teardown) and confirm
 * that each daemon runs one. */
static void confirm_servers(gs_agent_t *a)
{
    gs_error_t err;
    for (int g = 0; g < a->plan.ngpus; g++) {
        const gs_gpu_share_t *s = &a->plan.gpu[g];
        gs_mps_daemon_t *d = &a->daemon[g];
        char pct[24] = "100 (unset)";
        if (a->prestart &&
            gs_mps_record_servers(d, a->control, GS_AGENT_QUIT_TIMEOUT_MS, &err) != 0) {
            gs_agent_report(a, 1, "GPU %d (%s): %s", g, d->uuid, err.text);
        }
        for (int i = 0; i < d->nservers; i++) {
            gs_agent_guard_tell(a, "mps", d->server_pid[i]);
        }
        if (s->pct_set) {
            gs_policy_format_percentage(s->pct, pct, sizeof(pct));
        }
        gs_agent_report(a, 0,
                        "GPU %d (%s, %s): MPS control daemon %d on %s, server %d, %d rank%s at "
                        "%s%%, ready in %lld ms",
                        g, a->gpus.gpu[g].name, d->uuid, (int)d->daemon_pid, a->pinned[g],
                        (int)d->server_pid[0], s->nranks, s->nranks == 1 ? "" : "s", pct,
                        d->ready_ms - d->start_ms);
        if (!a->prestart) {
            gs_agent_report(a, 0, "GPU %d: server not started in advance (GSRUN_MPS_PRESTART=0): "
                                  "the first rank that uses CUDA starts it", g);
        }
    }
}

void gs_agent_discover(gs_agent_t *a)
{
    gs_error_t err;
    int rc = gs_gpu_discover(&a->gpus, &err);

    if (rc == 0) {
        rc = gs_gpu_filter_visible(&a->gpus, getenv("CUDA_VISIBLE_DEVICES"), &err);
    }
    if (rc != 0) {
        snprintf(a->gpus.reason, sizeof(a->gpus.reason), "%s", err.text);
        a->gpus.count = 0;
    }
    a->have_control = gs_config_find_executable(a->o->cfg.control, GS_CONTROL_SEARCH_DIRS,
                                                "MPS control program", a->control,
                                                sizeof(a->control), &err) == 0;
    a->control_error[0] = '\0';
    if (!a->have_control) {
        snprintf(a->control_error, sizeof(a->control_error), "%s", err.text);
    }
    a->discovered = 1;
}

int gs_agent_plan(gs_agent_t *a)
{
    gs_error_t err;

    if (!a->discovered) {
        gs_agent_discover(a);
    }
    if (gs_plan_compute(&a->o->cfg, a->o->local_size, a->gpus.count, a->have_control,
                        a->control_error, &a->plan, &err) != 0) {
        gs_agent_publish_without_mps(a, GS_STATE_ERROR, 0, GS_EXIT_UNAVAILABLE, err.text, NULL);
        return GS_EXIT_UNAVAILABLE;
    }
    return 0;
}

/* Starts MPS where the plan wants it and publishes the node state. Returns
 * 0 when the ranks can come (MPS on or off), or a node-wide exit code. */
static int start_node(gs_agent_t *a, long long t_start)
{
    gs_error_t err;
    char msg[1200];
    int mps_failed = 0, rc = 0;

    if (a->early_rc != 0) {
        rc = a->early_rc; /* MPS was tried before the ranks came, and failed */
        err = a->early_err;
    } else if (a->plan.use_mps) {
        rc = gs_agent_start_mps(a, a->plan.ngpus, &err); /* the ones not running yet */
    }
    if (a->plan.use_mps && rc != 0) {
        if (a->o->cfg.mps != GS_MPS_AUTO) {
            gs_agent_publish_without_mps(a, GS_STATE_ERROR, 0, GS_EXIT_SETUP, err.text, NULL);
            return GS_EXIT_SETUP;
        }
        snprintf(msg, sizeof(msg), "MPS could not start: %s; running without MPS", err.text);
        mps_failed = 1;
    }
    a->ranks = calloc((size_t)a->o->local_size, sizeof(*a->ranks));
    a->seen = calloc((size_t)a->o->local_size, sizeof(*a->seen));
    if (a->ranks == NULL || a->seen == NULL ||
        gs_agent_place_init(a, a->plan.use_mps && !mps_failed) != 0 ||
        (a->listen_fd < 0 && gs_agent_listen(a, &err) != 0)) {
        gs_agent_stop_mps(a);
        gs_agent_publish_without_mps(a, GS_STATE_ERROR, 0, GS_EXIT_SETUP,
                            a->ranks ? err.text : "out of memory", NULL);
        return GS_EXIT_SETUP;
    }
    if (mps_failed) {
        gs_agent_publish_without_mps(a, GS_STATE_OFF, 1, 0, msg, a->sock);
    } else if (!a->plan.use_mps && a->gpus.count == 0 && a->o->cfg.mps != GS_MPS_OFF) {
        snprintf(msg, sizeof(msg), "no NVIDIA GPU found on this node (%s); running without MPS",
                 a->gpus.reason);
        gs_agent_publish_without_mps(a, GS_STATE_OFF, 1, 0, msg, a->sock);
    } else if (!a->plan.use_mps) {
        gs_agent_publish_without_mps(a, GS_STATE_OFF, a->plan.notice, 0, a->plan.reason, a->sock);
    } else {
        gs_agent_mark(a, "mps ready");
        gs_agent_publish_on(a, a->sock);
        gs_agent_mark(a, "published");
        if (a->early_ready_ms > 0) {
            gs_agent_report(a, 0, "MPS ready %lld ms after the agent started, %lld ms before the "
                                  "node's first rank came (started by gsrun before mpirun)",
                            a->early_ready_ms - t_start, a->size_ms - a->early_ready_ms);
        } else {
            gs_agent_report(a, 0, "MPS ready for the ranks %lld ms after the agent started",
                            gs_now_ms() - t_start);
        }
        confirm_servers(a);
    }
    if (a->o->cfg.mem_limit_mb > 0 && !(a->plan.use_mps && !mps_failed)) {
        char opt[64];
        gs_agent_report(a, 0, "%s applies to MPS clients only; not set (MPS is off)",
                        gs_config_opt(&a->o->cfg, "mps-memory-limit", opt, sizeof(opt)));
    }
    gs_agent_write_status(a);
    return 0;
}

void gs_agent_drop_job_dir(const gs_agent_t *a)
{
    const gs_agent_opts_t *o = a->o;
    char path[512];

    if (o->gsrun_pid > 1 && gs_proc_alive(o->gsrun_pid, a->gsrun_fd)) {
        return; /* gsrun reads the report and removes the job dir */
    }
    snprintf(path, sizeof(path), "%s/%s.report", o->job_dir, o->node_name);
    unlink(path);
    snprintf(path, sizeof(path), "%s/%s", o->job_dir, GS_OWNER_FILE);
    unlink(path);
    rmdir(o->job_dir);
}

/* After a node-wide error the ranks read the state file and exit; it stays
 * until the launcher, and with it every rank of this node, is gone. */
static void wait_for_launcher(gs_agent_t *a)
{
    while (a->watch_fd >= 0 || (a->o->watch_pid > 1 && gs_proc_alive(a->o->watch_pid, -1))) {
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

static void close_from(int first, int last)
{
    if (first > last) {
        return;
    }
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, (unsigned)last, 0) == 0) {
        return;
    }
#endif
    for (int fd = first; fd <= last; fd++) {
        close(fd);
    }
}

/* The agent must not hold the rank's stdout/stderr (mpirun waits for them
 * to close) nor any other descriptor it inherited, except the ready pipe,
 * the report descriptor and the launcher pipe it was given (-1: none). */
static void detach_stdio(int k1, int k2, int k3)
{
    int keep[3] = {k1, k2, k3}, next = 3;
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        if (devnull > 2) {
            close(devnull);
        }
    }
    for (int i = 0; i < 3; i++) { /* in ascending order */
        for (int j = i + 1; j < 3; j++) {
            if (keep[j] < keep[i]) {
                int t = keep[i];
                keep[i] = keep[j];
                keep[j] = t;
            }
        }
    }
    for (int i = 0; i < 3; i++) {
        if (keep[i] >= next) {
            close_from(next, keep[i] - 1);
            next = keep[i] + 1;
        }
    }
    close_from(next, 65535);
}

static int setup(gs_agent_t *a, int *lockfd)
{
    const gs_agent_opts_t *o = a->o;
    sigset_t mask;

    detach_stdio(o->ready_fd, o->report_fd, o->watch_fd);
    snprintf(a->node_dir, sizeof(a->node_dir), "%s/%s", o->job_dir, o->node_name);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    a->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    /* gsrun takes this lock after the job to know the agent has finished. */
    *lockfd = open(a->node_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (*lockfd < 0 || flock(*lockfd, LOCK_EX | LOCK_NB) != 0) {
        return -1;
    }
    if (o->gsrun_pid <= 1) {
        /* Away from gsrun's node the agent owns the job dir: if agent and
         * guard are both killed, a later gsrun here sees it is stale. */
        gs_rundir_claim(o->job_dir);
    }
    if (o->watch_fd >= 0) {
        a->watch_fd = o->watch_fd; /* gsrun holds its other end while mpirun runs */
    } else if (o->watch_pid > 1) {
        a->watch_fd = gs_proc_pidfd_open(o->watch_pid);
    }
    if (o->gsrun_pid > 1) {
        a->gsrun_fd = gs_proc_pidfd_open(o->gsrun_pid);
    }
    if (gs_agent_guard_start(a) != 0) {
        gs_agent_report(a, 1, "cannot start the agent's guard; a killed agent would leave "
                              "ranks and directories behind");
    }
    return 0;
}

int gs_agent_main(const gs_agent_opts_t *o)
{
    static gs_agent_t agent;
    gs_agent_t *a = &agent;
    int lockfd = -1, code;
    long long t_start = gs_now_ms();

    memset(a, 0, sizeof(*a));
    a->o = o;
    a->stop_from = -1;
    a->started_ms = gs_wall_ms();
    /* The timeline counts from gsrun's start where gsrun runs the job (the
     * same clock on its node; other nodes' clocks may differ a little). */
    const char *t0 = getenv("GSRUN_T0");
    a->t0_ms = t0 != NULL && atoll(t0) > 0 ? atoll(t0) : a->started_ms;
    gs_agent_mark(a, "agent");
    a->listen_fd = a->sig_fd = a->watch_fd = a->gsrun_fd = a->guard_fd = -1;
    if (setup(a, &lockfd) != 0) {
        /* Another agent holds this node dir: never share one between jobs,
         * and leave its state alone. The leader reports the agent's end. */
        signal_ready(a, "error\n");
        return GS_EXIT_RUNDIR;
    }
    a->prestart = getenv("GSRUN_MPS_PRESTART") == NULL || atoi(getenv("GSRUN_MPS_PRESTART")) != 0;
    if (o->job_long) {
        code = gs_agent_job_main(a);
        goto done;
    }
    code = o->early ? gs_agent_early_start(a) : gs_agent_plan(a);
    gs_agent_mark(a, "planned");
    int nobody = code == GS_AGENT_NO_RANKS;
    if (nobody) {
        /* Started by gsrun on its node, which had no rank of the job. */
        gs_agent_stop_mps(a);
        gs_agent_report(a, 0, "no rank of the job ran on this node");
        code = 0;
    } else if (code == 0) {
        code = start_node(a, t_start);
    }
    if (code == 0 && !nobody) {
        gs_agent_serve(a);
        gs_agent_mark(a, "ranks gone");
        gs_agent_stop_mps(a);
        gs_agent_mark(a, "mps stopped");
        if (o->cfg.verbose >= 2) {
            gs_agent_report(a, 0, "timeline (ms after gsrun started): %s", a->timeline);
        }
    } else {
        gs_agent_deliver_report(a);
        gs_agent_guard_tell(a, "noreport", 0);
        wait_for_launcher(a);
    }
done:
    if (a->listen_fd >= 0) {
        close(a->listen_fd);
    }
    free(a->ranks);
    free(a->seen);
    gs_agent_place_free(a);
    if (code == 0 && o->gsrun_pid > 1) {
        gs_agent_deliver_report(a); /* a file, read by gsrun once we unlock */
    }
    /* The node dir goes last, while we still hold its lock. */
    gs_rundir_remove(a->node_dir);
    gs_agent_drop_job_dir(a);
    gs_agent_guard_release(a);
    if (code == 0 && o->gsrun_pid <= 1) {
        /* Lines for gsrun through the launcher; closing the leader's stderr
         * last lets the launcher finish that rank only now. */
        gs_agent_deliver_report(a);
    }
    close(lockfd);
    return code;
}
