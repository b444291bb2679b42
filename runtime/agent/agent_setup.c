/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's start and end, around its loop (agent.c): the descriptors it
 * keeps, its signals, the node dir's lock, the guard; then the directories,
 * the report and the guard's release, in the order gsrun relies on. */
#include "gs_autoconf.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/agent/agent_int.h"
#include "runtime/files/preflight.h" /* gs_preflight_claim */
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/files/rundir.h"

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

void gs_agent_init_report(gs_agent_t *a)
{
    const gs_agentcmd_t *g = &a->o->args;
    /* The timeline counts from gsrun's start where gsrun runs the job (the
     * same clock on its node; other nodes' clocks may differ a little). */
    gs_report_init(&a->report, g->node_name, a->o->cfg.verbose,
                   g->t0_ms > 0 ? g->t0_ms : a->started_ms);
    if (g->report == GS_SINK_FILE) {
        gs_report_to_file(&a->report, g->job_dir); /* gsrun reads it on this node */
        if (g->report_fd >= 0) {
            /* gsrun's stderr, for the lines told while the job runs; never
             * passed on (MPS daemons, the user's shared agent). */
            fcntl(g->report_fd, F_SETFD, FD_CLOEXEC);
            a->report.fd = g->report_fd;
        }
    } else {
        gs_report_to_fd(&a->report, g->report, g->report_fd);
    }
}

int gs_agent_setup(gs_agent_t *a, int *lockfd)
{
    const gs_agent_opts_t *o = a->o;
    sigset_t mask;

    detach_stdio(o->args.ready_fd, o->args.report_fd, o->args.watch_fd);
    snprintf(a->node_dir, sizeof(a->node_dir), "%s/%s", o->args.job_dir, o->args.node_name);
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        a->server_mib[e] = -1; /* no NVML look yet: not known (never 0) */
    }
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
    if (o->args.gsrun_pid <= 1) {
        /* Away from gsrun's node the agent owns the job dir: if agent and
         * guard are both killed, a later gsrun here sees it is stale. */
        gs_preflight_claim(o->args.job_dir);
    }
    if (o->args.watch_fd >= 0) {
        a->watch_fd = o->args.watch_fd; /* gsrun holds its other end while mpirun runs */
    } else if (o->args.watch_pid > 1) {
        a->watch_fd = gs_proc_pidfd_open(o->args.watch_pid);
    }
    if (o->args.gsrun_pid > 1) {
        a->gsrun_fd = gs_proc_pidfd_open(o->args.gsrun_pid);
    }
    gs_guard_cleanup_t c = {a->node_dir, o->args.job_dir, o->args.node_name, o->args.gsrun_pid,
                            a->gsrun_fd, a->ready_fd,     &a->report};
    if (gs_guard_start(&a->guard, &c) != 0) {
        gs_report_add(&a->report, 1,
                      "cannot start the agent's guard; a killed agent would "
                      "leave ranks and directories behind");
    }
    return 0;
}

void gs_agent_teardown(gs_agent_t *a, int lockfd)
{
    const gs_agent_opts_t *o = a->o;
    if (a->listen_fd >= 0) {
        close(a->listen_fd);
    }
    if (a->code == 0) {
        /* A file, read by gsrun once we unlock; or lines on a descriptor,
         * written before the dir goes: a rank that finds the dir gone takes
         * the agent for ended, and its launcher may end before lines
         * written later (the component's case). */
        gs_report_write(&a->report);
    }
    /* The node dir goes last, while we still hold its lock. */
    gs_rundir_remove(a->node_dir);
    /* A SIGKILLed gsrun closes its pipe (our launcher watch) in its exit,
     * a moment before its pidfd says it has exited: exiting is gone. */
    if (gs_proctree_gone(o->args.gsrun_pid, a->gsrun_fd)) {
        gs_report_drop_job_dir(o->args.job_dir, o->args.node_name); /* gsrun is not here to */
    }
    gs_guard_release(&a->guard);
    if (a->code == 0) {
        /* Closing the leader's stderr last lets the launcher finish that
         * rank only now. */
        gs_report_deliver(&a->report);
    }
    close(lockfd);
}
