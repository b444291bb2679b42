/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun-agent's command line: what node.c writes, the agent reads back;
 * bad or missing values are refused with the argument named. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "runtime/wire/agentcmd.h"

static int count(char **argv)
{
    int n = 0;
    while (argv[n] != NULL) {
        n++;
    }
    return n;
}

static void test_round_trip(void **state)
{
    gs_agentcmd_t a, b;
    char buf[1024], *argv[40];
    gs_error_t err;
    (void)state;
    gs_agentcmd_init(&a);
    strcpy(a.job_dir, "/tmp/gsrun.Ab12Cd");
    strcpy(a.node_name, "n1");
    a.local_size = 16;
    a.watch_pid = 4242;
    a.gsrun_pid = 0;
    a.ready_fd = 5;
    a.report_fd = 6;
    a.mode = GS_MODE_EARLY;
    a.report = GS_SINK_LEADER_FD;
    a.in_sequence = 1;
    a.t0_ms = 1763900000123LL;
    assert_int_equal(gs_agentcmd_to_argv(&a, "/x/gsrun-agent", buf, sizeof(buf), argv, 40), 0);
    assert_string_equal(argv[0], "/x/gsrun-agent");
    assert_int_equal(gs_agentcmd_parse(count(argv), argv, &b, &err), 0);
    assert_memory_equal(&a, &b, sizeof(a));
    /* Too little room is an error, not a cut line. */
    assert_int_not_equal(gs_agentcmd_to_argv(&a, "x", buf, 20, argv, 40), 0);
    assert_int_not_equal(gs_agentcmd_to_argv(&a, "x", buf, sizeof(buf), argv, 4), 0);
}

static void test_refused(void **state)
{
    gs_agentcmd_t a;
    gs_error_t err;
    (void)state;
    char *unknown[] = {"agent", "--nope", "1", NULL};
    assert_int_not_equal(gs_agentcmd_parse(3, unknown, &a, &err), 0);
    assert_non_null(strstr(err.text, "--nope"));
    char *bad_mode[] = {"agent", "--job-dir", "/tmp/j", "--node", "n", "--local-size", "2",
                        "--mode", "sometimes", NULL};
    assert_int_not_equal(gs_agentcmd_parse(9, bad_mode, &a, &err), 0);
    assert_non_null(strstr(err.text, "--mode"));
    char *bad_num[] = {"agent", "--local-size", "12x", NULL};
    assert_int_not_equal(gs_agentcmd_parse(3, bad_num, &a, &err), 0);
    char *missing[] = {"agent", "--job-dir", "/tmp/j", "--node", "n", NULL};
    assert_int_not_equal(gs_agentcmd_parse(5, missing, &a, &err), 0); /* per job: a size */
    char *early[] = {"agent", "--job-dir", "/tmp/j", "--node", "n", "--mode", "early", NULL};
    assert_int_equal(gs_agentcmd_parse(7, early, &a, &err), 0); /* early: size comes later */
    char *relative[] = {"agent", "--job-dir", "tmp/j", "--node", "n", "--local-size", "2", NULL};
    assert_int_not_equal(gs_agentcmd_parse(7, relative, &a, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
