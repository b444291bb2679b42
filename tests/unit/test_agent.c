/* SPDX-License-Identifier: BSD-3-Clause */
/* The two programs' state tables (the job's agent, the node service): each
 * mode's path is allowed, every state of a table but DONE leads somewhere
 * in it, nothing leaves DONE, and no state goes back; and their message
 * tables: each verb once, the job's and the service's apart. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "runtime/job/job_int.h"
#include "runtime/service/service_int.h"

static void walk(const gs_agent_step_t *table, const gs_agent_state_t *path, int n)
{
    for (int i = 0; i + 1 < n; i++) {
        if (!gs_agent_transition_ok(table, path[i], path[i + 1])) {
            fail_msg("%s -> %s is not in the table", gs_agent_state_name(path[i]),
                     gs_agent_state_name(path[i + 1]));
        }
    }
}

static void test_mode_paths(void **state)
{
    const gs_agent_state_t per_job[] = {GS_AGENT_DISCOVERING, GS_AGENT_PLANNING,
                                        GS_AGENT_STARTING,    GS_AGENT_SERVING,
                                        GS_AGENT_STOPPING,    GS_AGENT_DONE};
    const gs_agent_state_t early[] = {GS_AGENT_DISCOVERING, GS_AGENT_PRESTARTING, GS_AGENT_SIZING,
                                      GS_AGENT_PLANNING,    GS_AGENT_STARTING,    GS_AGENT_SERVING,
                                      GS_AGENT_STOPPING,    GS_AGENT_DONE};
    const gs_agent_state_t job_long[] = {GS_AGENT_DISCOVERING, GS_AGENT_STARTING, GS_AGENT_HOLDING,
                                         GS_AGENT_STOPPING, GS_AGENT_DONE};
    const gs_agent_state_t nobody[] = {GS_AGENT_SIZING, GS_AGENT_FAILED, GS_AGENT_DONE};
    const gs_agent_state_t plan_error[] = {GS_AGENT_PLANNING, GS_AGENT_FAILED, GS_AGENT_DONE};
    const gs_agent_state_t service[] = {GS_AGENT_DISCOVERING, GS_AGENT_STARTING, GS_AGENT_HOLDING,
                                        GS_AGENT_STOPPING, GS_AGENT_DONE};
    const gs_agent_state_t no_gpu[] = {GS_AGENT_DISCOVERING, GS_AGENT_STARTING, GS_AGENT_FAILED,
                                       GS_AGENT_DONE};
    (void)state;
    walk(gs_agent_job_states, per_job, 6);
    walk(gs_agent_job_states, early, 8);
    walk(gs_agent_job_states, job_long, 5);
    walk(gs_agent_job_states, nobody, 3);
    walk(gs_agent_job_states, plan_error, 3);
    walk(gs_agent_service_states, service, 5);
    walk(gs_agent_service_states, no_gpu, 4);
    /* The service has no ranks: it never sizes, plans or serves. */
    assert_null(gs_agent_service_states[GS_AGENT_SIZING].step);
    assert_null(gs_agent_service_states[GS_AGENT_PLANNING].step);
    assert_null(gs_agent_service_states[GS_AGENT_SERVING].step);
    assert_false(gs_agent_transition_ok(gs_agent_service_states, GS_AGENT_SERVING,
                                        GS_AGENT_STOPPING));
}

static void table_shape(const gs_agent_step_t *t)
{
    for (int s = 0; s < GS_AGENT_NSTATES; s++) {
        int out = 0;
        if (s != GS_AGENT_DONE && t[s].step == NULL) {
            assert_int_equal(t[s].next, 0);
            continue;
        }
        for (int n = 0; n < GS_AGENT_NSTATES; n++) {
            out += gs_agent_transition_ok(t, s, n);
            if (n <= s && gs_agent_transition_ok(t, s, n)) {
                fail_msg("%s -> %s goes back", gs_agent_state_name(s), gs_agent_state_name(n));
            }
            /* Every state it may go to is one of its own. */
            if (gs_agent_transition_ok(t, s, n) && n != GS_AGENT_DONE && t[n].step == NULL) {
                fail_msg("%s -> %s: no step", gs_agent_state_name(s), gs_agent_state_name(n));
            }
        }
        assert_true(s == GS_AGENT_DONE ? out == 0 : out > 0);
        assert_string_not_equal(gs_agent_state_name(s), "?");
    }
    assert_non_null(t[GS_AGENT_DISCOVERING].step);
    assert_non_null(t[GS_AGENT_FAILED].step); /* where a wrong transition goes */
    assert_false(gs_agent_transition_ok(t, GS_AGENT_DONE, GS_AGENT_DISCOVERING));
}

static void test_table_shape(void **state)
{
    (void)state;
    table_shape(gs_agent_job_states);
    table_shape(gs_agent_service_states);
    /* Once serving, an agent only stops: no second start. */
    assert_false(gs_agent_transition_ok(gs_agent_job_states, GS_AGENT_SERVING, GS_AGENT_STARTING));
    assert_false(gs_agent_transition_ok(gs_agent_job_states, GS_AGENT_SERVING, GS_AGENT_FAILED));
}

/* The socket's messages: each verb once, each taken only in states that
 * wait on the socket, and every such state takes one; the job's verbs and
 * the service's apart. */
static unsigned message_table(const gs_agent_msg_t *msgs, unsigned waiting)
{
    unsigned taken = 0;
    for (const gs_agent_msg_t *m = msgs; m->verb != NULL; m++) {
        assert_non_null(m->handle);
        assert_int_not_equal(m->states, 0);
        assert_int_equal(m->states & ~waiting, 0);
        taken |= m->states;
        for (const gs_agent_msg_t *o = m + 1; o->verb != NULL; o++) {
            assert_string_not_equal(m->verb, o->verb);
        }
    }
    return taken;
}

static void test_message_table(void **state)
{
    const unsigned job = 1u << GS_AGENT_SIZING | 1u << GS_AGENT_SERVING | 1u << GS_AGENT_HOLDING;
    const unsigned service = 1u << GS_AGENT_HOLDING;
    (void)state;
    assert_int_equal(message_table(gs_agent_job_messages, job), job);
    assert_int_equal(message_table(gs_agent_service_messages, service), service);
    int lease = 0;
    for (const gs_agent_msg_t *m = gs_agent_service_messages; m->verb != NULL; m++) {
        lease += strcmp(m->verb, "lease") == 0;
        for (const gs_agent_msg_t *o = gs_agent_job_messages; o->verb != NULL; o++) {
            /* "stop" is both programs' word for their own end. */
            if (strcmp(m->verb, "stop") != 0 && strcmp(m->verb, o->verb) == 0) {
                fail_msg("'%s' is in both programs' tables", m->verb);
            }
        }
    }
    assert_int_equal(lease, 1);
    for (const gs_agent_msg_t *o = gs_agent_job_messages; o->verb != NULL; o++) {
        assert_string_not_equal(o->verb, "lease");
        assert_string_not_equal(o->verb, "gpus");
        assert_string_not_equal(o->verb, "retire");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_paths),
        cmocka_unit_test(test_table_shape),
        cmocka_unit_test(test_message_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
