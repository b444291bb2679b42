/* SPDX-License-Identifier: BSD-3-Clause */
/* MPS control: reply parsing, command validation, the log classifier, and
 * the whole daemon lifecycle against the fake control program (start,
 * readiness, servers, quit, and each way it can fail). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/gpu/mps.h"
#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"

static char fake[4096];
static char base[64];

static void test_parse_server_list(void **state)
{
    pid_t p[8];
    (void)state;
    assert_int_equal(gs_mps_parse_server_list("1234\n5678\n", p, 8), 2);
    assert_int_equal(p[0], 1234);
    assert_int_equal(p[1], 5678);
    assert_int_equal(gs_mps_parse_server_list("", p, 8), 0);
    assert_int_equal(gs_mps_parse_server_list("\n\n", p, 8), 0);
    assert_int_equal(gs_mps_parse_server_list("Cannot find MPS control daemon process\n", p, 8), 0);
    assert_int_equal(gs_mps_parse_server_list("1\n0\n-4\n", p, 8), 0); /* never init or worse */
    assert_int_equal(gs_mps_parse_server_list("  42 \r\n", p, 8), 1);
    assert_int_equal(p[0], 42);
    assert_int_equal(gs_mps_parse_server_list("1\n2\n3\n4\n", p, 2), 2);
}

static void test_validate_command(void **state)
{
    (void)state;
    assert_int_equal(gs_mps_validate_command("quit"), 0);
    assert_int_equal(gs_mps_validate_command("start_server -uid 1000"), 0);
    assert_int_not_equal(gs_mps_validate_command("get_server_list\nquit"), 0);
    assert_int_not_equal(gs_mps_validate_command("quit\r"), 0);
    assert_int_not_equal(gs_mps_validate_command(""), 0);
    assert_int_not_equal(gs_mps_validate_command(NULL), 0);
    assert_int_not_equal(gs_mps_validate_command("x\x01"), 0);
    char longcmd[300];
    memset(longcmd, 'a', sizeof(longcmd) - 1);
    longcmd[sizeof(longcmd) - 1] = '\0';
    assert_int_not_equal(gs_mps_validate_command(longcmd), 0);
}

static void test_log_classifier(void **state)
{
    (void)state;
    /* Seen on the H200 at every normal client exit. */
    assert_false(gs_mps_log_line_is_error(
        "[2026-11-21 11:06:46.734 Server  1780] Server failed to recevie command with status "
        "806, assuming client {PID: 1770, Context ID: 1} exit"));
    assert_false(gs_mps_log_line_is_error(
        "[2026-11-21 11:06:53.168 Control  2273] Starting control daemon using socket /x"));
    assert_true(gs_mps_log_line_is_error("[x Server 5] ERROR: Client 12 encountered a fatal fault"));
    assert_true(gs_mps_log_line_is_error("Server exited with status 1: failed to create context"));
}

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof(base), "/tmp/gs_test_mps.XXXXXX");
    return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("FAKE_MPS_FAIL_START");
    unsetenv("FAKE_MPS_NO_SOCKET");
    unsetenv("FAKE_MPS_HANG_ON_QUIT");
    unsetenv("FAKE_MPS_IGNORE_TERM");
    return gs_rundir_remove(base);
}

/* Daemon g's dirs under base (g0, g0.log; g1 ...). */
static void init_daemon_at(gs_mps_daemon_t *d, int g)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->uuid, sizeof(d->uuid), "GPU-test%d", g);
    snprintf(d->pipe_dir, sizeof(d->pipe_dir), "%s/g%d", base, g);
    snprintf(d->log_dir, sizeof(d->log_dir), "%s/g%d.log", base, g);
    assert_int_equal(gs_rundir_ensure(d->pipe_dir, NULL), 0);
    assert_int_equal(gs_rundir_ensure(d->log_dir, NULL), 0);
}

static void init_daemon(gs_mps_daemon_t *d)
{
    init_daemon_at(d, 0);
}

static void test_lifecycle(void **state)
{
    gs_mps_daemon_t d;
    gs_error_t err;
    char reply[256], note[256];
    (void)state;
    init_daemon(&d);
    assert_int_equal(gs_mps_spawn(&d, fake, NULL, &err), 0);
    assert_true(d.daemon_pid > 1);
    assert_int_equal(gs_mps_wait_socket(&d, gs_proc_now_ms() + 5000, &err), 0);
    assert_int_equal(gs_mps_start_server(&d, fake, getuid(), gs_proc_now_ms() + 5000, &err), 0);
    assert_int_equal(gs_mps_record_servers(&d, fake, 5000, &err), 0);
    assert_int_equal(d.nservers, 1);
    assert_true(gs_proc_alive(d.server_pid[0], d.server_pidfd[0]));
    assert_int_equal(gs_mps_command(fake, d.pipe_dir, "get_default_active_thread_percentage",
                                    reply, sizeof(reply), 2000, &err),
                     0);
    assert_string_equal(reply, "100.0\n");
    pid_t server = d.server_pid[0];
    assert_int_equal(gs_mps_stop(&d, fake, 2000, note, sizeof(note)), 0);
    assert_false(kill(server, 0) == 0);
    assert_int_equal(d.daemon_pid, 0);
    /* Stopping twice is harmless. */
    assert_int_equal(gs_mps_stop(&d, fake, 2000, note, sizeof(note)), 0);
    /* Commands to a daemon that is gone fail with its client's words. */
    assert_true(gs_mps_command(fake, d.pipe_dir, "get_server_list", reply, sizeof(reply), 2000,
                               &err) < 0);
    assert_non_null(strstr(err.text, "Cannot find MPS control daemon"));
}

static void test_fails_to_start(void **state)
{
    gs_mps_daemon_t d;
    gs_error_t err;
    (void)state;
    setenv("FAKE_MPS_FAIL_START", "1", 1);
    init_daemon(&d);
    assert_int_equal(gs_mps_spawn(&d, fake, NULL, &err), 0);
    assert_true(gs_mps_wait_socket(&d, gs_proc_now_ms() + 5000, &err) < 0);
    assert_non_null(strstr(err.text, "exited with status 1 before it was ready"));
    assert_non_null(strstr(err.text, "FAKE_MPS_FAIL_START")); /* its own words come through */
}

static void test_never_ready(void **state)
{
    gs_mps_daemon_t d;
    gs_error_t err;
    char note[256];
    (void)state;
    setenv("FAKE_MPS_NO_SOCKET", "1", 1);
    init_daemon(&d);
    assert_int_equal(gs_mps_spawn(&d, fake, NULL, &err), 0);
    long long t0 = gs_proc_now_ms();
    assert_int_equal(gs_mps_wait_socket(&d, gs_proc_now_ms() + 300, &err), -ETIMEDOUT);
    assert_true(gs_proc_now_ms() - t0 < 2000);
    assert_non_null(strstr(err.text, "did not create its socket"));
    pid_t pid = d.daemon_pid;
    assert_int_equal(gs_mps_stop(&d, fake, 300, note, sizeof(note)), 1);
    assert_false(kill(pid, 0) == 0);
    /* No quit reached it: the note says so, not that it was slow. */
    assert_non_null(strstr(note, "quit could not be sent to the control daemon ("));
    assert_null(strstr(note, "within"));
}

static void test_hangs_on_quit(void **state)
{
    gs_mps_daemon_t d;
    gs_error_t err;
    char note[256];
    (void)state;
    setenv("FAKE_MPS_HANG_ON_QUIT", "1", 1);
    setenv("FAKE_MPS_IGNORE_TERM", "1", 1);
    init_daemon(&d);
    assert_int_equal(gs_mps_spawn(&d, fake, NULL, &err), 0);
    assert_int_equal(gs_mps_wait_socket(&d, gs_proc_now_ms() + 5000, &err), 0);
    assert_int_equal(gs_mps_start_server(&d, fake, getuid(), gs_proc_now_ms() + 5000, &err), 0);
    assert_int_equal(gs_mps_record_servers(&d, fake, 5000, &err), 0);
    pid_t pid = d.daemon_pid, server = d.server_pid[0];
    long long t0 = gs_proc_now_ms();
    /* quit is ignored, SIGTERM too: SIGKILL ends it, within the bounds. */
    assert_int_equal(gs_mps_stop(&d, fake, 300, note, sizeof(note)), 1);
    assert_true(gs_proc_now_ms() - t0 < 6000);
    assert_non_null(strstr(note, "did not quit"));
    assert_false(kill(pid, 0) == 0);
    usleep(100 * 1000); /* the server follows its daemon through its parent-death signal */
    assert_false(kill(server, 0) == 0 && errno != ESRCH);
}

static int log_has(const gs_mps_daemon_t *d, const char *what)
{
    char path[600], buf[8192];
    snprintf(path, sizeof(path), "%s/control.log", d->log_dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    buf[n] = '\0';
    return strstr(buf, what) != NULL;
}

static void start_with_server(gs_mps_daemon_t *d, int g)
{
    gs_error_t err;
    init_daemon_at(d, g);
    assert_int_equal(gs_mps_spawn(d, fake, NULL, &err), 0);
    assert_int_equal(gs_mps_wait_socket(d, gs_proc_now_ms() + 5000, &err), 0);
    assert_int_equal(gs_mps_start_server(d, fake, getuid(), gs_proc_now_ms() + 5000, &err), 0);
    assert_int_equal(gs_mps_record_servers(d, fake, 5000, &err), 0);
}

/* Two GPUs' daemons: both told to quit first, then each waited for. */
static void test_quit_begin_then_stop(void **state)
{
    gs_mps_daemon_t d[2];
    char note[256];
    (void)state;
    start_with_server(&d[0], 0);
    start_with_server(&d[1], 1);
    pid_t pids[2] = {d[0].daemon_pid, d[1].daemon_pid}, server = d[0].server_pid[0];
    pid_t server1 = d[1].server_pid[0];
    for (int i = 0; i < 2; i++) {
        gs_mps_quit_begin(&d[i], fake, 2000);
        assert_int_equal(d[i].quit_sent, 1);
        assert_int_equal(d[i].quit_rc, 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_true(log_has(&d[i], "User command: quit"));
        assert_int_equal(gs_mps_stop(&d[i], fake, 2000, note, sizeof(note)), 0);
        assert_string_equal(note, "");
        assert_false(kill(pids[i], 0) == 0);
        assert_int_equal(d[i].quit_sent, 0);
    }
    assert_false(kill(server, 0) == 0);
    assert_false(kill(server1, 0) == 0);
}

int main(void)
{
    const char *b = getenv("GS_TOP_BUILDDIR");
    snprintf(fake, sizeof(fake), "%s/tests/fake/nvidia-cuda-mps-control", b ? b : ".");
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_server_list),
        cmocka_unit_test(test_validate_command),
        cmocka_unit_test(test_log_classifier),
        cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fails_to_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hangs_on_quit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quit_begin_then_stop, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
