/* SPDX-License-Identifier: BSD-3-Clause */
/* What the two programs of gsrun-agent share to run: the job's agent
 * (agent.c) and the user's node service (agent_service.c) each have a
 * table of states, one step each; this runs either table from DISCOVERING
 * to DONE, between the set-up and the end that both share, and checks each
 * step's next state against the table (a step that names another is a bug,
 * reported as such). */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "runtime/agent/agent_int.h"
#include "runtime/core/proc.h"

static const char *const names[GS_AGENT_NSTATES] = {
    [GS_AGENT_DISCOVERING] = "discovering", [GS_AGENT_PRESTARTING] = "prestarting",
    [GS_AGENT_SIZING] = "sizing",           [GS_AGENT_PLANNING] = "planning",
    [GS_AGENT_STARTING] = "starting",       [GS_AGENT_SERVING] = "serving",
    [GS_AGENT_HOLDING] = "holding",         [GS_AGENT_STOPPING] = "stopping",
    [GS_AGENT_FAILED] = "failed",           [GS_AGENT_DONE] = "done",
};

const char *gs_agent_state_name(gs_agent_state_t s)
{
    return s < GS_AGENT_NSTATES ? names[s] : "?";
}

int gs_agent_transition_ok(const gs_agent_step_t *table, gs_agent_state_t from,
                           gs_agent_state_t to)
{
    return from < GS_AGENT_NSTATES && to < GS_AGENT_NSTATES && table[from].step != NULL &&
           (table[from].next & (1u << to)) != 0;
}

gs_agent_state_t gs_agent_fail(gs_agent_t *a, int code, const char *msg, int publish)
{
    if (publish) {
        gs_agent_publish_without_mps(a, GS_STATE_ERROR, 0, code, msg, 0);
    }
    a->code = code;
    return GS_AGENT_FAILED;
}

void gs_agent_find_control(gs_agent_t *a)
{
    gs_error_t err;
    a->have_control =
        gs_config_find_executable(a->o->cfg.control, GS_CONTROL_SEARCH_DIRS, "MPS control program",
                                  a->control, sizeof(a->control), &err) == 0;
    if (!a->have_control) {
        snprintf(a->control_error, sizeof(a->control_error), "%s", err.text);
    }
    gs_daemons_init(&a->daemons, a->node_dir, a->control, a->o->cfg.prestart, a->o->cfg.timeout_s,
                    &a->report, &a->guard);
}

int gs_agent_run(const gs_agent_opts_t *o, const gs_agent_program_t *prog)
{
    const gs_agent_step_t *table = prog->states;
    gs_agent_t *a = prog->create();
    int lockfd = -1, code;

    if (a == NULL) {
        return GS_EXIT_SETUP;
    }
    a->o = o;
    a->prog = prog;
    a->mode = o->args.mode;
    if (prog->comm != NULL) {
        /* Set before the guard is forked: a launcher that waits for its
         * job's agents (and ends what its ranks left) knows both by it. */
        prctl(PR_SET_NAME, prog->comm);
    }
    a->local_size = o->args.local_size;
    a->watch_pid = o->args.watch_pid;
    a->ready_fd = o->args.ready_fd;
    a->t_start = gs_proc_now_ms();
    a->started_ms = gs_proc_wall_ms();
    a->listen_fd = a->sig_fd = a->watch_fd = a->gsrun_fd = -1;
    a->guard.fd = -1;
    gs_agent_init_report(a);
    gs_report_mark(&a->report, "agent");
    if (gs_agent_setup(a, &lockfd) != 0) {
        /* Another agent holds this node dir: never share one between jobs,
         * and leave its state alone. The leader reports the agent's end. */
        gs_agent_signal_ready(a, "error\n");
        prog->destroy(a);
        return GS_EXIT_RUNDIR;
    }

    for (a->state = GS_AGENT_DISCOVERING; a->state != GS_AGENT_DONE;) {
        gs_agent_state_t next = table[a->state].step(a);
        if (!gs_agent_transition_ok(table, a->state, next)) {
            gs_report_add(&a->report, 1, "internal error: no transition from %s to %s; stopping",
                          gs_agent_state_name(a->state), gs_agent_state_name(next));
            next = a->state == GS_AGENT_FAILED ? GS_AGENT_DONE : GS_AGENT_FAILED;
            a->code = a->code != 0 ? a->code : GS_EXIT_SETUP;
        }
        a->state = next;
    }

    if (prog->before_end != NULL) {
        prog->before_end(a);
    }
    gs_agent_teardown(a, lockfd);
    code = a->code;
    prog->destroy(a);
    return code;
}
