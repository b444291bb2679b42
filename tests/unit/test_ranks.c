/* SPDX-License-Identifier: BSD-3-Clause */
/* The rank table alone, with real processes (children of the test):
 * registrations in any order, who is alive, a rank's death seen through its
 * pidfd, late and surplus registrations, and ending the leftovers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/agent/ranks.h"

static pid_t child(int ignore_term)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (ignore_term) {
            signal(SIGTERM, SIG_IGN);
        }
        for (;;) {
            pause();
        }
    }
    return pid;
}

/* A registration's connection, as the agent would hold it. */
static int conn(void)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    return sv[0];
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void test_any_order_and_lookup(void **state)
{
    gs_ranks_t t;
    pid_t pid[3];
    int order[3] = {2, 0, 1};
    (void)state;
    assert_int_equal(gs_ranks_init(&t, 3), 0);
    for (int i = 0; i < 3; i++) {
        pid[i] = child(0);
        assert_true(gs_ranks_accepts(&t, order[i]));
        gs_rank_t *r = gs_ranks_add(&t, pid[i], order[i], conn());
        assert_int_equal(r->rank, order[i]);
        assert_true(r->is_pidfd); /* Linux >= 5.3 */
        assert_int_equal(gs_ranks_events(r), POLLIN);
    }
    assert_true(gs_ranks_complete(&t));
    assert_false(gs_ranks_accepts(&t, 0)); /* no more than the node's size */
    assert_int_equal(gs_ranks_rank_of_pid(&t, pid[0]), 2);
    assert_int_equal(gs_ranks_pid_of_rank(&t, 1), pid[2]);
    assert_int_equal(gs_ranks_rank_of_pid(&t, getpid()), -1);
    assert_int_equal(gs_ranks_pid_of_rank(&t, 5), 0);
    for (int i = 0; i < 3; i++) {
        reap(pid[i]);
    }
    gs_ranks_free(&t);
}

static void test_out_of_range(void **state)
{
    gs_ranks_t t;
    (void)state;
    assert_int_equal(gs_ranks_init(&t, 2), 0);
    assert_false(gs_ranks_accepts(&t, 2));
    assert_false(gs_ranks_accepts(&t, -1));
    assert_false(gs_ranks_complete(&t));
    gs_ranks_free(&t);
}

/* A rank dies: its pidfd becomes readable; dropping it leaves the others,
 * and the table still names the dead rank's PID (for MPS's logs). */
static void test_death_seen_and_dropped(void **state)
{
    gs_ranks_t t;
    pid_t a = child(0), b = child(0);
    (void)state;
    assert_int_equal(gs_ranks_init(&t, 2), 0);
    gs_ranks_add(&t, a, 0, conn());
    gs_ranks_add(&t, b, 1, conn());
    reap(a);
    struct pollfd p = {t.live[0].fd, gs_ranks_events(&t.live[0]), 0};
    assert_int_equal(poll(&p, 1, 2000), 1);
    gs_ranks_drop(&t, 0);
    assert_int_equal(t.nlive, 1);
    assert_int_equal(t.live[0].pid, b);
    assert_int_equal(t.registered, 2);
    assert_int_equal(gs_ranks_rank_of_pid(&t, a), 0);
    reap(b);
    gs_ranks_free(&t);
}

/* Ending the leftovers: one exits on SIGTERM, one ignores it and needs
 * SIGKILL; both are gone within the bound. */
static void test_end_leftovers(void **state)
{
    gs_ranks_t t;
    pid_t a = child(0), b = child(1);
    (void)state;
    usleep(50000); /* b has set SIG_IGN */
    assert_int_equal(gs_ranks_init(&t, 2), 0);
    gs_ranks_add(&t, a, 0, conn());
    gs_ranks_add(&t, b, 1, conn());
    assert_int_equal(gs_ranks_end(t.live, t.nlive, 300), 1);
    int st;
    assert_int_equal(waitpid(a, &st, 0), a);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_int_equal(waitpid(b, &st, 0), b);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    gs_ranks_free(&t);
}

/* A task prolog speaks for its parent, the task: accepted only when the
 * parent is ours. */
static void test_registered_pid(void **state)
{
    pid_t c = child(0);
    (void)state;
    assert_int_equal(gs_ranks_registered_pid(c, 0), c);
    assert_int_equal(gs_ranks_registered_pid(c, 1), getpid());
    assert_int_equal(gs_ranks_registered_pid(999999999, 1), 0);
    reap(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_any_order_and_lookup),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_death_seen_and_dropped),
        cmocka_unit_test(test_end_leftovers),
        cmocka_unit_test(test_registered_pid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
