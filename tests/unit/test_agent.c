/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's state table: each mode's path is allowed, every state but
 * DONE leads somewhere, nothing leaves DONE, and no state goes back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "runtime/agent/agent_int.h"

static void walk(const gs_agent_state_t *path, int n)
{
    for (int i = 0; i + 1 < n; i++) {
        if (!gs_agent_transition_ok(path[i], path[i + 1])) {
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
    (void)state;
    walk(per_job, 6);
    walk(early, 8);
    walk(job_long, 5);
    walk(nobody, 3);
    walk(plan_error, 3);
}

static void test_table_shape(void **state)
{
    (void)state;
    for (int s = 0; s < GS_AGENT_NSTATES; s++) {
        int out = 0;
        for (int t = 0; t < GS_AGENT_NSTATES; t++) {
            out += gs_agent_transition_ok(s, t);
            if (t <= s && gs_agent_transition_ok(s, t)) {
                fail_msg("%s -> %s goes back", gs_agent_state_name(s), gs_agent_state_name(t));
            }
        }
        assert_true(s == GS_AGENT_DONE ? out == 0 : out > 0);
        assert_string_not_equal(gs_agent_state_name(s), "?");
    }
    /* Once serving, an agent only stops: no second start. */
    assert_false(gs_agent_transition_ok(GS_AGENT_SERVING, GS_AGENT_STARTING));
    assert_false(gs_agent_transition_ok(GS_AGENT_SERVING, GS_AGENT_FAILED));
    assert_false(gs_agent_transition_ok(GS_AGENT_DONE, GS_AGENT_DISCOVERING));
}

/* The socket's messages: each verb once, each taken only in states that
 * wait on the socket, and every such state takes one. */
static void test_message_table(void **state)
{
    const unsigned waiting = 1u << GS_AGENT_SIZING | 1u << GS_AGENT_SERVING |
                             1u << GS_AGENT_HOLDING;
    unsigned taken = 0;
    (void)state;
    for (const gs_agent_msg_t *m = gs_agent_messages; m->verb != NULL; m++) {
        assert_non_null(m->handle);
        assert_int_not_equal(m->states, 0);
        assert_int_equal(m->states & ~waiting, 0);
        taken |= m->states;
        for (const gs_agent_msg_t *o = m + 1; o->verb != NULL; o++) {
            assert_string_not_equal(m->verb, o->verb);
        }
    }
    assert_int_equal(taken, waiting);
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
