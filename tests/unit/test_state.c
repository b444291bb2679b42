/* SPDX-License-Identifier: BSD-3-Clause */
/* The node state file: format, parse, atomic publication, waiting. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/core/unixsock.h"
#include "runtime/files/state.h"
#include "runtime/wire/protocol.h"

static gs_state_t sample(void)
{
    gs_state_t st;
    memset(&st, 0, sizeof(st));
    st.kind = GS_STATE_ON;
    snprintf(st.socket, sizeof(st.socket), "/tmp/gsrun.x/n/agent.sock");
    st.nservers = 2;
    for (int g = 0; g < 2; g++) {
        st.server[g].first_rank = g * 3;
        st.server[g].nranks = 3;
        st.server[g].pct_set = g == 0;
        snprintf(st.server[g].pct, sizeof(st.server[g].pct), "%s", g == 0 ? "66.6667" : "");
        snprintf(st.server[g].uuid, sizeof(st.server[g].uuid), "GPU-%d", g);
        snprintf(st.server[g].pipe_dir, sizeof(st.server[g].pipe_dir), "/tmp/gsrun.x/n/g%d", g);
        snprintf(st.server[g].log_dir, sizeof(st.server[g].log_dir), "/tmp/gsrun.x/n/g%d.log", g);
    }
    return st;
}

static void test_roundtrip(void **state)
{
    static gs_state_t a, b;
    char buf[8192];
    gs_error_t err;
    (void)state;
    a = sample();
    assert_int_equal(gs_state_format(&a, buf, sizeof(buf)), 0);
    assert_int_equal(gs_state_parse(buf, &b, &err), 0);
    assert_int_equal(b.kind, GS_STATE_ON);
    assert_int_equal(b.nservers, 2);
    assert_string_equal(b.socket, a.socket);
    assert_string_equal(b.server[0].pct, "66.6667");
    assert_false(b.server[1].pct_set);
    assert_string_equal(b.server[1].log_dir, a.server[1].log_dir);
    assert_ptr_equal(gs_state_server_of_rank(&b, 4), &b.server[1]);
    assert_ptr_equal(gs_state_server_of_rank(&b, 0), &b.server[0]);
    assert_null(gs_state_server_of_rank(&b, 6));
    /* Off and error states carry their message. */
    memset(&a, 0, sizeof(a));
    a.kind = GS_STATE_ERROR;
    a.exit_code = 69;
    snprintf(a.message, sizeof(a.message), "49 ranks would share GPU 0");
    assert_int_equal(gs_state_format(&a, buf, sizeof(buf)), 0);
    assert_int_equal(gs_state_parse(buf, &b, &err), 0);
    assert_int_equal(b.kind, GS_STATE_ERROR);
    assert_int_equal(b.exit_code, 69);
    assert_string_equal(b.message, a.message);
}

static void test_malformed(void **state)
{
    static gs_state_t b;
    gs_error_t err;
    static const char *const bad[] = {
        "",
        "gsrun-state 2\nmps off\nend\n",
        "gsrun-state 1\nmps sideways\nend\n",
        "gsrun-state 1\nmps off\n", /* truncated: no end */
        "gsrun-state 1\nmps on\nend\n", /* on without GPU or socket */
        "gsrun-state 1\nmps on\nsocket /s\ngpu 1\nend\n", /* GPUs out of order */
        "gsrun-state 1\nmps on\nsocket /s\ngpu 0\nranks -1 2\nend\n",
        "gsrun-state 1\nbogus key\nend\n",
        NULL,
    };
    (void)state;
    for (const char *const *t = bad; *t != NULL; t++) {
        assert_true(gs_state_parse(*t, &b, &err) < 0);
    }
}

static void test_write_read_wait(void **state)
{
    static gs_state_t a, b;
    char dir[] = "/tmp/gs_test_state.XXXXXX";
    gs_error_t err;
    (void)state;
    assert_non_null(mkdtemp(dir));
    /* Nothing there: the wait ends at its deadline. */
    long long t0 = gs_proc_now_ms();
    assert_int_equal(gs_state_wait(dir, gs_proc_now_ms() + 100, -1, &err), -ETIMEDOUT);
    assert_true(gs_proc_now_ms() - t0 >= 90);
    /* Published by another process while we wait: we wake at once. */
    a = sample();
    pid_t pid = fork();
    if (pid == 0) {
        usleep(100 * 1000);
        _exit(gs_state_write(dir, &a, NULL) == 0 ? 0 : 1);
    }
    assert_int_equal(gs_state_wait(dir, gs_proc_now_ms() + 5000, -1, &err), 0);
    int st;
    waitpid(pid, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(gs_state_read(dir, &b, &err), 0);
    assert_int_equal(b.nservers, 2);
    /* An abort descriptor that becomes readable ends the wait (-EPIPE). */
    char dir2[] = "/tmp/gs_test_state2.XXXXXX";
    assert_non_null(mkdtemp(dir2));
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[1]);
    assert_int_equal(gs_state_wait(dir2, gs_proc_now_ms() + 5000, p[0], &err), -EPIPE);
    close(p[0]);
    gs_rundir_remove(dir);
    gs_rundir_remove(dir2);
}

/* A rank waiting for an agent that is gone learns it at once (issue 37):
 * its socket there and its lock free, or the dir removed; an agent that
 * holds the lock is waited for. */
static void test_wait_agent_gone(void **state)
{
    char dir[] = "/tmp/gs_test_state3.XXXXXX", sock[64];
    gs_error_t err;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/" GS_PROTO_SOCKET, dir);
    int lfd = gs_unixsock_listen(sock, &err);
    assert_true(lfd >= 0);
    int held = open(dir, O_RDONLY | O_DIRECTORY);
    assert_int_equal(flock(held, LOCK_EX | LOCK_NB), 0);
    long long t0 = gs_proc_now_ms();
    assert_int_equal(gs_state_wait(dir, t0 + 300, -1, &err), -ETIMEDOUT); /* it lives */
    close(held); /* the agent is killed: its lock goes */
    t0 = gs_proc_now_ms();
    assert_int_equal(gs_state_wait(dir, t0 + 5000, -1, &err), -ECHILD);
    assert_true(gs_proc_now_ms() - t0 < 1000);
    assert_non_null(strstr(err.text, "ended before it reported"));
    close(lfd);
    gs_rundir_remove(dir);
    t0 = gs_proc_now_ms(); /* its teardown removed the dir */
    assert_int_equal(gs_state_wait(dir, t0 + 5000, -1, &err), -ECHILD);
    assert_true(gs_proc_now_ms() - t0 < 1000);
}

/* Servers: a GPU with several has one entry per server, each saying its
 * GPU, its number, how many the GPU has and the GPU's ranks. */
static void test_servers_round_trip(void **state)
{
    static gs_state_t a, b;
    char buf[8192];
    gs_error_t err;
    (void)state;
    memset(&a, 0, sizeof(a));
    a.kind = GS_STATE_ON;
    a.clients_per_server = 48;
    a.generation = 2;
    snprintf(a.socket, sizeof(a.socket), "/r/n/agent.sock");
    a.nservers = 3;
    for (int i = 0; i < 3; i++) {
        gs_state_server_t *s = &a.server[i];
        s->first_rank = i * 33;
        s->nranks = i == 2 ? 34 : 33;
        s->gpu = 0;
        s->server = i;
        s->gpu_servers = 3;
        s->gpu_ranks = 100;
        snprintf(s->uuid, sizeof(s->uuid), "GPU-aaaa");
        snprintf(s->pipe_dir, sizeof(s->pipe_dir), "/r/n/g%d", i);
        snprintf(s->log_dir, sizeof(s->log_dir), "/r/n/g%d.log", i);
    }
    assert_int_equal(gs_state_format(&a, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "server 0 2 3 100\n"));
    assert_int_equal(gs_state_parse(buf, &b, &err), 0);
    assert_int_equal(b.clients_per_server, 48);
    assert_int_equal(b.generation, 2); /* published twice before */
    assert_int_equal(b.nservers, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(b.server[i].gpu, 0);
        assert_int_equal(b.server[i].server, i);
        assert_int_equal(b.server[i].gpu_servers, 3);
        assert_int_equal(b.server[i].gpu_ranks, 100);
        assert_string_equal(b.server[i].pipe_dir, a.server[i].pipe_dir);
    }
    assert_ptr_equal(gs_state_server_of_rank(&b, 70), &b.server[2]);
    /* A server line that contradicts itself is refused. */
    static const char *const bad[] = {"server 0 3 3 100", "server 0 0 0 100", "server -1 0 1 33",
                                      "server 0 0 2 5", "server 0 0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text),
                 "gsrun-state 1\nmps on\nsocket /s\ngpu 0\nranks 0 33\n%s\nuuid GPU-a\n"
                 "pipe_dir /p\nlog_dir /l\nend\n",
                 bad[i]);
        assert_true(gs_state_parse(text, &b, &err) < 0);
    }
    /* Files without server lines: one server per GPU. */
    assert_int_equal(gs_state_parse("gsrun-state 1\nmps on\nsocket /s\ngpu 0\nranks 0 4\n"
                                    "uuid GPU-a\npipe_dir /p\nlog_dir /l\nend\n",
                                    &b, &err),
                     0);
    assert_int_equal(b.server[0].gpu_servers, 1);
    assert_int_equal(b.server[0].gpu_ranks, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_servers_round_trip),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_write_read_wait),
        cmocka_unit_test(test_wait_agent_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
