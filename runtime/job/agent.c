/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent: one loop through a table of states, the only code that
 * knows every part. Each state's step does its work with the parts and
 * names the next state; the table says which transitions exist, and a step
 * that names another is a bug reported as such (agent_run.c runs it). The
 * three modes of a job's agent (per job, early, job-long) are paths through
 * the same table:
 *
 *   per job   DISCOVERING > PLANNING > STARTING > SERVING > STOPPING > DONE
 *   early     DISCOVERING > PRESTARTING > SIZING > PLANNING > STARTING > SERVING > ...
 *   job-long  DISCOVERING > STARTING > HOLDING > STOPPING > DONE
 *
 * and a node-wide error goes to FAILED (report, wait for the launcher). The
 * user's node service (--mps-share=node) is a program of its own, with its
 * own table: agent_service.c. */
#include "gs_autoconf.h"

#include "runtime/agent/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/job/job_int.h"
#include "runtime/core/proc.h"
#include "runtime/wire/protocol.h"

#define BIT(s) (1u << (s))

/* --- the steps ----------------------------------------------------------- */

/* Early: one line to gsrun on the ready pipe, which stays open for "ok". */
static void tell_starter(gs_agent_t *a, int code)
{
    char line[64];
    int len = gs_protocol_ready_format(line, sizeof(line), code);
    if (a->ready_fd >= 0 && len > 0 && write(a->ready_fd, line, (size_t)len) < 0) {
        /* gsrun is gone: it sees nothing either way */
    }
}

static gs_agent_state_t discovering(gs_agent_t *a)
{
    gs_error_t err;

    if (a->mode != GS_MODE_PER_JOB && gs_agent_listen(a, &err) != 0) {
        if (a->mode == GS_MODE_EARLY) {
            tell_starter(a, GS_EXIT_SETUP); /* gsrun reads this */
            return gs_agent_fail(a, GS_EXIT_SETUP, err.text, 0);
        }
        gs_agent_publish_without_mps(a, GS_STATE_ERROR, 0, GS_EXIT_SETUP, err.text, 0);
        a->code = GS_EXIT_SETUP;
        return GS_AGENT_DONE;
    }
    if (a->mode == GS_MODE_EARLY) {
        tell_starter(a, 0); /* now gsrun may start mpirun */
    }
    if (gs_agent_share_list_gpus(a, &err) != 0) {
        snprintf(a->gpus.reason, sizeof(a->gpus.reason), "%s", err.text);
        a->gpus.count = 0;
    }
    gs_report_mark(&a->report, "gpus found");
    gs_agent_find_control(a);
    switch (a->mode) {
    case GS_MODE_EARLY:
        gs_report_mark(&a->report, "discovered");
        return GS_AGENT_PRESTARTING;
    case GS_MODE_JOB_LONG:
        return GS_AGENT_STARTING;
    default:
        return GS_AGENT_PLANNING;
    }
}

static int any_exclusive(const gs_gpu_list_t *gpus)
{
    int exclusive = 0;
    for (int g = 0; g < gpus->count; g++) {
        exclusive |= gpus->gpu[g].exclusive;
    }
    return exclusive;
}

/* Early: the daemons do not depend on how many ranks come (each rank's share
 * is in its own environment), so they start on every visible GPU while
 * mpirun launches. A server holds a GPU in an exclusive compute mode: one
 * that the plan leaves to a rank without MPS must not have one, so there
 * the servers wait for the plan. */
static gs_agent_state_t prestarting(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    /* With --mps-share=node the servers are leased once the plan is known. */
    if (a->o->cfg.mps != GS_MPS_OFF && !a->o->cfg.share_node && a->gpus.count > 0 &&
        a->have_control &&
        gs_policy_may_need_mps(&a->o->cfg, a->o->args.ranks_at_most, a->gpus.count)) {
        int n = a->gpus.count < GS_MAX_GPUS ? a->gpus.count : GS_MAX_GPUS;
        a->daemons.prestart = a->o->cfg.prestart && !any_exclusive(&a->gpus);
        j->early_rc = gs_daemons_start(&a->daemons, &a->gpus, n, &j->early_err);
        a->daemons.prestart = a->o->cfg.prestart;
        j->early_ready_ms = gs_proc_now_ms();
        gs_report_mark(&a->report, "mps started");
    }
    gs_agent_write_status(a); /* `gsrun status` sees the job while mpirun launches */
    return GS_AGENT_SIZING;
}

static gs_agent_state_t sizing(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    int size = gs_agent_wait_size(a);
    j->size_ms = gs_proc_now_ms();
    gs_report_mark(&a->report, "size");
    if (size == 0) {
        /* Started by gsrun on its node, which had no rank of the job. */
        gs_report_mark(&a->report, "planned");
        gs_daemons_stop_from(&a->daemons, 0, NULL, NULL);
        gs_report_add(&a->report, 0, "no rank of the job ran on this node");
        return GS_AGENT_FAILED; /* code 0: nothing failed, nobody to serve */
    }
    a->local_size = size;
    return GS_AGENT_PLANNING;
}

/* The servers' list from the plan (each entry its GPU's description, told
 * to the daemons as GPU and server), or the GPUs themselves. */
static void list_servers(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    if (!a->plan.use_mps) {
        a->servers = a->gpus;
        return;
    }
    a->servers.count = a->plan.nservers;
    for (int i = 0; i < a->plan.nservers; i++) {
        const gs_server_share_t *s = &a->plan.server[i];
        a->servers.gpu[i] = a->gpus.gpu[s->gpu];
        gs_daemons_set_server(&a->daemons, i, j->gpu_pos[s->gpu], s->server, s->gpu_servers);
    }
}

static gs_agent_state_t planning(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_error_t err;
    const gs_config_t *cfg = &a->o->cfg;
    int limit = gs_policy_clients_per_server(cfg->clients_per_server, a->gpus.cuda_version);
    int counts[GS_MAX_GPUS], packed = 0;
    gs_agent_pack(a, counts, &packed); /* the user's other jobs: GPUs emptiest first */
    int failed = gs_policy_plan_packed(cfg, a->local_size, a->gpus.count, packed ? counts : NULL,
                                       a->have_control, a->control_error, limit, &a->plan,
                                       &err) != 0;
    gs_agent_explain_no_gpu(a, failed ? &err : NULL);
    if (!failed) {
        gs_agent_pack_record(a); /* the job's entry; the next job may decide */
    }
    gs_agent_pack_unlock(a); /* then the slow work, never under the record's lock */
    gs_report_mark(&a->report, "planned");
    if (!failed) {
        list_servers(a);
    }
    for (int i = 0; !failed && a->plan.use_mps && i < a->plan.nused; i++) {
        const gs_server_share_t *s = &a->plan.server[i]; /* GPU i's first server */
        if (a->warning[0] == '\0' &&
            gs_policy_memory_warning(s->gpu, s->gpu_ranks, a->gpus.gpu[s->gpu].mem_mib, a->warning,
                                     sizeof(a->warning))) {
            gs_report_add(&a->report, 0, "%s", a->warning);
        }
    }
    if (!failed && a->plan.use_mps && a->plan.nservers > a->plan.nused) {
        char by[64];
        if (cfg->clients_per_server > 0) {
            gs_config_opt(cfg, "mps-clients-per-server", by, sizeof(by));
        } else {
            snprintf(by, sizeof(by), "the driver's limit, CUDA %d.%d", a->gpus.cuda_version / 1000,
                     a->gpus.cuda_version % 1000 / 10);
        }
        gs_report_add(&a->report, 0,
                      "%d ranks on %d GPU%s: %d MPS servers, at most %d clients each (%s)",
                      a->local_size, a->plan.nused, a->plan.nused == 1 ? "" : "s", a->plan.nservers,
                      limit, by);
    }
    if (failed) {
        gs_daemons_stop_from(&a->daemons, 0, NULL, NULL); /* early: nothing to wait for */
        return gs_agent_fail(a, GS_EXIT_UNAVAILABLE, err.text, 1);
    }
    if (a->mode == GS_MODE_EARLY) {
        if (!a->plan.use_mps || a->plan.nservers < a->daemons.n) {
            /* Daemons the plan does not use stop once the ranks have
             * registered: stopping a server takes up to 100 ms, which the
             * ranks must not wait for. */
            j->stop_from = a->plan.use_mps ? a->plan.nservers : 0;
        }
        if (!a->plan.use_mps) {
            j->early_rc = 0; /* no MPS wanted: a failed start does not matter */
        } else if (j->early_rc == 0 && a->o->cfg.prestart && any_exclusive(&a->gpus)) {
            j->early_rc = gs_daemons_start_servers(&a->daemons, a->plan.nservers, &j->early_err);
        }
    }
    return GS_AGENT_STARTING;
}

/* Job-long: MPS on every visible GPU with no share of its own (each task's
 * share is in its environment: `gsrun task-prolog` works it out per step),
 * published for the tasks: on, or off (auto: why) or an error (on). */
static gs_agent_state_t provisioning(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    const gs_config_t *cfg = &a->o->cfg;
    gs_error_t err;
    char msg[1200];
    int n = a->gpus.count < GS_MAX_GPUS ? a->gpus.count : GS_MAX_GPUS;
    int code = cfg->mps == GS_MPS_ON ? GS_EXIT_UNAVAILABLE : 0;

    memset(&a->plan, 0, sizeof(a->plan));
    if (n == 0) {
        snprintf(msg, sizeof(msg), "no NVIDIA GPU found on this node: %s", a->gpus.reason);
    } else if (!a->have_control) {
        snprintf(msg, sizeof(msg), "%s", a->control_error);
    } else if (gs_daemons_start(&a->daemons, &a->gpus, n, &err) != 0) {
        snprintf(msg, sizeof(msg), "MPS could not start: %s", err.text);
        code = code != 0 ? GS_EXIT_SETUP : 0;
    } else {
        int none[GS_MAX_GPUS] = {0};
        a->plan.use_mps = 1;
        a->plan.nservers = a->plan.nused = n;
        for (int g = 0; g < n; g++) { /* each GPU's first server, in order */
            a->plan.server[g].gpu = g;
            a->plan.server[g].gpu_servers = 1;
        }
        /* For the tasks' own plans (gsrun task-prolog): the driver's limit. */
        a->plan.clients_per_server =
            gs_policy_clients_per_server(cfg->clients_per_server, a->gpus.cuda_version);
        a->servers = a->gpus;
        /* No ranks: the placer only lists the GPUs for `gsrun status`. */
        if (gs_placer_init(&j->placer, 0, n, none, a->gpus.gpu, 1, 0) != 0) {
            gs_report_add(&a->report, 1, "out of memory for the status");
        }
        gs_agent_confirm_servers(a, 1);
        /* The prolog returns on the state: `gsrun status` must show the job by then. */
        gs_agent_write_status(a);
        gs_agent_publish_on(a);
        return GS_AGENT_HOLDING;
    }
    snprintf(a->plan.reason, sizeof(a->plan.reason), "%s", msg);
    if (code == 0) {
        strncat(msg, "; the job runs without MPS", sizeof(msg) - strlen(msg) - 1);
    }
    gs_agent_publish_without_mps(a, code != 0 ? GS_STATE_ERROR : GS_STATE_OFF, 1, code, msg, 1);
    gs_agent_write_status(a);
    a->code = code;
    return GS_AGENT_HOLDING;
}

/* The rank table and the placer: with MPS the plan's servers and their
 * blocks; without, one GPU per rank (gpu-bind) or none. NULL, or why not. */
static const char *init_ranks(gs_agent_t *a, int mps_on, gs_error_t *err)
{
    gs_job_t *j = gs_job(a);
    const gs_config_t *cfg = &a->o->cfg;
    int target[GS_MAX_GPUS] = {0}, first[GS_MAX_GPUS] = {0}, ngpus = 0;
    if (mps_on) {
        ngpus = a->plan.nservers;
        for (int g = 0; g < ngpus; g++) {
            target[g] = a->plan.server[g].nranks;
            first[g] = a->plan.server[g].first_rank;
        }
    } else if (a->gpus.count > 0 && cfg->gpu_bind) {
        a->servers = a->gpus;
        ngpus = a->gpus.count; /* without MPS, one GPU per rank */
        gs_placer_blocks(a->local_size, ngpus, target);
    }
    if (gs_ranks_init(&j->ranks, a->local_size) != 0 ||
        gs_placer_init(&j->placer, a->local_size, ngpus, target, a->servers.gpu,
                       a->o->args.in_sequence,
                       gs_proc_now_ms() + (long long)cfg->timeout_s * 1000) != 0) {
        return "out of memory";
    }
    if (mps_on) {
        gs_placer_set_blocks(&j->placer, first); /* the servers' blocks, server-major */
    }
    if (a->listen_fd < 0 && gs_agent_listen(a, err) != 0) {
        return err->text;
    }
    return NULL;
}

/* The node state for the ranks: on, or off with the reason (mps_failed:
 * msg says why MPS could not start). */
static void publish_start(gs_agent_t *a, int mps_failed, char *msg, size_t len)
{
    gs_job_t *j = gs_job(a);
    const gs_config_t *cfg = &a->o->cfg;
    if (mps_failed) {
        gs_agent_publish_without_mps(a, GS_STATE_OFF, 1, 0, msg, 1);
    } else if (!a->plan.use_mps && a->gpus.count == 0 && cfg->mps != GS_MPS_OFF) {
        snprintf(msg, len, "no NVIDIA GPU found on this node: %s; running without MPS",
                 a->gpus.reason);
        gs_agent_publish_without_mps(a, GS_STATE_OFF, 1, 0, msg, 1);
    } else if (!a->plan.use_mps) {
        gs_agent_publish_without_mps(a, GS_STATE_OFF, a->plan.notice, 0, a->plan.reason, 1);
    } else {
        gs_report_mark(&a->report, "mps ready");
        gs_agent_publish_on(a);
        gs_report_mark(&a->report, "published");
        if (j->early_ready_ms > 0) {
            gs_report_add(&a->report, 0,
                          "MPS ready %lld ms after the agent started, %lld ms "
                          "before the node's first rank came (started with "
                          "mpirun, before the job's ranks)",
                          j->early_ready_ms - a->t_start, j->size_ms - j->early_ready_ms);
        } else {
            gs_report_add(&a->report, 0, "MPS ready for the ranks %lld ms after the agent started",
                          gs_proc_now_ms() - a->t_start);
        }
        j->confirm_pending = 1; /* once the ranks came: gs_agent_ranks_came */
    }
}

/* MPS where the plan wants it (early: what is not running yet), the rank
 * table and placement, the node state published. */
static gs_agent_state_t starting(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    const gs_config_t *cfg = &a->o->cfg;
    gs_error_t err;
    char msg[1200];
    int mps_failed = 0, rc = 0;

    if (a->mode == GS_MODE_JOB_LONG) {
        return provisioning(a);
    }
    if (j->early_rc != 0) {
        rc = j->early_rc; /* MPS was tried before the ranks came, and failed */
        err = j->early_err;
    } else if (a->plan.use_mps && cfg->share_node) {
        rc = gs_agent_share_join(a, &err); /* the user's servers on this node */
        if (rc == -ECANCELED) {
            return gs_agent_fail(a, GS_EXIT_SETUP, err.text, 1); /* the job ends: nothing to start */
        }
        if (rc != 0 && !j->share_refused_own) {
            /* Sharing is an optimisation, never a reason to lose MPS: the
             * job runs servers of its own, and says why. (Not where the
             * shared agent it started with its own settings could not
             * start MPS: its own servers would fail the same way.) */
            int named = strncmp(err.text, "the user's shared MPS", 21) == 0;
            gs_report_add(&a->report, 1, "%s%s; this job runs MPS servers of its own",
                          named ? "" : "the user's shared MPS could not be had: ", err.text);
            rc = gs_daemons_start(&a->daemons, &a->servers, a->plan.nservers, &err);
        }
    } else if (a->plan.use_mps) {
        rc = gs_daemons_start(&a->daemons, &a->servers, a->plan.nservers, &err);
    }
    if (a->plan.use_mps && rc != 0) {
        if (cfg->mps != GS_MPS_AUTO) {
            return gs_agent_fail(a, GS_EXIT_SETUP, err.text, 1);
        }
        snprintf(msg, sizeof(msg), "MPS could not start: %s; running without MPS", err.text);
        mps_failed = 1;
    }
    int mps_on = a->plan.use_mps && !mps_failed;
    const char *why = init_ranks(a, mps_on, &err);
    if (why != NULL) {
        gs_daemons_stop_from(&a->daemons, 0, NULL, NULL);
        return gs_agent_fail(a, GS_EXIT_SETUP, why, 1);
    }
    publish_start(a, mps_failed, msg, sizeof(msg));
    if (cfg->mem_limit_mb > 0 && !mps_on) {
        char opt[64];
        gs_report_add(&a->report, 0, "%s applies to MPS clients only; not set (MPS is off)",
                      gs_config_opt(cfg, "mps-memory-limit", opt, sizeof(opt)));
    }
    gs_agent_write_status(a);
    return GS_AGENT_SERVING;
}

static gs_agent_state_t serving(gs_agent_t *a)
{
    gs_agent_serve(a);
    gs_report_mark(&a->report, "ranks gone");
    return GS_AGENT_STOPPING;
}

static gs_agent_state_t holding(gs_agent_t *a)
{
    gs_agent_hold(a); /* a step's requests for servers are served meanwhile */
    return GS_AGENT_STOPPING;
}

static gs_agent_state_t stopping(gs_agent_t *a)
{
    gs_agent_confirm_pending(a); /* not every rank came */
    gs_agent_share_leave(a); /* a job's lease: the shared agent stops its servers */
    gs_agent_pack_release(a); /* the job's ranks no longer count on its GPUs */
    gs_daemons_stop_from(&a->daemons, 0, gs_agent_rank_of_pid, a);
    if (a->mode != GS_MODE_JOB_LONG) {
        gs_report_mark(&a->report, "mps stopped");
        if (a->o->cfg.verbose >= 2) {
            gs_report_add(&a->report, 0, "timeline (ms after gsrun started): %s",
                          a->report.timeline);
        }
    }
    return GS_AGENT_DONE;
}

/* After a node-wide error the ranks read the state file and exit; it stays
 * until the launcher, and with it every rank of this node, is gone. The
 * launcher waits for the leader's stderr to close: the report goes first. */
static gs_agent_state_t failed(gs_agent_t *a)
{
    gs_report_deliver(&a->report);
    gs_guard_tell(&a->guard, "noreport", 0);
    gs_agent_wait_launcher(a);
    return GS_AGENT_DONE;
}

const gs_agent_step_t gs_agent_job_states[GS_AGENT_NSTATES] = {
    [GS_AGENT_DISCOVERING] = {BIT(GS_AGENT_PRESTARTING) | BIT(GS_AGENT_PLANNING) |
                                  BIT(GS_AGENT_STARTING) | BIT(GS_AGENT_FAILED) | BIT(GS_AGENT_DONE),
                              discovering},
    [GS_AGENT_PRESTARTING] = {BIT(GS_AGENT_SIZING), prestarting},
    [GS_AGENT_SIZING] = {BIT(GS_AGENT_PLANNING) | BIT(GS_AGENT_FAILED), sizing},
    [GS_AGENT_PLANNING] = {BIT(GS_AGENT_STARTING) | BIT(GS_AGENT_FAILED), planning},
    [GS_AGENT_STARTING] = {BIT(GS_AGENT_SERVING) | BIT(GS_AGENT_HOLDING) | BIT(GS_AGENT_FAILED),
                           starting},
    [GS_AGENT_SERVING] = {BIT(GS_AGENT_STOPPING), serving},
    [GS_AGENT_HOLDING] = {BIT(GS_AGENT_STOPPING), holding},
    [GS_AGENT_STOPPING] = {BIT(GS_AGENT_DONE), stopping},
    [GS_AGENT_FAILED] = {BIT(GS_AGENT_DONE), failed},
};

static gs_agent_t *job_create(void)
{
    gs_job_t *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return NULL;
    }
    j->stop_from = -1;
    j->share_fd = -1;
    gs_ledger_init(&j->ledger);
    return &j->agent;
}

static void job_destroy(gs_agent_t *a)
{
    free(gs_job(a));
}

/* The job's entry in the user's placement record goes before the node
 * dir, also where the job failed before it stopped; the ranks' table
 * (their connections closed) before the report is written. */
static void job_before_end(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_agent_pack_release(a);
    gs_ranks_free(&j->ranks);
    gs_attach_free(&j->attach);
    gs_placer_free(&j->placer);
}

static gs_ranks_t *job_ranks(const gs_agent_t *a)
{
    return (gs_ranks_t *)&gs_job_const(a)->ranks;
}

static const gs_agent_program_t job = {
    .states = gs_agent_job_states,
    .create = job_create,
    .destroy = job_destroy,
    .before_end = job_before_end,
    .state = gs_agent_job_state,
    .status = gs_agent_job_status,
    .fault = gs_agent_job_fault,
    .ranks = job_ranks,
};

int gs_agent_main(const gs_agent_opts_t *o)
{
    return gs_agent_run(o, &job);
}
