/* SPDX-License-Identifier: BSD-3-Clause */
/* Where a node keeps the job's run dir: gsrun's own dir on gsrun's node,
 * the same name in the node's own TMPDIR elsewhere, nothing else. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rank/node.h"
#include "runtime/files/rundir.h"

static char tmp[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof(tmp), "/tmp/gs_test_node.XXXXXX");
    if (mkdtemp(tmp) == NULL) {
        return -1;
    }
    return setenv("TMPDIR", tmp, 1);
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("TMPDIR");
    return gs_rundir_remove(tmp);
}

static void test_node_id_is_stable(void **state)
{
    char a[160], b[160];
    (void)state;
    gs_node_id(a, sizeof(a));
    gs_node_id(b, sizeof(b));
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "/pid:[")); /* boot id / PID namespace */
}

static void test_job_dir_on_gsrun_node(void **state)
{
    char id[160], out[256];
    gs_node_req_t req = {0};
    gs_error_t err;
    int here = -1;
    (void)state;
    gs_node_id(id, sizeof(id));
    req.job_dir = "/somewhere/else/gsrun.Ab12Cd";
    req.gsrun_node = id;
    assert_int_equal(gs_node_job_dir(&req, out, sizeof(out), &here, &err), 0);
    assert_int_equal(here, 1);
    assert_string_equal(out, "/somewhere/else/gsrun.Ab12Cd");
}

static void test_job_dir_on_other_node(void **state)
{
    char out[256], want[300];
    gs_node_req_t req = {0};
    gs_error_t err;
    int here = -1;
    (void)state;
    req.job_dir = "/gsrun/node/tmp/gsrun.Ab12Cd";
    req.gsrun_node = "another-boot-id/pid:[1]";
    assert_int_equal(gs_node_job_dir(&req, out, sizeof(out), &here, &err), 0);
    assert_int_equal(here, 0);
    snprintf(want, sizeof(want), "%s/gsrun.Ab12Cd", tmp);
    assert_string_equal(out, want);
}

static void test_job_dir_refuses_other_names(void **state)
{
    static const char *const bad[] = {"/tmp/gsrun.Ab12Cd/../x", "/tmp/other.Ab12Cd", "gsrun.Ab12Cd",
                                      "/tmp/gsrun.Ab.2Cd", NULL};
    char out[256];
    gs_node_req_t req = {0};
    gs_error_t err;
    int here;
    (void)state;
    req.gsrun_node = "another-boot-id/pid:[1]";
    for (const char *const *b = bad; *b != NULL; b++) {
        req.job_dir = *b;
        assert_int_not_equal(gs_node_job_dir(&req, out, sizeof(out), &here, &err), 0);
    }
}

static void test_job_dir_refuses_unsafe_tmpdir(void **state)
{
    char out[256], link[300];
    gs_node_req_t req = {0};
    gs_error_t err;
    int here;
    (void)state;
    snprintf(link, sizeof(link), "%s/link", tmp);
    assert_int_equal(symlink(tmp, link), 0);
    setenv("TMPDIR", link, 1);
    req.job_dir = "/x/gsrun.Ab12Cd";
    req.gsrun_node = "another-boot-id/pid:[1]";
    assert_int_not_equal(gs_node_job_dir(&req, out, sizeof(out), &here, &err), 0);
    assert_non_null(strstr(err.text, "symbolic link"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_id_is_stable),
        cmocka_unit_test(test_job_dir_on_gsrun_node),
        cmocka_unit_test_setup_teardown(test_job_dir_on_other_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_dir_refuses_other_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_dir_refuses_unsafe_tmpdir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
