/* SPDX-License-Identifier: BSD-3-Clause */
/* Run directories: private, never through a symlink, never another user's,
 * short enough for unix sockets, and removed without following links. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/files/rundir.h"

static char base[256];

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof(base), "/tmp/gs_test_rundir.XXXXXX");
    return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return gs_rundir_remove(base);
}

static void test_create_job_is_private(void **state)
{
    char job[512];
    struct stat st;
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_rundir_create_job(base, job, sizeof(job), &err), 0);
    assert_int_equal(strncmp(job, base, strlen(base)), 0);
    assert_int_equal(lstat(job, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(st.st_uid, geteuid());
    /* Two jobs never share a directory. */
    char job2[512];
    assert_int_equal(gs_rundir_create_job(base, job2, sizeof(job2), &err), 0);
    assert_string_not_equal(job, job2);
}

static void test_parent_checks(void **state)
{
    char p[512], job[512];
    gs_error_t err;
    (void)state;
    snprintf(p, sizeof(p), "%s/link", base);
    assert_int_equal(symlink("/tmp", p), 0);
    assert_true(gs_rundir_check_parent(p, &err) < 0);
    assert_non_null(strstr(err.text, "symbolic link"));
    assert_true(gs_rundir_create_job(p, job, sizeof(job), &err) < 0);

    snprintf(p, sizeof(p), "%s/open", base);
    assert_int_equal(mkdir(p, 0777), 0);
    assert_int_equal(chmod(p, 0777), 0);
    assert_true(gs_rundir_check_parent(p, &err) < 0);
    assert_non_null(strstr(err.text, "writable by others"));
    /* Sticky, like /tmp: fine. */
    assert_int_equal(chmod(p, 01777), 0);
    assert_int_equal(gs_rundir_check_parent(p, &err), 0);

    snprintf(p, sizeof(p), "%s/missing", base);
    assert_true(gs_rundir_check_parent(p, &err) < 0);
    snprintf(p, sizeof(p), "%s/file", base);
    close(open(p, O_CREAT | O_WRONLY, 0600));
    assert_true(gs_rundir_check_parent(p, &err) < 0);
}

static void test_parent_owned_by_other_user(void **state)
{
    char p[512];
    gs_error_t err;
    (void)state;
    if (geteuid() != 0) {
        skip(); /* only root can give a directory away */
    }
    snprintf(p, sizeof(p), "%s/theirs", base);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(chown(p, 65534, 65534), 0);
    assert_true(gs_rundir_check_parent(p, &err) < 0);
    assert_non_null(strstr(err.text, "owned by uid 65534"));
    assert_true(gs_rundir_ensure(p, &err) < 0);
}

static void test_ensure(void **state)
{
    char p[512], q[512];
    struct stat st;
    gs_error_t err;
    (void)state;
    snprintf(p, sizeof(p), "%s/node", base);
    assert_int_equal(gs_rundir_ensure(p, &err), 0);
    assert_int_equal(gs_rundir_ensure(p, &err), 0); /* exists and is ours */
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(chmod(p, 0750), 0);
    assert_true(gs_rundir_ensure(p, &err) < 0);
    assert_non_null(strstr(err.text, "accessible to others"));
    snprintf(q, sizeof(q), "%s/sneaky", base);
    assert_int_equal(symlink(p, q), 0);
    assert_true(gs_rundir_ensure(q, &err) < 0);
    assert_non_null(strstr(err.text, "not a directory"));
}

static void test_socket_limit(void **state)
{
    char dir[200];
    (void)state;
    /* dir + "/" + 24 bytes of socket name must stay below 108. */
    memset(dir, 'a', sizeof(dir));
    dir[0] = '/';
    dir[82] = '\0';
    assert_true(gs_rundir_socket_fits(dir));
    dir[82] = 'a';
    dir[83] = '\0';
    assert_false(gs_rundir_socket_fits(dir));
}

static void test_remove_does_not_follow_links(void **state)
{
    char tree[512], p[600], outside[512];
    struct stat st;
    (void)state;
    snprintf(outside, sizeof(outside), "%s/keep", base);
    assert_int_equal(mkdir(outside, 0700), 0);
    snprintf(p, sizeof(p), "%s/precious", outside);
    close(open(p, O_CREAT | O_WRONLY, 0600));
    snprintf(tree, sizeof(tree), "%s/tree", base);
    assert_int_equal(mkdir(tree, 0700), 0);
    snprintf(p, sizeof(p), "%s/sub", tree);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/sub/link", tree);
    assert_int_equal(symlink(outside, p), 0);
    assert_int_equal(gs_rundir_remove(tree), 0);
    assert_int_not_equal(lstat(tree, &st), 0);
    snprintf(p, sizeof(p), "%s/precious", outside);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(gs_rundir_remove(tree), 0); /* missing is fine */
}

static void test_node_name(void **state)
{
    char n[64];
    (void)state;
    gs_rundir_node_name(n, sizeof(n));
    assert_true(strlen(n) > 0 && strlen(n) <= 32);
    assert_int_equal(strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"),
                     strlen(n));
}

/* TMPDIR when set (and absolute), else the default root: /dev/shm where
 * it is usable, else /tmp. */
static void test_tmpdir(void **state)
{
    const char *root = gs_rundir_root_usable("/dev/shm") ? "/dev/shm" : "/tmp";
    (void)state;
    setenv("TMPDIR", "relative/path", 1);
    assert_string_equal(gs_rundir_tmpdir(), root);
    setenv("TMPDIR", "/var/tmp", 1);
    assert_string_equal(gs_rundir_tmpdir(), "/var/tmp");
    unsetenv("TMPDIR");
    assert_string_equal(gs_rundir_tmpdir(), root);
    assert_string_equal(gs_rundir_default_root(), root);
    /* /tmp itself is the default (Slurm sets it for every task), a dir in it is not. */
    setenv("TMPDIR", "/tmp", 1);
    assert_string_equal(gs_rundir_tmpdir(), root);
    setenv("TMPDIR", "/tmp//", 1);
    assert_string_equal(gs_rundir_tmpdir(), root);
    setenv("TMPDIR", "/tmp/mine", 1);
    assert_string_equal(gs_rundir_tmpdir(), "/tmp/mine");
    setenv("TMPDIR", "/tmpx", 1);
    assert_string_equal(gs_rundir_tmpdir(), "/tmpx");
    unsetenv("TMPDIR");
}

/* What may be the default root: a shared directory as /tmp is, or one of
 * ours; not one others may write that is not sticky, not a link, not
 * missing. */
static void test_root_usable(void **state)
{
    char d[600], link[600];
    (void)state;
    assert_true(gs_rundir_root_usable(base)); /* ours, 0700 */
    snprintf(d, sizeof(d), "%s/open", base);
    assert_int_equal(mkdir(d, 0700), 0);
    assert_int_equal(chmod(d, 0777), 0);
    assert_false(gs_rundir_root_usable(d)); /* writable by all, not sticky */
    assert_int_equal(chmod(d, 01777), 0);
    assert_true(gs_rundir_root_usable(d)); /* as /tmp and /dev/shm are */
    snprintf(link, sizeof(link), "%s/link", base);
    assert_int_equal(symlink(d, link), 0);
    assert_false(gs_rundir_root_usable(link));
    snprintf(d, sizeof(d), "%s/none", base);
    assert_false(gs_rundir_root_usable(d));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_job_is_private, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_owned_by_other_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ensure, setup, teardown),
        cmocka_unit_test(test_socket_limit),
        cmocka_unit_test_setup_teardown(test_remove_does_not_follow_links, setup, teardown),
        cmocka_unit_test(test_node_name),
        cmocka_unit_test(test_tmpdir),
        cmocka_unit_test_setup_teardown(test_root_usable, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
