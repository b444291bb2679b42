/* SPDX-License-Identifier: BSD-3-Clause */
/* The node's MPS daemons alone, with the fake control program: start on
 * two GPUs and stop part then all, a start that fails, one that never
 * serves, a daemon that dies, a quit that hangs (bounded escalation), and
 * MPS's error lines naming a rank through the caller's lookup. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/agent/daemons.h"

static char control[4096], node_dir[64];
static gs_gpu_list_t gpus;
static gs_report_t report;
static gs_daemons_t ds;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
    const char *b = getenv("GS_TOP_BUILDDIR");
    (void)state;
    snprintf(control, sizeof(control), "%s/tests/fake/nvidia-cuda-mps-control", b ? b : ".");
    memset(&gpus, 0, sizeof(gpus));
    gpus.count = 2;
    for (int g = 0; g < 2; g++) {
        snprintf(gpus.gpu[g].uuid, sizeof(gpus.gpu[g].uuid), "GPU-test-%d", g);
    }
    snprintf(node_dir, sizeof(node_dir), "/tmp/gst-daemons.XXXXXX");
    assert_non_null(mkdtemp(node_dir));
    gs_report_init(&report, "n1", 1, 0);
    gs_daemons_init(&ds, node_dir, control, 1, 5, &report, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gs_daemons_stop_from(&ds, 0, NULL, NULL);
    rmdir(node_dir);
    unsetenv("FAKE_MPS_FAIL_START");
    unsetenv("FAKE_MPS_NO_SOCKET");
    unsetenv("FAKE_MPS_HANG_ON_QUIT");
    unsetenv("FAKE_MPS_IGNORE_TERM");
    unsetenv("FAKE_MPS_SERVER_ERROR");
    return 0;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void test_start_two_stop_one_then_all(void **state)
{
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_daemons_start(&ds, &gpus, 2, &err), 0);
    assert_int_equal(ds.n, 2);
    for (int g = 0; g < 2; g++) {
        assert_true(ds.daemon[g].daemon_pid > 0);
        assert_true(ds.daemon[g].ready_ms >= ds.daemon[g].start_ms);
        assert_true(exists(ds.daemon[g].pipe_dir));
        gs_daemons_record_servers(&ds, g);
        assert_true(ds.daemon[g].nservers >= 1); /* pre-started */
    }
    char g1[256];
    snprintf(g1, sizeof(g1), "%s", ds.daemon[1].pipe_dir);
    gs_daemons_stop_from(&ds, 1, NULL, NULL);
    assert_int_equal(ds.n, 1);
    assert_false(exists(g1));
    assert_int_equal(kill(ds.daemon[0].daemon_pid, 0), 0); /* GPU 0's still serves */
    gs_daemons_stop_from(&ds, 0, NULL, NULL);
    assert_int_equal(ds.n, 0);
    assert_int_equal(report.problems, 0);
    assert_non_null(strstr(report.text, "GPU 1: MPS shut down in"));
    assert_non_null(strstr(report.text, "GPU 0: MPS shut down in"));
}

static void test_start_fails(void **state)
{
    gs_error_t err;
    (void)state;
    setenv("FAKE_MPS_FAIL_START", "1", 1);
    assert_true(gs_daemons_start(&ds, &gpus, 2, &err) < 0);
    assert_non_null(strstr(err.text, "GPU 0 (GPU-test-0)"));
    assert_int_equal(ds.n, 0); /* everything started was stopped */
}

static void test_never_serves_is_bounded(void **state)
{
    gs_error_t err;
    (void)state;
    setenv("FAKE_MPS_NO_SOCKET", "1", 1);
    ds.timeout_s = 1;
    long long t0 = now_ms();
    assert_true(gs_daemons_start(&ds, &gpus, 1, &err) < 0);
    assert_true(now_ms() - t0 < 3000);
    assert_int_equal(ds.n, 0);
}

static void test_daemon_dies(void **state)
{
    gs_error_t err;
    int st;
    (void)state;
    assert_int_equal(gs_daemons_start(&ds, &gpus, 1, &err), 0);
    pid_t pid = ds.daemon[0].daemon_pid;
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(gs_daemons_reaped(&ds, getpid(), st), 0); /* not a daemon */
    assert_int_equal(gs_daemons_reaped(&ds, pid, st), 1);
    assert_int_equal(ds.daemon[0].daemon_pid, 0);
    assert_int_equal(report.problems, 1);
    assert_non_null(strstr(report.text, "exited while the job ran (signal 9)"));
}

static void test_hung_quit_escalates(void **state)
{
    gs_error_t err;
    (void)state;
    setenv("FAKE_MPS_HANG_ON_QUIT", "1", 1);
    setenv("FAKE_MPS_IGNORE_TERM", "1", 1);
    assert_int_equal(gs_daemons_start(&ds, &gpus, 1, &err), 0);
    pid_t pid = ds.daemon[0].daemon_pid;
    long long t0 = now_ms();
    gs_daemons_stop_from(&ds, 0, NULL, NULL);
    assert_true(now_ms() - t0 < GS_DAEMON_QUIT_TIMEOUT_MS + 3000);
    assert_int_equal(kill(pid, 0), -1); /* gone */
    assert_int_equal(report.problems, 1);
    assert_non_null(strstr(report.text, "problem: node n1: GPU 0 (GPU-test-0): "));
}

static int rank_of_pid(const void *ctx, pid_t pid)
{
    (void)ctx;
    return pid == 4242 ? 7 : -1;
}

static void test_log_errors_name_ranks(void **state)
{
    gs_error_t err;
    (void)state;
    setenv("FAKE_MPS_SERVER_ERROR", "client {PID: 4242, Context ID: 1} faulted", 1);
    assert_int_equal(gs_daemons_start(&ds, &gpus, 1, &err), 0);
    gs_daemons_stop_from(&ds, 0, rank_of_pid, NULL);
    assert_non_null(strstr(report.text, "GPU 0: local rank 7: "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_two_stop_one_then_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_serves_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_dies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_quit_escalates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_errors_name_ranks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
