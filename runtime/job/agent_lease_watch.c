/* SPDX-License-Identifier: BSD-3-Clause */
/* --mps-share=node, a job's agent while its ranks come and run: what it
 * hears on its lease (agent_lease.c took it): a shared server's death, a
 * fault the shared agent confirmed, a server it renewed, the shared
 * agent's end; an end before every rank was answered gets the ranks still
 * to come servers of the job's own. How an entry takes a shared server is
 * here too, for the lease's first answer and a renewal alike. */
#include "gs_autoconf.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/job/job_int.h"
#include "runtime/files/status.h"
#include "runtime/wire/lease.h"

int gs_agent_lease_read_service(const gs_agent_t *a, gs_state_t **st, gs_status_t **ss,
                                gs_error_t *err)
{
    const gs_job_t *j = gs_job_const(a);
    gs_error_t ignored;
    *st = calloc(1, sizeof(**st));
    *ss = calloc(1, sizeof(**ss));
    if (*st == NULL || *ss == NULL) {
        return gs_error_set(err, ENOMEM, "out of memory");
    }
    int rc = gs_state_read(j->share_dir, *st, err);
    if (rc == 0 && gs_status_read(j->share_dir, *ss, &ignored) != 0) {
        (*ss)->nservers = 0;
    }
    return rc;
}

void gs_agent_lease_take(gs_agent_t *a, int e, int s, const gs_state_t *st,
                         const gs_status_t *ss)
{
    gs_job_t *j = gs_job(a);
    gs_mps_daemon_t *d = &a->daemons.daemon[e];
    int listed = s < ss->nservers;
    /* Another server (a first take, a renewal in new dirs, or a wedged
     * one refilled in its dirs: another daemon, its log emptied). */
    int fresh = strcmp(d->log_dir, st->server[s].log_dir) != 0 ||
                d->daemon_pid != (listed ? ss->server[s].daemon_pid : 0);
    snprintf(d->uuid, sizeof(d->uuid), "%s", st->server[s].uuid);
    snprintf(d->pipe_dir, sizeof(d->pipe_dir), "%s", st->server[s].pipe_dir);
    snprintf(d->log_dir, sizeof(d->log_dir), "%s", st->server[s].log_dir);
    d->daemon_pid = listed ? ss->server[s].daemon_pid : 0;
    d->server_pid[0] = listed ? ss->server[s].server_pid : 0;
    d->server_pidfd[0] = -1; /* the shared agent's: never signalled from here */
    d->nservers = d->server_pid[0] > 0;
    snprintf(a->daemons.pinned[e], sizeof(a->daemons.pinned[e]), "%s",
             listed ? ss->server[s].core : "");
    j->share_server[e] = s;
    if (fresh) {
        /* Its log from its end as it is now: what it says from now on is
         * this job's to hear of (a fresh server's log is a new file, not
         * read on from the old one's offset). */
        char out[GS_PATH_MAX + 16];
        struct stat sb;
        gs_mps_health_init(&a->daemons.health[e]);
        gs_mps_out_path(d, out, sizeof(out));
        a->daemons.health[e].offset = stat(out, &sb) == 0 ? (long long)sb.st_size : 0;
        j->fault_told[e] = 0;
    }
}

/* "renew S": the shared agent replaced its server S after a fault (in new
 * dirs); the job's entries on S take the fresh one, published for the
 * ranks still to come. */
static void renewed(gs_agent_t *a, const char *line)
{
    gs_job_t *j = gs_job(a);
    gs_state_t *st = NULL;
    gs_status_t *ss = NULL;
    gs_error_t err;
    int s;
    if (gs_lease_parse_renew(line, &s) != 0) {
        return;
    }
    if (gs_agent_lease_read_service(a, &st, &ss, &err) == 0 && s < st->nservers) {
        for (int e = 0; e < a->daemons.n; e++) {
            if (j->share_server[e] == s) {
                gs_agent_lease_take(a, e, s, st, ss);
            }
        }
        gs_agent_publish_on(a);
    }
    free(st);
    free(ss);
    gs_agent_write_status(a);
}

/* The shared agent ended (killed, or `gsrun stop --now`) before every rank
 * was told its server: sharing is an optimisation, never a reason to lose
 * MPS, so the ranks still to come get servers of the job's own, started
 * now and published as a new state (their answers name it, and they read
 * it again). Ranks told before keep what they were told: their servers are
 * gone. */
static void own_servers_now(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    const gs_config_t *cfg = &a->o->cfg;
    gs_error_t err;
    char msg[GS_ERROR_LEN + 64];
    int before = j->answered, rc;

    gs_daemons_unborrow(&a->daemons);
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        j->share_server[e] = -1;
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
                      j->share_dir, a->local_size - before, a->local_size, told);
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
    gs_job_t *j = gs_job(a);
    gs_lease_lost_t how;
    int s, code;
    if (gs_lease_parse_lost(line, &s, &how, &code) != 0) {
        return;
    }
    for (int e = 0; e < a->daemons.n; e++) {
        if (j->share_server[e] != s) {
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
    gs_job_t *j = gs_job(a);
    if (j->share_fd >= 0 && max > 0) {
        p[0] = (struct pollfd){j->share_fd, POLLIN, 0};
        return 1;
    }
    return 0;
}

void gs_agent_lease_ready(gs_agent_t *a, const struct pollfd *p, int n)
{
    gs_job_t *j = gs_job(a);
    short revents = n > 0 ? p[0].revents : 0;
    if (!(revents & (POLLIN | POLLHUP | POLLERR))) {
        return;
    }
    char buf[4096]; /* each line one write, shorter than this */
    ssize_t got = (revents & POLLIN) ? read(j->share_fd, buf, sizeof(buf) - 1) : 0;
    if (got > 0) {
        buf[got] = '\0';
        for (char *line = buf, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
            *nl = '\0';
            gs_lease_kind_t kind = gs_lease_kind(line);
            const char *text;
            if (kind == GS_LEASE_FAULT) {
                gs_agent_fault_told(a, line);
            } else if (kind == GS_LEASE_RENEW) {
                renewed(a, line);
            } else if (gs_lease_parse_wedged_told(line, &text) == 0) {
                /* A wedged server the shared agent replaced for this job. */
                gs_report_tell(&a->report, "%s", text);
            } else {
                on_lost(a, line);
            }
        }
        return;
    }
    close(j->share_fd);
    j->share_fd = -1;
    if (a->state == GS_AGENT_SERVING && j->answered < a->local_size) {
        own_servers_now(a);
        return;
    }
    gs_report_add(&a->report, 1,
                  "the user's shared MPS on this node (%s) ended while this job ran: its "
                  "servers are gone",
                  j->share_dir);
}

void gs_agent_lease_poll(gs_agent_t *a)
{
    struct pollfd p;
    if (gs_agent_lease_fds(a, &p, 1) == 1 && poll(&p, 1, 0) == 1) {
        gs_agent_lease_ready(a, &p, 1);
    }
}
