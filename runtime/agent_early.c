/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent gsrun starts on its own node before mpirun, so that finding the
 * GPUs and starting MPS happen while mpirun launches instead of while the
 * first rank waits. The daemons do not depend on how many ranks come (each
 * rank's share is in its own environment), so they start on every visible
 * GPU; once the node's first rank says how many ranks the node has, the
 * plan is made and the daemons it does not use are stopped. */
#include "gs_autoconf.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_int.h"
#include "proc.h"

/* One line to gsrun on the ready pipe ("listening", or "error CODE"). */
static void tell_gsrun(gs_agent_t *a, const char *word, int x, int y)
{
    if (a->o->ready_fd >= 0) {
        dprintf(a->o->ready_fd, "%s %d %d\n", word, x, y);
    }
}

/* One connection from the node's first rank: "size <local ranks>
 * <launcher PID>\n" (the PID only for `gsrun status`: the pipe from gsrun
 * says when the launcher is gone). Returns the size, 0 if the launcher ended
 * first or the agent was told to stop. */
static int wait_for_size(gs_agent_t *a)
{
    gs_agent_opts_t *o = (gs_agent_opts_t *)a->o;
    for (;;) {
        struct pollfd p[3] = {{a->listen_fd, POLLIN, 0}, {a->watch_fd, POLLIN, 0},
                              {a->sig_fd, POLLIN, 0}};
        if (poll(p, 3, -1) < 0 && errno != EINTR) {
            return 0;
        }
        if ((p[2].revents & POLLIN) && gs_agent_read_signals(a) != NULL) {
            return 0;
        }
        if (p[0].revents & POLLIN) {
            char buf[64];
            int n = 0, launcher = 0, fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) {
                continue;
            }
            /* The node dir is 0700: only the job's user can connect here. */
            if (gs_read_line(fd, buf, sizeof(buf), gs_now_ms() + 2000) > 0 &&
                sscanf(buf, "size %d %d", &n, &launcher) >= 1 && n > 0 && n <= 1 << 20) {
                dprintf(fd, "ok\n");
                close(fd);
                o->watch_pid = launcher > 1 ? launcher : 0;
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

int gs_agent_early_start(gs_agent_t *a)
{
    gs_agent_opts_t *o = (gs_agent_opts_t *)a->o;

    if (gs_agent_listen(a, &a->early_err) != 0) {
        tell_gsrun(a, "error", GS_EXIT_SETUP, 0);
        return GS_EXIT_SETUP;
    }
    tell_gsrun(a, "listening", 0, 0);
    gs_agent_discover(a);
    gs_agent_mark(a, "discovered");
    /* A server holds a GPU in an exclusive compute mode: one that the plan
     * leaves to a rank without MPS must not have one. There the servers
     * wait for the plan. */
    int prestart = a->prestart, exclusive = 0;
    for (int g = 0; g < a->gpus.count; g++) {
        exclusive |= a->gpus.gpu[g].exclusive;
    }
    if (o->cfg.mps != GS_MPS_OFF && a->gpus.count > 0 && a->have_control) {
        int n = a->gpus.count < GS_MAX_GPUS ? a->gpus.count : GS_MAX_GPUS;
        a->prestart = prestart && !exclusive;
        a->early_rc = gs_agent_start_mps(a, n, &a->early_err);
        a->prestart = prestart;
        a->early_ready_ms = gs_now_ms();
        gs_agent_mark(a, "mps started");
    }
    gs_agent_write_status(a); /* `gsrun status` sees the job while mpirun launches */
    int size = wait_for_size(a);
    a->size_ms = gs_now_ms();
    gs_agent_mark(a, "size");
    if (size == 0) {
        return GS_AGENT_NO_RANKS;
    }
    o->local_size = size;
    int code = gs_agent_plan(a);
    if (code != 0) {
        gs_agent_stop_mps(a); /* the node fails: nothing to wait for */
    } else if (!a->plan.use_mps || a->plan.ngpus < a->ndaemons) {
        /* Daemons the plan does not use stop once the ranks have registered:
         * stopping a server takes up to 100 ms, which the ranks must not wait
         * for. */
        a->stop_from = a->plan.use_mps ? a->plan.ngpus : 0;
    }
    if (!a->plan.use_mps) {
        a->early_rc = 0; /* no MPS wanted: a failed start does not matter */
    } else if (code == 0 && a->early_rc == 0 && prestart && exclusive) {
        a->early_rc = gs_agent_start_servers(a, a->plan.ngpus, &a->early_err);
    }
    return code;
}
