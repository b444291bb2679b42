/* SPDX-License-Identifier: BSD-3-Clause */
/* runtime/core/cgroup.c: the mount it takes, the names it makes (in a
 * directory standing in for a cgroup2 mount), and, as root where a cgroup2
 * hierarchy can be written, a real job cgroup ended at once with a fork
 * chain inside. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/cgroup.h"
#include "runtime/core/limits.h"
#include "runtime/core/proc.h"

static void test_mount_setting(void **state)
{
    char out[GS_PATH_MAX];
    (void)state;
    setenv("GSRUN_CGROUP_ROOT", "none", 1);
    assert_int_equal(gs_cgroup_mount(out, sizeof(out)), -ENOENT);
    setenv("GSRUN_CGROUP_ROOT", "relative/path", 1);
    assert_int_equal(gs_cgroup_mount(out, sizeof(out)), -ENOENT);
    setenv("GSRUN_CGROUP_ROOT", "/some/where", 1);
    assert_int_equal(gs_cgroup_mount(out, sizeof(out)), 0);
    assert_string_equal(out, "/some/where");
    unsetenv("GSRUN_CGROUP_ROOT");
    /* Found or not, what it finds is a cgroup2 mount of mountinfo's. */
    if (gs_cgroup_mount(out, sizeof(out)) == 0) {
        char cmd[GS_PATH_MAX + 100];
        snprintf(cmd, sizeof(cmd), "grep -q ' %s .* - cgroup2 ' /proc/self/mountinfo", out);
        assert_int_equal(system(cmd), 0);
    }
}

static void test_make_names(void **state)
{
    char mount[] = "/tmp/gs-cgroup-XXXXXX", a[GS_PATH_MAX], b[GS_PATH_MAX], want[GS_PATH_MAX];
    gs_error_t err;
    (void)state;
    assert_non_null(mkdtemp(mount));
    if (geteuid() != 0) {
        /* <mount>/gsrun must be root's: a user's is refused. */
        assert_int_equal(gs_cgroup_make(mount, "job-1.7", a, sizeof(a), &err), -EPERM);
        assert_non_null(strstr(err.text, "not a cgroup of root's"));
    } else {
        assert_int_equal(gs_cgroup_make(mount, "job-1.7", a, sizeof(a), &err), 0);
        snprintf(want, sizeof(want), "%s/gsrun/job-1.7", mount);
        assert_string_equal(a, want);
        /* The name taken (a cgroup left by a crash, a namespace's twin). */
        assert_int_equal(gs_cgroup_make(mount, "job-1.7", b, sizeof(b), &err), 0);
        assert_string_equal(b + strlen(want), ".1");
        assert_int_equal(gs_cgroup_remove(a), 0);
        assert_int_equal(gs_cgroup_remove(b), 0);
        assert_int_equal(gs_cgroup_remove(a), 0); /* gone already: fine */
    }
    char gs[GS_PATH_MAX];
    snprintf(gs, sizeof(gs), "%s/gsrun", mount);
    rmdir(gs);
    assert_int_equal(rmdir(mount), 0);
}

/* Forks and exits in a loop, no pause between hops; 20 s at most. */
static void chain(void)
{
    long long until = gs_proc_now_ms() + 20000;
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

static void test_real_kill(void **state)
{
    char mount[GS_PATH_MAX], name[64], path[GS_PATH_MAX], events[GS_PATH_MAX + 20];
    gs_error_t err;
    int left = -1, go[2];
    (void)state;
    if (geteuid() != 0 || gs_cgroup_mount(mount, sizeof(mount)) != 0) {
        skip(); /* not root, or no cgroup2 hierarchy here (the GPU machine's sandbox) */
    }
    snprintf(name, sizeof(name), "test-cgroup.%d", (int)getpid());
    if (gs_cgroup_make(mount, name, path, sizeof(path), &err) != 0) {
        print_message("# %s\n", err.text);
        skip(); /* a read-only hierarchy (a container) */
    }
    snprintf(events, sizeof(events), "%s/cgroup.kill", path);
    if (access(events, F_OK) != 0) {
        gs_cgroup_remove(path);
        skip(); /* a kernel before 5.14: the freeze path, not tested here */
    }
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    assert_int_equal(pipe(go), 0);
    pid_t child = fork();
    if (child == 0) {
        char byte;
        close(go[1]);
        if (read(go[0], &byte, 1) != 1) {
            _exit(1);
        }
        for (int i = 0; i < 3; i++) {
            if (fork() == 0) {
                chain();
            }
        }
        if (fork() == 0) {
            setsid();
            pause();
        }
        pause();
        _exit(0);
    }
    close(go[0]);
    assert_int_equal(gs_cgroup_enter(path, child), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    usleep(100000);
    long long t0 = gs_proc_now_ms();
    int held = gs_cgroup_kill(path, 3000, &left);
    long long took = gs_proc_now_ms() - t0;
    print_message("# cgroup.kill: %d processes held, ended in %lld ms\n", held, took);
    assert_true(held >= 5); /* the child, three chains, the sleeper */
    assert_int_equal(left, 0);
    assert_true(took < 2000);
    assert_int_equal(gs_cgroup_remove(path), 0);
    assert_int_equal(gs_proc_reap_all(1000), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mount_setting),
        cmocka_unit_test(test_make_names),
        cmocka_unit_test(test_real_kill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
