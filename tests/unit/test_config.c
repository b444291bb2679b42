/* SPDX-License-Identifier: BSD-3-Clause */
/* Settings: every accepted and refused value, from options and variables. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "policy.h"

static void test_percentage_values(void **state)
{
    static const char *const bad[] = {"0", "-5", "101", "150", "abc", "", "50%", "1e2", " 5",
                                      "+5", "0x10", "12.5.1", "0.5", "100.01", ".", "NaN", "inf",
                                      "99999999999999", NULL};
    gs_pct_mode_t m;
    double v;
    (void)state;
    for (const char *const *b = bad; *b != NULL; b++) {
        assert_int_not_equal(gs_config_parse_percentage(*b, &m, &v), 0);
    }
    assert_int_equal(gs_config_parse_percentage("auto", &m, &v), 0);
    assert_int_equal(m, GS_PCT_AUTO);
    assert_int_equal(gs_config_parse_percentage("off", &m, &v), 0);
    assert_int_equal(m, GS_PCT_OFF);
    assert_int_equal(gs_config_parse_percentage("1", &m, &v), 0);
    assert_int_equal(m, GS_PCT_FIXED);
    assert_true(fabs(v - 1) < 1e-9);
    assert_int_equal(gs_config_parse_percentage("100", &m, &v), 0);
    assert_int_equal(gs_config_parse_percentage("12.5", &m, &v), 0);
    assert_true(fabs(v - 12.5) < 1e-9);
}

static void test_mps_values(void **state)
{
    gs_mps_mode_t m;
    (void)state;
    assert_int_equal(gs_config_parse_mps("auto", &m), 0);
    assert_int_equal(m, GS_MPS_AUTO);
    assert_int_equal(gs_config_parse_mps("on", &m), 0);
    assert_int_equal(m, GS_MPS_ON);
    assert_int_equal(gs_config_parse_mps("off", &m), 0);
    assert_int_equal(m, GS_MPS_OFF);
    assert_int_not_equal(gs_config_parse_mps("maybe", &m), 0);
    assert_int_not_equal(gs_config_parse_mps("ON", &m), 0);
    assert_int_not_equal(gs_config_parse_mps("", &m), 0);
}

static void test_set_names_origin_and_keeps_config(void **state)
{
    gs_config_t c;
    gs_error_t err;
    (void)state;
    gs_config_init(&c);
    assert_true(gs_config_set(&c, "mps-percentage", "150", "--mps-percentage", &err) < 0);
    assert_non_null(strstr(err.text, "--mps-percentage"));
    assert_non_null(strstr(err.text, "150"));
    assert_non_null(strstr(err.text, "1 to 100"));
    assert_int_equal(c.pct_mode, GS_PCT_AUTO);
    assert_true(gs_config_set(&c, "mps", "maybe", "GSRUN_MPS", &err) < 0);
    assert_non_null(strstr(err.text, "GSRUN_MPS"));
    assert_true(gs_config_set(&c, "mps-control", "/bin/x\nquit", "--mps-control", &err) < 0);
    assert_non_null(strstr(err.text, "control characters"));
    char longv[GS_MAX_VALUE_LEN + 10];
    memset(longv, 'a', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = '\0';
    assert_true(gs_config_set(&c, "launcher", longv, "--launcher", &err) < 0);
    assert_non_null(strstr(err.text, "longer"));
    assert_true(gs_config_set(&c, "mps-timeout", "0", "--mps-timeout", &err) < 0);
    assert_true(gs_config_set(&c, "mps-timeout", "3601", "--mps-timeout", &err) < 0);
    assert_true(gs_config_set(&c, "mps-timeout", "5s", "--mps-timeout", &err) < 0);
    assert_int_equal(gs_config_set(&c, "mps-timeout", "5", "--mps-timeout", &err), 0);
    assert_int_equal(c.timeout_s, 5);
    assert_true(gs_config_set(&c, "verbose", "10", "GSRUN_VERBOSE", &err) < 0);
    assert_true(gs_config_set(&c, "dry-run", "maybe", "GSRUN_DRY_RUN", &err) < 0);
    assert_true(gs_config_set(&c, "nonsense", "1", "--nonsense", &err) < 0);
}

static void test_env_roundtrip(void **state)
{
    gs_config_t a, b;
    gs_error_t err;
    (void)state;
    gs_config_init(&a);
    a.mps = GS_MPS_ON;
    a.pct_mode = GS_PCT_FIXED;
    a.pct = 33.5;
    a.timeout_s = 7;
    a.verbose = 2;
    strcpy(a.control, "/opt/x/nvidia-cuda-mps-control");
    assert_int_equal(gs_config_export_env(&a, &err), 0);
    gs_config_init(&b);
    assert_int_equal(gs_config_load_env(&b, &err), 0);
    assert_int_equal(b.mps, GS_MPS_ON);
    assert_int_equal(b.pct_mode, GS_PCT_FIXED);
    assert_true(fabs(b.pct - 33.5) < 1e-9);
    assert_int_equal(b.timeout_s, 7);
    assert_int_equal(b.verbose, 2);
    assert_string_equal(b.control, a.control);
    /* A bad variable is reported by name and changes nothing. */
    setenv("GSRUN_MPS_PERCENTAGE", "abc", 1);
    gs_config_init(&b);
    assert_true(gs_config_load_env(&b, &err) < 0);
    assert_non_null(strstr(err.text, "GSRUN_MPS_PERCENTAGE"));
    assert_int_equal(b.mps, GS_MPS_AUTO);
    unsetenv("GSRUN_MPS_PERCENTAGE");
}

/* Messages name a setting as the front end that started the job spells it,
 * and the agent learns which one through the environment. */
static void test_option_names(void **state)
{
    gs_config_t a, b;
    gs_error_t err;
    char buf[64];
    (void)state;
    gs_config_init(&a);
    assert_string_equal(gs_config_opt(&a, "mps-timeout", buf, sizeof(buf)), "--mps-timeout");
    a.names = GS_NAMES_MCA;
    assert_string_equal(gs_config_opt(&a, "mps-timeout", buf, sizeof(buf)),
                        "rtc_gsrun_mps_timeout");
    assert_int_equal(gs_config_export_env(&a, &err), 0);
    gs_config_init(&b);
    assert_int_equal(gs_config_load_env(&b, &err), 0);
    assert_int_equal(b.names, GS_NAMES_MCA);
    /* gs_plan_compute's messages follow it. */
    gs_plan_t plan;
    b.mps = GS_MPS_ON;
    assert_true(gs_plan_compute(&b, 4, 0, 1, NULL, &plan, &err) < 0);
    assert_non_null(strstr(err.text, "rtc_gsrun_mps=on: no NVIDIA GPU"));
    assert_non_null(strstr(err.text, "use rtc_gsrun_mps=auto"));
    a.names = GS_NAMES_GSRUN;
    assert_int_equal(gs_config_export_env(&a, &err), 0);
}

static void test_find_executable(void **state)
{
    char out[4096];
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_config_find_executable("sh", NULL, "x", out, sizeof(out), &err), 0);
    assert_non_null(strstr(out, "/sh"));
    assert_int_equal(gs_config_find_executable("/bin/sh", NULL, "x", out, sizeof(out), &err), 0);
    assert_int_equal(gs_config_find_executable("/nonexistent/x", NULL, "thing", out, sizeof(out),
                                               &err),
                     -ENOENT);
    assert_non_null(strstr(err.text, "thing '/nonexistent/x' does not exist"));
    assert_int_equal(gs_config_find_executable("/etc/passwd", NULL, "x", out, sizeof(out), &err),
                     -EACCES);
    assert_int_equal(gs_config_find_executable("/etc", NULL, "x", out, sizeof(out), &err), -EACCES);
    assert_int_equal(gs_config_find_executable("no-such-program-gsrun", "/nonexistent", "x", out,
                                               sizeof(out), &err),
                     -ENOENT);
    assert_non_null(strstr(err.text, "not found in PATH"));
}

int main(void)
{
    unsetenv("GSRUN_MPS");
    unsetenv("GSRUN_MPS_PERCENTAGE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentage_values),
        cmocka_unit_test(test_mps_values),
        cmocka_unit_test(test_set_names_origin_and_keeps_config),
        cmocka_unit_test(test_env_roundtrip),
        cmocka_unit_test(test_option_names),
        cmocka_unit_test(test_find_executable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
