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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_links_mpi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
