/* SPDX-License-Identifier: BSD-3-Clause */
/* --mps-share=node, a job's agent while its ranks come and run: what it
 * hears on its lease (agent_lease.c took it): a shared server's death, a
 * fault the shared agent confirmed, the shared agent's end; an end before
 * every rank was answered gets the ranks still to come servers of the
 * job's own. */
#include "gs_autoconf.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/agent/agent_int.h"
#include "runtime/wire/lease.h"

/* The shared agent ended (killed, or `gsrun stop --now`) before every rank
 * was told its server: sharing is an optimisation, never a reason to lose
 * MPS, so the ranks still to come get servers of the job's own, started
 * now and published as a new state (their answers name it, and they read
 * it again). Ranks told before keep what they were told: their servers are
 * gone. */
static void own_servers_now(gs_agent_t *a)
{
    const gs_config_t *cfg = &a->o->cfg;
    gs_error_t err;
    char msg[GS_ERROR_LEN + 64];
    int before = a->answered, rc;

    gs_daemons_unborrow(&a->daemons);
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        a->share_server[e] = -1;
    }
    rc = gs_daemons_start(&a->daemons, &a->servers, a->plan.nservers, &err);
    char told[96] = "";
    if (before > 0) {
        snprintf(told, sizeof(told), " (the %d told before were given the servers that ended)",
                 before);
    }
    if (rc == 0) {
        gs_report_add(&a->report, 1,
                      "the user's shared MPS on this node (%s) ended before %d of the job's %d "
                      "ranks were told their servers: this job runs MPS servers of its own for "
                      "them%s",
                      a->share_dir, a->local_size - before, a->local_size, told);
        gs_agent_publish_on(a);
    } else if (cfg->mps == GS_MPS_ON) {
        snprintf(msg, sizeof(msg),
                 "the user's shared MPS on this node ended before the job's "
                 "ranks came, and MPS could not start: %s",
                 err.text);
        gs_agent_publish_without_mps(a, GS_STATE_ERROR, 1, GS_EXIT_SETUP, msg, 1);
        a->code = GS_EXIT_SETUP;
    } else {
        snprintf(msg, sizeof(msg),
                 "the user's shared MPS on this node ended before the job's "
                 "ranks came, and MPS could not start: %s; running without MPS%s",
                 err.text, told);
        a->plan.use_mps = 0;
        gs_agent_publish_without_mps(a, GS_STATE_OFF, 1, 0, msg, 1);
    }
    gs_agent_write_status(a);
}

/* A job's agent: "lost S how N" from the shared agent, said of each of the
 * job's servers that is shared server S. */
static void on_lost(gs_agent_t *a, const char *line)
{
    gs_lease_lost_t how;
    int s, code;
    if (gs_lease_parse_lost(line, &s, &how, &code) != 0) {
        return;
    }
    for (int e = 0; e < a->daemons.n; e++) {
        if (a->share_server[e] != s) {
            continue;
        }
        char who[48];
        gs_daemons_label(&a->daemons, e, who, sizeof(who));
        a->daemons.daemon[e].daemon_pid = 0;
        if (how == GS_LEASE_LOST_WEDGED) {
            gs_report_add(&a->report, 1, "%s (%s): the shared MPS server did not answer, the "
                          "user's node service ended it and no fresh one could start: ranks on "
                          "this server lost MPS", who, a->daemons.daemon[e].uuid);
            continue;
        }
        gs_report_add(&a->report, 1,
                      "%s (%s): the shared MPS control daemon exited while the job ran (%s %d); "
                      "ranks on this server lost MPS",
                      who, a->daemons.daemon[e].uuid, gs_lease_lost_word(how), code);
    }
    gs_agent_write_status(a);
}

int gs_agent_lease_fds(gs_agent_t *a, struct pollfd *p, int max)
{
    if (a->share_fd >= 0 && max > 0) {
        p[0] = (struct pollfd){a->share_fd, POLLIN, 0};
        return 1;
    }
    return 0;
}

void gs_agent_lease_ready(gs_agent_t *a, const struct pollfd *p, int n)
{
    short revents = n > 0 ? p[0].revents : 0;
    if (!(revents & (POLLIN | POLLHUP | POLLERR))) {
        return;
    }
    char buf[4096]; /* each line one write, shorter than this */
    ssize_t got = (revents & POLLIN) ? read(a->share_fd, buf, sizeof(buf) - 1) : 0;
    if (got > 0) {
        buf[got] = '\0';
        for (char *line = buf, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
            *nl = '\0';
            gs_lease_kind_t kind = gs_lease_kind(line);
            const char *text;
            if (kind == GS_LEASE_FAULT || kind == GS_LEASE_RENEW) {
                gs_agent_fault_told(a, line);
            } else if (gs_lease_parse_wedged_told(line, &text) == 0) {
                /* A wedged server the shared agent replaced for this job. */
                gs_report_tell(&a->report, "%s", text);
            } else {
                on_lost(a, line);
            }
        }
        return;
    }
    close(a->share_fd);
    a->share_fd = -1;
    if (a->state == GS_AGENT_SERVING && a->answered < a->local_size) {
        own_servers_now(a);
        return;
    }
    gs_report_add(&a->report, 1,
                  "the user's shared MPS on this node (%s) ended while this job ran: its "
                  "servers are gone",
                  a->share_dir);
}

void gs_agent_lease_poll(gs_agent_t *a)
{
    struct pollfd p;
    if (gs_agent_lease_fds(a, &p, 1) == 1 && poll(&p, 1, 0) == 1) {
        gs_agent_lease_ready(a, &p, 1);
    }
}
