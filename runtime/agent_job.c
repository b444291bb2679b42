/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent `gsrun prolog` starts for a whole batch job (a Slurm Prolog, a
 * PBS prologue): no rank registers and the number of tasks is not known, so
 * MPS starts on every visible GPU with no share of its own (each task's
 * share is in its environment: `gsrun task-prolog` works it out per step),
 * and stays until `gsrun epilog` asks it to stop. The agent then writes its
 * report on that connection, so that the epilog's output has it. */
#include "gs_autoconf.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_int.h"
#include "proc.h"

/* Starts MPS on every visible GPU and publishes the state: on, or off (auto:
 * why, for the tasks and the prolog) or an error (on). */
static int provision(gs_agent_t *a)
{
    const gs_config_t *cfg = &a->o->cfg;
    gs_error_t err;
    char msg[1200];
    int n = a->gpus.count < GS_MAX_GPUS ? a->gpus.count : GS_MAX_GPUS;
    int code = cfg->mps == GS_MPS_ON ? GS_EXIT_UNAVAILABLE : 0;
    gs_state_kind_t failed = code != 0 ? GS_STATE_ERROR : GS_STATE_OFF;

    memset(&a->plan, 0, sizeof(a->plan));
    if (n == 0) {
        snprintf(msg, sizeof(msg), "no NVIDIA GPU found on this node (%s)", a->gpus.reason);
    } else if (!a->have_control) {
        snprintf(msg, sizeof(msg), "%s", a->control_error);
    } else if (gs_agent_start_mps(a, n, &err) != 0) {
        snprintf(msg, sizeof(msg), "MPS could not start: %s", err.text);
        code = code != 0 ? GS_EXIT_SETUP : 0;
    } else {
        a->plan.use_mps = 1;
        a->plan.ngpus = n;
        a->place_n = n; /* the GPUs `gsrun status` lists */
        for (int g = 0; g < n; g++) {
            gs_mps_daemon_t *d = &a->daemon[g];
            /* The servers, for teardown, the guard and the report. */
            if (a->prestart && gs_mps_record_servers(d, a->control, GS_AGENT_QUIT_TIMEOUT_MS,
                                                     &err) != 0) {
                gs_agent_report(a, 1, "GPU %d (%s): %s", g, d->uuid, err.text);
            }
            for (int i = 0; i < d->nservers; i++) {
                gs_agent_guard_tell(a, "mps", d->server_pid[i]);
            }
            gs_agent_report(a, 0, "GPU %d (%s, %s): MPS control daemon %d on %s, server %d, for "
                                  "the job's tasks, ready in %lld ms",
                            g, a->gpus.gpu[g].name, d->uuid, (int)d->daemon_pid, a->pinned[g],
                            (int)d->server_pid[0], d->ready_ms - d->start_ms);
        }
        /* The prolog returns on the state: `gsrun status` must show the job by then. */
        gs_agent_write_status(a);
        gs_agent_publish_on(a, a->sock);
        return 0;
    }
    snprintf(a->plan.reason, sizeof(a->plan.reason), "%s", msg);
    if (code == 0) {
        strncat(msg, "; the job runs without MPS", sizeof(msg) - strlen(msg) - 1);
    }
    gs_agent_publish_without_mps(a, failed, 1, code, msg, a->sock);
    gs_agent_write_status(a);
    return code;
}

/* Waits for "stop" on the socket (its connection becomes the report's way
 * out) or a signal. */
static void wait_for_stop(gs_agent_t *a)
{
    for (;;) {
        struct pollfd p[2] = {{a->listen_fd, POLLIN, 0}, {a->sig_fd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) {
            return;
        }
        if ((p[1].revents & POLLIN) && gs_agent_read_signals(a) != NULL) {
            gs_agent_report(a, 0, "stopping MPS: the agent was told to stop");
            return;
        }
        if (p[0].revents & POLLIN) {
            char buf[32];
            int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) {
                continue;
            }
            /* The node dir is 0700: only the job's user (or root) gets here. */
            if (gs_read_line(fd, buf, sizeof(buf), gs_now_ms() + 2000) > 0 &&
                strcmp(buf, "stop\n") == 0) {
                /* The whole report: the epilog shows what its -v asks for. */
                ((gs_agent_opts_t *)a->o)->report_fd = fd;
                ((gs_agent_opts_t *)a->o)->cfg.verbose = 1;
                gs_agent_report(a, 0, "stopping MPS: the job's epilog asked");
                return;
            }
            close(fd);
        }
    }
}

int gs_agent_job_main(gs_agent_t *a)
{
    gs_error_t err;
    int code;

    if (gs_agent_listen(a, &err) != 0) {
        gs_agent_publish_without_mps(a, GS_STATE_ERROR, 0, GS_EXIT_SETUP, err.text, NULL);
        return GS_EXIT_SETUP;
    }
    gs_agent_discover(a);
    code = provision(a);
    wait_for_stop(a);
    gs_agent_stop_mps(a);
    return code;
}
