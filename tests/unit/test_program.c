/* SPDX-License-Identifier: BSD-3-Clause */
/* runtime/rank/program.c: which programs link an MPI library, by their
 * dynamic section; scripts, interpreters and wrappers are unknown. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/rank/program.h"

static void test_resolve(void **state)
{
    char path[GS_PATH_MAX];
    (void)state;
    assert_int_equal(gs_program_resolve("true", path, sizeof(path)), 0);
    assert_true(strcmp(path, "/usr/bin/true") == 0 || strcmp(path, "/bin/true") == 0);
    assert_int_equal(gs_program_resolve("gs-no-such-program", path, sizeof(path)), -ENOENT);
    assert_int_equal(gs_program_resolve("/etc/passwd", path, sizeof(path)), -ENOENT);
}

static void test_links_mpi(void **state)
{
    char path[GS_PATH_MAX], script[] = "/tmp/gs_test_prog.XXXXXX";
    const char *build = getenv("GS_TOP_BUILDDIR");
    (void)state;
    /* An ELF executable with libc only. */
    assert_int_equal(gs_program_resolve("printenv", path, sizeof(path)), 0);
    assert_int_equal(gs_program_links_mpi(path), 0);
    /* The tests' MPI program: links libmpi. */
    snprintf(path, sizeof(path), "%s/tests/progs/rank_report", build != NULL ? build : ".");
    if (access(path, X_OK) == 0) {
        assert_int_equal(gs_program_links_mpi(path), 1);
    }
    /* Interpreters and wrappers run something else: unknown. */
    assert_int_equal(gs_program_links_mpi("/usr/bin/python3"), -1);
    assert_int_equal(gs_program_links_mpi("/usr/bin/python3.11"), -1);
    assert_int_equal(gs_program_links_mpi("/usr/bin/env"), -1);
    assert_int_equal(gs_program_links_mpi("/bin/sh"), -1);
    /* A script: not ELF. */
    int fd = mkstemp(script);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "#!/bin/sh\nexit 0\n", 17), 17);
    close(fd);
    assert_int_equal(gs_program_links_mpi(script), -1);
    unlink(script);
    assert_int_equal(gs_program_links_mpi("/nonexistent/prog"), -1);
}

/* The errno gs_program_exec returns in a child for argv0 with PATH, or
 * 0 when the exec succeeded (the program ran and exited 0). */
static int exec_errno(const char *argv0, const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {(char *)argv0, NULL};
        setenv("PATH", path, 1);
        _exit(100 + gs_program_exec(argv));
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st) == 0 ? 0 : WEXITSTATUS(st) - 100;
}

/* An executable without "#!" fails as under Open MPI's orted (ENOEXEC),
 * by path and by PATH: execvp would have run it through /bin/sh. */
static void test_exec_no_shebang(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs_prog.XXXXXX", file[64];
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/noshebang", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("exit 0\n", f);
    fclose(f);
    assert_int_equal(chmod(file, 0755), 0);
    assert_int_equal(exec_errno(file, "/usr/bin:/bin"), ENOEXEC);
    assert_int_equal(exec_errno("noshebang", dir), ENOEXEC);
    assert_int_equal(exec_errno("gs-no-such-program", dir), ENOENT);
    assert_int_equal(exec_errno("true", "/nonexistent:/usr/bin:/bin"), 0);
    unlink(file);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_links_mpi),
        cmocka_unit_test(test_exec_no_shebang),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
