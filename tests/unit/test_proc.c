/* SPDX-License-Identifier: BSD-3-Clause */
/* runtime/core/proc.c, the base of every layer: bounded waits on children,
 * signals only to PIDs we hold, environments built from scratch, bounded
 * reads, and the string helper beside it (runtime/core/text.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/core/text.h"

static pid_t child_sleeping(int ignore_term)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (ignore_term) {
            signal(SIGTERM, SIG_IGN);
        }
        for (;;) {
            pause();
        }
    }
    assert_true(pid > 0);
    return pid;
}

static void test_clocks(void **state)
{
    (void)state;
    long long a = gs_proc_now_ms();
    usleep(20 * 1000);
    long long b = gs_proc_now_ms();
    assert_true(b - a >= 19 && b - a < 2000);
    assert_true(gs_proc_wall_ms() > 1600000000000LL); /* after 2020 */
}

static void test_wait_times_out_then_reaps(void **state)
{
    (void)state;
    int st = -1;
    pid_t pid = child_sleeping(0);
    long long t0 = gs_proc_now_ms();
    assert_int_equal(gs_proc_wait(pid, 50, &st), -ETIMEDOUT);
    assert_true(gs_proc_now_ms() - t0 >= 49);
    kill(pid, SIGKILL);
    assert_int_equal(gs_proc_wait(pid, 2000, &st), 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* Reaped already (by us, or by a subreaper's reap-all): done at once,
     * with no status to tell. */
    assert_int_equal(gs_proc_wait(pid, 1000, &st), 0);
    assert_int_equal(st, 0);
    assert_int_equal(gs_proc_wait(0, 10, NULL), -EINVAL);
}

static void test_stop_child_escalates(void **state)
{
    (void)state;
    int st = -1;
    pid_t pid = child_sleeping(1); /* ignores SIGTERM: only SIGKILL ends it */
    usleep(20 * 1000);             /* let it install SIG_IGN */
    assert_int_equal(gs_proc_stop_child(pid, 50, &st), 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    pid = child_sleeping(0);
    assert_int_equal(gs_proc_stop_child(pid, 2000, &st), 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    /* Never init, never a process group. */
    assert_int_equal(gs_proc_stop_child(1, 10, NULL), -EINVAL);
    assert_int_equal(gs_proc_stop_child(0, 10, NULL), -EINVAL);
}

static void test_signal_and_alive(void **state)
{
    (void)state;
    assert_int_equal(gs_proc_signal(1, -1, 0), -EINVAL);
    assert_int_equal(gs_proc_signal(-5, -1, SIGKILL), -EINVAL);
    pid_t pid = child_sleeping(0);
    int fd = gs_proc_pidfd_open(pid);
    assert_true(gs_proc_alive(pid, -1));
    if (fd >= 0) {
        assert_true(gs_proc_alive(pid, fd));
    }
    assert_int_equal(gs_proc_signal(pid, fd, SIGKILL), 0);
    assert_int_equal(gs_proc_wait(pid, 2000, NULL), 0);
    assert_false(gs_proc_alive(pid, -1));
    if (fd >= 0) {
        /* A pidfd of a reaped process stays readable: never alive again,
         * even once the PID is reused. */
        assert_false(gs_proc_alive(pid, fd));
        close(fd);
    }
    assert_false(gs_proc_alive(0, -1));
}

static void test_reap_all(void **state)
{
    (void)state;
    pid_t a = fork();
    if (a == 0) {
        _exit(3);
    }
    pid_t b = child_sleeping(0);
    assert_int_equal(gs_proc_reap_all(50), -ETIMEDOUT); /* b still runs */
    kill(b, SIGKILL);
    assert_int_equal(gs_proc_reap_all(2000), 0);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* none left */
}

static int has(char **env, const char *entry)
{
    for (char **e = env; *e != NULL; e++) {
        if (strcmp(*e, entry) == 0) {
            return 1;
        }
    }
    return 0;
}

static int has_name(char **env, const char *prefix)
{
    for (char **e = env; *e != NULL; e++) {
        if (strncmp(*e, prefix, strlen(prefix)) == 0) {
            return 1;
        }
    }
    return 0;
}

static void test_env_build(void **state)
{
    (void)state;
    setenv("CUDA_MPS_PIPE_DIRECTORY", "/elsewhere", 1);
    setenv("CUDA_VISIBLE_DEVICES", "3", 1);
    setenv("GS_TEST_KEEP", "kept", 1);
    const char *const strip[] = {"CUDA_MPS_", "CUDA_VISIBLE_DEVICES", NULL};
    const char *const set[] = {"CUDA_VISIBLE_DEVICES=GPU-1", "GS_TEST_KEEP=new", NULL};
    char **env = gs_proc_env_build(strip, set);
    assert_non_null(env);
    assert_false(has_name(env, "CUDA_MPS_"));
    assert_true(has(env, "CUDA_VISIBLE_DEVICES=GPU-1"));
    assert_false(has(env, "CUDA_VISIBLE_DEVICES=3"));
    /* set overrides: the old value is gone, the new one there once. */
    assert_true(has(env, "GS_TEST_KEEP=new"));
    assert_false(has(env, "GS_TEST_KEEP=kept"));
    gs_proc_env_free(env);
    env = gs_proc_env_build(NULL, NULL);
    assert_non_null(env);
    assert_true(has(env, "GS_TEST_KEEP=kept"));
    gs_proc_env_free(env);
}

static void test_reads_are_bounded(void **state)
{
    (void)state;
    int p[2];
    char buf[64];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], "one\ntwo", 7), 7);
    /* One line, and nothing past it consumed. */
    assert_int_equal(gs_proc_read_line(p[0], buf, sizeof(buf), gs_proc_now_ms() + 1000), 4);
    assert_string_equal(buf, "one\n");
    /* No newline and the writer still open: the deadline ends the wait. */
    long long t0 = gs_proc_now_ms();
    assert_int_equal(gs_proc_read_line(p[0], buf, sizeof(buf), t0 + 50), -ETIMEDOUT);
    assert_true(gs_proc_now_ms() - t0 >= 49);
    assert_string_equal(buf, "two");
    assert_int_equal(write(p[1], "three", 5), 5);
    close(p[1]);
    /* To end of file; what does not fit is drained, the text cut. */
    char small[4];
    assert_int_equal(gs_proc_read_all(p[0], small, sizeof(small), gs_proc_now_ms() + 1000), 3);
    assert_string_equal(small, "thr");
    close(p[0]);
}

static void test_text_rstrip(void **state)
{
    (void)state;
    char a[] = "Ready\r\n", b[] = "\n\n", c[] = "keep", d[] = "100.0 \n";
    assert_int_equal(gs_text_rstrip(a, "\r\n"), 5);
    assert_string_equal(a, "Ready");
    assert_int_equal(gs_text_rstrip(b, "\n"), 0);
    assert_string_equal(b, "");
    assert_int_equal(gs_text_rstrip(c, "\n"), 4);
    assert_int_equal(gs_text_rstrip(d, "\n"), 6);
    assert_string_equal(d, "100.0 ");
}

static void test_stat_fields(void **state)
{
    char buf[1024];
    (void)state;
    /* This process: its state first, then its parent (field 4). */
    assert_int_equal(gs_proc_stat_fields(NULL, getpid(), buf, sizeof(buf)), 0);
    char st;
    int ppid = 0;
    assert_int_equal(sscanf(buf, "%c %d", &st, &ppid), 2);
    assert_int_equal(ppid, (int)getppid());
    assert_int_equal(gs_proc_stat_fields(NULL, 999999999, buf, sizeof(buf)), -1);
    assert_int_equal(gs_proc_stat_fields("/nonexistent", getpid(), buf, sizeof(buf)), -1);
}

/* A process in its exit counts as gone before its pidfd says so (the agent's
 * question whether a SIGKILLed gsrun is still there): a child holding 256
 * MiB takes long enough to tear down to be seen exiting. */
static void test_exiting_is_gone(void **state)
{
    int ready[2];
    (void)state;
    signal(SIGCHLD, SIG_DFL); /* reaped here, not by the kernel */
    assert_int_equal(gs_proctree_exiting(getpid()), 0);
    assert_int_equal(gs_proctree_gone(getpid(), -1), 0);
    assert_int_equal(gs_proctree_gone(1, -1), 1);
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Small pages: their teardown is what keeps the child in its exit. */
        size_t size = (size_t)256 << 20;
        char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            _exit(1);
        }
        madvise(m, size, MADV_NOHUGEPAGE);
        memset(m, 1, size);
        if (write(ready[1], "x", 1) != 1) {
            _exit(1);
        }
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    int fd = gs_proc_pidfd_open(pid);
    assert_int_equal(gs_proctree_exiting(pid), 0);
    assert_int_equal(gs_proctree_gone(pid, fd), 0);
    kill(pid, SIGKILL);
    int seen = 0, looks = 0, st;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0) {
        looks++;
        seen |= gs_proctree_exiting(pid) && gs_proctree_gone(pid, fd);
    }
    if (!seen) {
        fprintf(stderr, "# never seen exiting in %d looks (waitpid %d)\n", looks, (int)r);
    }
    assert_int_equal(r, pid);
    assert_true(seen);
    assert_int_equal(gs_proctree_exiting(pid), 0); /* reaped: gone, not exiting */
    assert_int_equal(gs_proctree_gone(pid, fd), 1);
    if (fd >= 0) {
        close(fd);
    }
    close(ready[0]);
    close(ready[1]);
}

/* A grandchild that double-forked and called setsid comes back to a
 * subreaper and is ended; a spared process and its child are not. */
static pid_t escaper(int pipe_w)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (fork() == 0) {
            setsid();
            pid_t me = getpid();
            if (write(pipe_w, &me, sizeof(me)) != sizeof(me)) {
                _exit(1);
            }
            pause();
        }
        _exit(0);
    }
    return pid;
}

/* A name is not an identity: a process named like gsrun's own helpers
 * that runs another program is ended with the rest (issue 46, hole 8). */
static void test_proctree_spare_needs_the_program(void **state)
{
    static const char *const spare[] = {"gsrun-share", NULL};
    int left = -1;
    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    pid_t named = fork();
    if (named == 0) {
        prctl(PR_SET_NAME, "gsrun-share");
        pause();
        _exit(0);
    }
    for (int i = 0; i < 1000 && gs_proctree_stat_field(named, 3) != 'S'; i++) {
        usleep(1000);
    }
    /* It runs this test, not /bin/sh: not spared. */
    assert_int_equal(gs_proctree_kill(spare, "/bin/sh", "PATH=", 1000, &left), 1);
    assert_int_equal(left, 0);
    assert_true(gs_proctree_stat_field(named, 3) == -1 || gs_proctree_stat_field(named, 3) == 'Z');
    assert_int_equal(gs_proc_reap_all(1000), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}

static void test_proctree_kill(void **state)
{
    int p[2];
    pid_t esc, spared, spared_child = 0;
    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    assert_int_equal(pipe(p), 0);
    waitpid(escaper(p[1]), NULL, 0);
    assert_int_equal(read(p[0], &esc, sizeof(esc)), sizeof(esc));
    spared = fork();
    if (spared == 0) {
        prctl(PR_SET_NAME, "gsrun-agent");
        if (fork() == 0) {
            prctl(PR_SET_NAME, "sleeper"); /* spared for its parent's sake only */
            pid_t me = getpid();
            if (write(p[1], &me, sizeof(me)) != sizeof(me)) {
                _exit(1);
            }
            pause();
        }
        pause();
    }
    assert_int_equal(read(p[0], &spared_child, sizeof(spared_child)), sizeof(spared_child));
    /* The escaper's parent is gone: the grandchild is ours now. */
    assert_int_equal(gs_proctree_stat_field(esc, 4), getpid());
    assert_int_equal(gs_proctree_stat_field(spared, 3) != -1, 1);
    static const char *const spare[] = {"gsrun-agent", NULL};
    /* Only what carries the marker in its environment (a rank's variable). */
    int left = -1;
    assert_int_equal(gs_proctree_kill(spare, NULL, "GS_TEST_NO_SUCH_VARIABLE=", 200, &left), 0);
    assert_int_equal(left, 0);
    assert_true(gs_proctree_stat_field(esc, 3) != 'Z' && gs_proctree_stat_field(esc, 3) != -1);
    assert_int_equal(gs_proctree_kill(spare, "/proc/self/exe", "PATH=", 1000, &left), 1);
    assert_true(gs_proctree_stat_field(esc, 3) == -1 || gs_proctree_stat_field(esc, 3) == 'Z');
    assert_true(gs_proctree_stat_field(spared, 3) != 'Z' && gs_proctree_stat_field(spared, 3) != -1);
    assert_true(gs_proctree_stat_field(spared_child, 3) != 'Z');
    /* Without spares everything goes, and nothing is left to reap. */
    static const char *const agent[] = {"gsrun-agent", NULL};
    assert_int_equal(gs_proctree_reap(agent, 100), -ETIMEDOUT); /* it lives */
    assert_int_equal(gs_proctree_kill(NULL, NULL, NULL, 1000, &left), 2);
    assert_int_equal(gs_proctree_reap(agent, 1000), 0);
    assert_int_equal(gs_proc_reap_all(1000), 0);
    assert_int_equal(gs_proctree_kill(NULL, NULL, NULL, 1000, &left), 0);
    assert_int_equal(left, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    close(p[0]);
    close(p[1]);
}

/* A process that forks and exits in a loop, with no pause between hops: its
 * next hop is ours (subreaper) before it dies, whatever one scan of /proc
 * saw. Each hop gives up after 20 s, should the test fail. */
static pid_t fork_chain(void)
{
    long long until = gs_proc_now_ms() + 20000;
    pid_t pid = fork();
    if (pid == 0) {
        while (gs_proc_now_ms() < until) {
            pid_t next = fork();
            if (next > 0) {
                _exit(0);
            }
            if (next < 0) {
                usleep(1000);
            }
        }
        _exit(0);
    }
    return pid;
}

static void *fork_and_sleep(void *arg)
{
    (void)arg;
    if (fork() == 0) {
        sleep(20);
        _exit(0);
    }
    sleep(20);
    return NULL;
}

/* Whether no child of ours is left, living or not (reaps those exited). */
static int no_child_left(void)
{
    pid_t r;
    while ((r = waitpid(-1, NULL, WNOHANG)) > 0) {
    }
    return r < 0 && errno == ECHILD;
}

static void test_proctree_kill_escapes(void **state)
{
    int left = -1;
    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    /* A fork chain: five runs, each ended with nothing left. */
    for (int run = 0; run < 5; run++) {
        fork_chain();
        usleep(20000);
        assert_true(gs_proctree_kill(NULL, NULL, NULL, 3000, &left) >= 1);
        assert_int_equal(left, 0);
        assert_true(no_child_left());
    }
    /* A thread group whose leader has exited (state Z) while a thread runs
     * and has forked a child: both are ended. */
    pid_t group = fork();
    if (group == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, fork_and_sleep, NULL) != 0) {
            _exit(1);
        }
        pthread_exit(NULL);
    }
    for (int i = 0; i < 200 && !(gs_proctree_stat_field(group, GS_STAT_STATE) == 'Z' &&
                                   gs_proc_threads(NULL, group) > 1);
         i++) {
        usleep(10000);
    }
    assert_int_equal(gs_proctree_stat_field(group, GS_STAT_STATE), 'Z');
    assert_int_equal(gs_proc_threads(NULL, group), 2);
    usleep(50000); /* its thread's child is there */
    assert_int_equal(gs_proctree_kill(NULL, NULL, NULL, 3000, &left), 2);
    assert_int_equal(left, 0);
    assert_true(no_child_left());
    /* A small fork bomb: 2^9 processes in a tree nine deep, all ended.
     * Each writes a byte once its forks are done; the kill starts when all
     * have (a fixed pause was too short on a loaded 2-core machine). */
    int up[2];
    assert_int_equal(pipe(up), 0);
    pid_t bomb = fork();
    if (bomb == 0) {
        close(up[0]);
        for (int i = 0; i < 9; i++) {
            if (fork() < 0) {
                break;
            }
        }
        (void)!write(up[1], "x", 1);
        close(up[1]);
        sleep(20);
        _exit(0);
    }
    close(up[1]);
    int seen = 0;
    char buf[64];
    struct pollfd pfd = {.fd = up[0], .events = POLLIN};
    while (seen < 512 && poll(&pfd, 1, 20000) > 0) {
        ssize_t r = read(up[0], buf, sizeof(buf));
        if (r <= 0) {
            break;
        }
        seen += (int)r;
    }
    close(up[0]);
    assert_int_equal(seen, 512);
    assert_true(gs_proctree_kill(NULL, NULL, NULL, 5000, &left) >= 512);
    assert_int_equal(left, 0);
    assert_true(no_child_left());
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clocks),          cmocka_unit_test(test_wait_times_out_then_reaps),
        cmocka_unit_test(test_stop_child_escalates), cmocka_unit_test(test_signal_and_alive),
        cmocka_unit_test(test_reap_all),        cmocka_unit_test(test_env_build),
        cmocka_unit_test(test_reads_are_bounded), cmocka_unit_test(test_text_rstrip), cmocka_unit_test(test_stat_fields), cmocka_unit_test(test_exiting_is_gone),
        cmocka_unit_test(test_proctree_kill), cmocka_unit_test(test_proctree_spare_needs_the_program),
        cmocka_unit_test(test_proctree_kill_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
