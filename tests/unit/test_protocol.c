/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's messages: what one side writes, the other reads back, and
 * what either side refuses. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "runtime/wire/protocol.h"

static void test_hello(void **state)
{
    char line[128], cpus[64];
    int rank = -1, parent = -1;
    (void)state;
    assert_true(gs_protocol_hello_format(line, sizeof(line), 3, "0-3,8", 0) > 0);
    assert_string_equal(line, "hello 3 0-3,8\n");
    assert_int_equal(gs_protocol_hello_parse(line, &rank, cpus, sizeof(cpus), &parent), 0);
    assert_int_equal(rank, 3);
    assert_string_equal(cpus, "0-3,8");
    assert_int_equal(parent, 0);
    gs_protocol_hello_format(line, sizeof(line), 0, "", 1);
    assert_string_equal(line, "hello 0 - parent\n");
    assert_int_equal(gs_protocol_hello_parse(line, &rank, cpus, sizeof(cpus), &parent), 0);
    assert_string_equal(cpus, "");
    assert_int_equal(parent, 1);
    /* A third word other than "parent" is no parent. */
    assert_int_equal(gs_protocol_hello_parse("hello 1 2 other\n", &rank, cpus, sizeof(cpus), &parent), 0);
    assert_int_equal(parent, 0);
    assert_int_equal(gs_protocol_hello_parse("hello -1 -\n", &rank, cpus, sizeof(cpus), &parent), -1);
    assert_int_equal(gs_protocol_hello_parse("stop\n", &rank, cpus, sizeof(cpus), &parent), -1);
    assert_int_equal(gs_protocol_hello_parse("hello x\n", &rank, cpus, sizeof(cpus), &parent), -1);
    /* A CPU list longer than the reader's buffer is refused, not cut. */
    assert_int_equal(gs_protocol_hello_parse("hello 1 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,"
                                          "18,19,20,21,22,23,24,25,26,27,28,29,30\n",
                                          &rank, cpus, sizeof(cpus), &parent),
                     -1);
    assert_int_equal(gs_protocol_hello_format(line, 8, 3, "0-3", 0), -1);
}

static void test_answer(void **state)
{
    char line[64];
    int by_pidfd = -1, gpu = -5, gen = -1;
    (void)state;
    gs_protocol_answer_format(line, sizeof(line), 1, 2, 0);
    assert_string_equal(line, "ok pidfd gpu=2 state=0\n");
    assert_int_equal(gs_protocol_answer_parse(line, &by_pidfd, &gpu, &gen), 0);
    assert_int_equal(by_pidfd, 1);
    assert_int_equal(gpu, 2);
    assert_int_equal(gen, 0);
    gs_protocol_answer_format(line, sizeof(line), 0, -1, 3);
    assert_int_equal(gs_protocol_answer_parse(line, &by_pidfd, &gpu, &gen), 0);
    assert_int_equal(by_pidfd, 0);
    assert_int_equal(gpu, -1);
    assert_int_equal(gen, 3);
    /* An answer without the generation holds for the first state. */
    assert_int_equal(gs_protocol_answer_parse("ok socket gpu=1\n", &by_pidfd, &gpu, &gen), 0);
    assert_int_equal(gen, 0);
    assert_int_equal(gs_protocol_answer_parse("ok socket gpu=1 state=-2\n", &by_pidfd, &gpu, &gen),
                     -1);
    assert_int_equal(gs_protocol_answer_parse("error bad registration\n", &by_pidfd, &gpu, &gen),
                     -1);
    assert_int_equal(gs_protocol_answer_parse("ok maybe gpu=1\n", &by_pidfd, &gpu, &gen), -1);
}

/* A step's servers: the plan's GPU per server, in order, and nothing else. */
static void test_servers(void **state)
{
    char buf[64], tiny[12];
    int gpu[64] = {0, 1, 0, 1, 0}, got[64], n = 0;
    (void)state;
    assert_int_equal(gs_protocol_servers_format(buf, sizeof(buf), 5, gpu), 0);
    assert_string_equal(buf, "servers 5 0 1 0 1 0\n");
    assert_int_equal(gs_protocol_servers_parse(buf, 64, &n, got), 0);
    assert_int_equal(n, 5);
    assert_memory_equal(got, gpu, 5 * sizeof(int));
    assert_int_equal(gs_protocol_servers_format(tiny, sizeof(tiny), 5, gpu), -1);
    assert_int_equal(gs_protocol_servers_parse("servers 3 0 1\n", 64, &n, got), -1);
    assert_int_equal(gs_protocol_servers_parse("servers 2 0 64\n", 64, &n, got), -1);
    assert_int_equal(gs_protocol_servers_parse("servers 0\n", 64, &n, got), -1);
    assert_int_equal(gs_protocol_servers_parse("servers 65 0\n", 64, &n, got), -1);
    assert_int_equal(gs_protocol_servers_parse("servers 1 -1\n", 64, &n, got), -1);
    assert_int_equal(gs_protocol_servers_parse("stop\n", 64, &n, got), -1);
}

static void test_size(void **state)
{
    char line[64];
    int n = 0, pid = -1;
    (void)state;
    gs_protocol_size_format(line, sizeof(line), 16, 4242);
    assert_string_equal(line, "size 16 4242\n");
    assert_int_equal(gs_protocol_size_parse(line, &n, &pid), 0);
    assert_int_equal(n, 16);
    assert_int_equal(pid, 4242);
    assert_int_equal(gs_protocol_size_parse("size 4\n", &n, &pid), 0);
    assert_int_equal(pid, 0);
    assert_int_equal(gs_protocol_size_parse("size 0 1\n", &n, &pid), -1);
    assert_int_equal(gs_protocol_size_parse("size 2000000 1\n", &n, &pid), -1);
    assert_int_equal(gs_protocol_size_parse("hello 1 -\n", &n, &pid), -1);
}

static void test_ready(void **state)
{
    char line[64];
    (void)state;
    gs_protocol_ready_format(line, sizeof(line), 0);
    assert_int_equal(gs_protocol_ready_parse(line), 0);
    gs_protocol_ready_format(line, sizeof(line), 70);
    assert_string_equal(line, "error 70 0\n");
    assert_int_equal(gs_protocol_ready_parse(line), 70);
    assert_int_equal(gs_protocol_ready_parse("garbage"), 1);
    assert_string_equal(GS_PROTO_STOP, "stop\n");
}

/* The loop's answer to a verb its state does not take: the job's lease
 * tells it from the service's own refusals by these bytes. */
static void test_not_now(void **state)
{
    char line[128], want[] = "error 'lease' is not taken by the agent now\n";
    (void)state;
    assert_int_equal(gs_protocol_not_now_format(line, sizeof(line), "lease job 1 GPU-x 2\n"),
                     (int)strlen(want));
    assert_string_equal(line, want);
    assert_int_equal(gs_protocol_not_now_parse(line), 1);
    line[strlen(line) - 1] = '\0'; /* as a reader that cut the newline has it */
    assert_int_equal(gs_protocol_not_now_parse(line), 1);
    /* Any byte changed, or the service's own refusal: not it. */
    for (size_t i = 0; i < strlen(line); i++) {
        char c = line[i];
        line[i] = c == 'x' ? 'y' : 'x';
        if (i < 7 || i >= strlen("error 'lease")) {
            assert_int_equal(gs_protocol_not_now_parse(line), 0);
        }
        line[i] = c;
    }
    assert_int_equal(gs_protocol_not_now_parse("error the user's shared MPS is stopping\n"), 0);
    /* A verb cut at 32 bytes; a buffer too small. */
    memset(want, 'v', 40);
    want[40] = '\0';
    gs_protocol_not_now_format(line, sizeof(line), want);
    assert_string_equal(line, "error 'vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv' is not taken by the agent now\n");
    assert_int_equal(gs_protocol_not_now_format(line, 20, "lease"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello),
        cmocka_unit_test(test_answer),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_servers),
        cmocka_unit_test(test_ready),
        cmocka_unit_test(test_not_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
