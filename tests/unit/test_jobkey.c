/* SPDX-License-Identifier: BSD-3-Clause */
/* The rank prefix's job key: which launcher variable names the job, the
 * parent process otherwise, and the dir name made from it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rank/jobkey.h"

static void clear(void)
{
    unsetenv("GSRUN_JOB_KEY");
    unsetenv("PMIX_NAMESPACE");
    unsetenv("SLURM_JOB_ID");
    unsetenv("SLURM_STEP_ID");
    unsetenv("FLUX_JOB_ID");
}

static void test_sources_in_order(void **state)
{
    char key[256], want[64];
    const char *src = NULL;
    (void)state;
    clear();
    assert_int_equal(gs_jobkey_get(key, sizeof(key), &src), 0);
    assert_string_equal(src, "parent");
    snprintf(want, sizeof(want), "ppid-%d-%lld", (int)getppid(), gs_jobkey_start_time(getppid()));
    assert_string_equal(key, want);
    assert_true(gs_jobkey_start_time(getpid()) > 0);
    assert_int_equal(gs_jobkey_start_time(999999999), -1);
    setenv("FLUX_JOB_ID", "f2SWEd8Vzrj", 1); /* as flux run sets it */
    assert_int_equal(gs_jobkey_get(key, sizeof(key), &src), 0);
    assert_string_equal(key, "flux-f2SWEd8Vzrj");
    unsetenv("FLUX_JOB_ID");
    setenv("SLURM_JOB_ID", "4242", 1);
    assert_int_equal(gs_jobkey_get(key, sizeof(key), &src), 0);
    assert_string_equal(src, "parent"); /* a job without a step is no step's key */
    setenv("SLURM_STEP_ID", "3", 1);
    assert_int_equal(gs_jobkey_get(key, sizeof(key), &src), 0);
    assert_string_equal(key, "slurm-4242.3");
    setenv("PMIX_NAMESPACE", "prterun-n1-1234@1", 1);
    assert_int_equal(gs_jobkey_get(key, sizeof(key), &src), 0);
    assert_string_equal(key, "prterun-n1-1234@1");
    setenv("GSRUN_JOB_KEY", "mine", 1);
    assert_int_equal(gs_jobkey_get(key, sizeof(key), &src), 0);
    assert_string_equal(src, "GSRUN_JOB_KEY");
    clear();
}

static void test_dir_name(void **state)
{
    char a[160], b[160], longkey[400];
    (void)state;
    gs_jobkey_dir_name("prterun-n1-1234@1", a, sizeof(a));
    assert_int_equal(strncmp(a, "exec-", 5), 0);
    assert_non_null(strstr(a, "-prterun-n1-1234_1"));
    /* Cleaned alike, still two names. */
    gs_jobkey_dir_name("prterun-n1-1234_1", b, sizeof(b));
    assert_string_not_equal(a, b);
    /* No slash, no way up, bounded. */
    gs_jobkey_dir_name("../../etc/x", a, sizeof(a));
    assert_null(strchr(a, '/'));
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    gs_jobkey_dir_name(longkey, a, sizeof(a));
    assert_true(strlen(a) <= 101);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sources_in_order),
        cmocka_unit_test(test_dir_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
