/* SPDX-License-Identifier: BSD-3-Clause */
/* Directories root makes for users (runtime/files/rundir_root.c): only a base no
 * other user can write is accepted, a name planted in it is never used or
 * followed, and the dir is the user's alone. Most checks need root (the
 * base must be root's, and only root can give a dir away); as another user
 * they are skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/files/rundir.h"
#include "runtime/files/rundir_root.h"

static char top[64], base[128];

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof(top), "/tmp/gstroot.XXXXXX");
    if (mkdtemp(top) == NULL) {
        return -1;
    }
    chmod(top, 0755);
    snprintf(base, sizeof(base), "%s/base", top);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gs_rundir_remove(top);
    return 0;
}

static void test_names(void **state)
{
    (void)state;
    assert_true(gs_rundir_root_name_ok("job-4711"));
    assert_true(gs_rundir_root_name_ok("slurm-12.0"));
    assert_false(gs_rundir_root_name_ok(""));
    assert_false(gs_rundir_root_name_ok(NULL));
    assert_false(gs_rundir_root_name_ok(".."));
    assert_false(gs_rundir_root_name_ok("a/b"));
    assert_false(gs_rundir_root_name_ok("job\n1"));
}

static void test_base_checks(void **state)
{
    gs_error_t err;
    char link[160];
    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    assert_int_equal(gs_rundir_root_check_base(base, 0, &err), -ENOENT);
    assert_int_equal(gs_rundir_root_check_base(base, 1, &err), 0);
    assert_int_equal(gs_rundir_root_check_base(base, 0, &err), 0);
    /* Writable by others: anyone could take a job's name. */
    chmod(base, 01777);
    assert_int_equal(gs_rundir_root_check_base(base, 0, &err), -EPERM);
    assert_non_null(strstr(err.text, "writable by others"));
    chmod(base, 0755);
    /* Another user's base, or one under another user's directory. */
    assert_int_equal(chown(base, 65534, 65534), 0);
    assert_int_equal(gs_rundir_root_check_base(base, 0, &err), -EPERM);
    assert_non_null(strstr(err.text, "not root"));
    assert_int_equal(chown(base, 0, 0), 0);
    assert_int_equal(chown(top, 65534, 65534), 0);
    assert_int_equal(gs_rundir_root_check_base(base, 0, &err), -EPERM);
    assert_int_equal(chown(top, 0, 0), 0);
    /* A link as the base. */
    snprintf(link, sizeof(link), "%s/link", top);
    assert_int_equal(symlink(base, link), 0);
    assert_int_equal(gs_rundir_root_check_base(link, 0, &err), -ELOOP);
    assert_true(gs_rundir_root_check_base("relative", 0, &err) < 0);
}

static void test_make_and_find(void **state)
{
    gs_error_t err;
    char dir[300], path[400], victim[300];
    struct stat st;
    int kept, fd;
    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    assert_int_equal(gs_rundir_root_check_base(base, 1, &err), 0);
    assert_int_equal(
        gs_rundir_root_make(base, "job-1", 65534, 65534, dir, sizeof(dir), &kept, &err), 0);
    assert_int_equal(kept, 0);
    assert_int_equal(lstat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(st.st_mode & 07777, 0700);
    /* A second prolog keeps it. */
    assert_int_equal(
        gs_rundir_root_make(base, "job-1", 65534, 65534, dir, sizeof(dir), &kept, &err), 0);
    assert_int_equal(kept, 1);
    /* The user it was made for finds it; another user does not use it. */
    assert_int_equal(gs_rundir_root_find(base, "job-1", 65534, dir, sizeof(dir), &err), 0);
    assert_int_equal(gs_rundir_root_find(base, "job-1", 4242, dir, sizeof(dir), &err), -EPERM);
    assert_non_null(strstr(err.text, "not a private directory of uid 4242"));
    assert_int_equal(gs_rundir_root_find(base, "job-2", 65534, dir, sizeof(dir), &err), -ENOENT);
    /* Made for another user under a reused id: replaced, not handed over. */
    assert_int_equal(gs_rundir_root_make(base, "job-1", 4242, 4242, dir, sizeof(dir), &kept, &err),
                     0);
    assert_int_equal(kept, 0);
    assert_int_equal(lstat(dir, &st), 0);
    assert_int_equal(st.st_uid, 4242);
    /* Whatever is under the name (a file, a link to a victim's dir) goes,
     * and the link's target is untouched. */
    snprintf(victim, sizeof(victim), "%s/victim", top);
    assert_int_equal(mkdir(victim, 0700), 0);
    snprintf(path, sizeof(path), "%s/precious", victim);
    fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(path, sizeof(path), "%s/job-3", base);
    assert_int_equal(symlink(victim, path), 0);
    assert_int_equal(
        gs_rundir_root_make(base, "job-3", 65534, 65534, dir, sizeof(dir), &kept, &err), 0);
    assert_int_equal(lstat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    snprintf(path, sizeof(path), "%s/precious", victim);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(gs_rundir_root_owner(base, "job-3", &st.st_uid, &st.st_gid), 0);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(gs_rundir_root_owner(base, "job-9", &st.st_uid, &st.st_gid), -1);
}

/* Root's hooks of one job at once (two prologs, a prolog and the SPANK
 * plugin): every one gets the user's finished dir, none removes another's
 * half-made one (they did: both prologs failed with 71, 1 run in 6). */
static void test_makers_at_once(void **state)
{
    gs_error_t err;
    char dir[300];
    pid_t kids[8];
    int kept, status, round, i;
    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    assert_int_equal(gs_rundir_root_check_base(base, 1, &err), 0);
    for (round = 0; round < 60; round++) {
        char name[32];
        snprintf(name, sizeof(name), "job-%d", round);
        for (i = 0; i < 8; i++) {
            kids[i] = fork();
            assert_true(kids[i] >= 0);
            if (kids[i] == 0) {
                _exit(gs_rundir_root_make(base, name, 65534, 65534, dir, sizeof(dir), &kept,
                                          &err) != 0);
            }
        }
        for (i = 0; i < 8; i++) {
            assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
        }
        assert_int_equal(gs_rundir_root_find(base, name, 65534, dir, sizeof(dir), &err), 0);
    }
}

/* The sweep removes what epilogs set aside and dirs whose maker is gone; a
 * dir still being made, and the jobs' own, stay. */
static void test_set_aside_and_sweep(void **state)
{
    gs_error_t err;
    char dir[300], path[400];
    int kept;
    pid_t dead;
    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    assert_int_equal(gs_rundir_root_check_base(base, 1, &err), 0);
    assert_int_equal(
        gs_rundir_root_make(base, "job-5", 65534, 65534, dir, sizeof(dir), &kept, &err), 0);
    assert_int_equal(gs_rundir_root_set_aside(base, "job-5"), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(gs_rundir_root_set_aside(base, "job-5"), -ENOENT);
    assert_int_equal(
        gs_rundir_root_make(base, "job-6", 65534, 65534, dir, sizeof(dir), &kept, &err), 0);
    dead = fork();
    if (dead == 0) {
        _exit(0);
    }
    waitpid(dead, NULL, 0);
    snprintf(path, sizeof(path), "%s/" GS_RUNDIR_ROOT_NEW "job-7.%d", base, (int)dead);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/" GS_RUNDIR_ROOT_NEW "job-8.%d", base, (int)getpid());
    assert_int_equal(mkdir(path, 0700), 0);
    gs_rundir_root_sweep(base);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(access(dir, F_OK), 0);
    DIR *d = opendir(base);
    struct dirent *e;
    int left = 0;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        left += e->d_name[0] != '.' || strncmp(e->d_name, ".gs-", 4) == 0;
    }
    closedir(d);
    assert_int_equal(left, 2); /* job-6 and job-8's dir being made */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_base_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_make_and_find, setup, teardown),
        cmocka_unit_test_setup_teardown(test_makers_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_aside_and_sweep, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
