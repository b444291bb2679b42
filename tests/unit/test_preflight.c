/* SPDX-License-Identifier: BSD-3-Clause */
/* runtime/files/preflight.c: the owner file of a job dir, and the removal
 * of job dirs whose gsrun is gone (only those, only ours). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/files/preflight.h"

static char base[64];

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof(base), "/tmp/gs-preflight.XXXXXX");
    return mkdtemp(base) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : -1;
}

static void make_job_dir(const char *name, const char *owner)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", base, name);
    assert_int_equal(mkdir(path, 0700), 0);
    if (owner != NULL) {
        snprintf(path, sizeof(path), "%s/%s/%s", base, name, GS_OWNER_FILE);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(owner, f);
        fclose(f);
    }
}

static int exists(const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", base, name);
    return stat(path, &st) == 0;
}

/* A PID that no process has: a child that exited and was reaped. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    return pid;
}

static void test_claim(void **state)
{
    (void)state;
    char path[256], buf[32] = "";
    make_job_dir("gsrun.claim1", NULL);
    snprintf(path, sizeof(path), "%s/gsrun.claim1", base);
    assert_int_equal(gs_preflight_claim(path), 0);
    /* The owner file names us, and is made once only. */
    assert_int_equal(gs_preflight_claim(path), -EEXIST);
    snprintf(path, sizeof(path), "%s/gsrun.claim1/%s", base, GS_OWNER_FILE);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_int_equal(atoi(buf), (int)getpid());
    snprintf(path, sizeof(path), "%s/no-such-dir", base);
    assert_int_equal(gs_preflight_claim(path), -ENOENT);
}

static void test_clean_stale(void **state)
{
    (void)state;
    char dead[32], alive[32], out[8][256];
    snprintf(dead, sizeof(dead), "%d\n", (int)dead_pid());
    snprintf(alive, sizeof(alive), "%d\n", (int)getpid());
    make_job_dir("gsrun.AAAAAA", dead);  /* its gsrun is gone: removed */
    make_job_dir("gsrun.BBBBBB", alive); /* its gsrun runs: kept */
    make_job_dir("gsrun.CCCCCC", NULL);  /* no owner (being made): kept */
    make_job_dir("gsrun.DDDDDD", "1\n"); /* init never owns one: kept */
    make_job_dir("other.EEEEEE", dead);  /* not a gsrun dir: kept */
    make_job_dir("gsrun.toolongname", dead);
    assert_int_equal(gs_preflight_clean_stale(base, out, 8), 1);
    assert_non_null(strstr(out[0], "gsrun.AAAAAA"));
    assert_false(exists("gsrun.AAAAAA"));
    assert_true(exists("gsrun.BBBBBB"));
    assert_true(exists("gsrun.CCCCCC"));
    assert_true(exists("gsrun.DDDDDD"));
    assert_true(exists("other.EEEEEE"));
    assert_true(exists("gsrun.toolongname"));
    /* A missing TMPDIR is nothing to clean. */
    assert_int_equal(gs_preflight_clean_stale("/nonexistent-gsrun-dir", out, 8), 0);
}

static void test_warnings(void **state)
{
    (void)state;
    char out[4][256];
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 64;
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 64) {
        skip();
    }
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    /* base is on /tmp; whether it has 64 MiB free is the machine's, so only
     * the descriptor warning is required. */
    int n = gs_preflight_warnings(base, out, 4);
    assert_true(n >= 1);
    assert_non_null(strstr(out[0], "open-file limit is 64"));
    assert_non_null(strstr(out[0], "ulimit -n"));
    assert_int_equal(gs_preflight_warnings(base, out, 0), 0);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claim),
        cmocka_unit_test(test_clean_stale),
        cmocka_unit_test(test_warnings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
