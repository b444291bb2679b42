/* SPDX-License-Identifier: BSD-3-Clause */
/* Settings: every accepted and refused value, from options and variables. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/config.h"
#include "runtime/plan/policy.h"

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
/* Slurm's gres/mps share is seen in a Slurm step only, and not in a rank
 * gsrun itself gave one. */
static void test_site_mps_from_env(void **state)
{
    gs_config_t c;
    gs_error_t err;
    (void)state;
    unsetenv("SLURM_JOB_ID");
    unsetenv("GSRUN_MPS_ACTIVE");
    setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50", 1);
    gs_config_init(&c);
    assert_int_equal(gs_config_load_env(&c, &err), 0);
    assert_string_equal(c.site_mps, ""); /* not Slurm's */
    setenv("SLURM_JOB_ID", "42", 1);
    assert_int_equal(gs_config_load_env(&c, &err), 0);
    assert_string_equal(c.site_mps, "50");
    gs_config_init(&c);
    setenv("GSRUN_MPS_ACTIVE", "1", 1);
    assert_int_equal(gs_config_load_env(&c, &err), 0);
    assert_string_equal(c.site_mps, ""); /* gsrun's own */
    unsetenv("GSRUN_MPS_ACTIVE");
    unsetenv("SLURM_JOB_ID");
    unsetenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
}

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
    /* gs_policy_plan_compute's messages follow it. */
    gs_plan_t plan;
    b.mps = GS_MPS_ON;
    assert_true(gs_policy_plan_compute(&b, 4, 0, 1, NULL, 48, &plan, &err) < 0);
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

/* The settings table: each row reads back what it writes, from any value
 * it accepts; and each front end takes the settings it documents. */
static void test_table_rows_round_trip(void **state)
{
    static const struct {
        const char *option, *value;
    } values[] = {{"mps", "on"}, {"mps-percentage", "37.5"}, {"mps-control", "/opt/x/ctl"},
                  {"mps-timeout", "12"}, {"gpu-bind", "none"}, {"mps-memory-limit", "2G"},
                  {"mps-clients-per-server", "32"}, {"mps-priority", "low"}, {"mps-share", "node"},
                  {"mps-linger", "30"}, {"mps-fault-grace", "5"}, {"launcher", "/usr/bin/mpirun"}, {"dry-run", "1"},
                  {"verbose", "3"}, {"mps-prestart", "0"}};
    gs_error_t err;
    (void)state;
    int rows = 0;
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++, rows++) {
        assert_non_null(k->env);
        assert_non_null(k->parse);
        assert_non_null(k->format);
        assert_ptr_equal(gs_config_key(k->option), k);
        /* gsrun --help shows each of gsrun's options with its text. */
        if (k->fronts & GS_FRONT_GSRUN) {
            assert_non_null(k->help);
            assert_non_null(k->metavar);
        }
    }
    assert_true(rows <= GS_CONFIG_KEYS_MAX); /* the component's array, by row */
    assert_int_equal(rows, (int)(sizeof(values) / sizeof(values[0])));
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        gs_config_t a, b;
        char text[GS_MAX_VALUE_LEN];
        const gs_config_key_t *k = gs_config_key(values[i].option);
        assert_non_null(k);
        gs_config_init(&a);
        assert_int_equal(gs_config_set(&a, k->option, values[i].value, "test", &err), 0);
        k->format(&a, text, sizeof(text));
        gs_config_init(&b);
        assert_int_equal(k->parse(&b, text), 0);
        assert_memory_equal(&a, &b, sizeof(a));
    }
    assert_null(gs_config_key("no-such-setting"));
}

static void test_clients_per_server(void **state)
{
    gs_config_t c;
    gs_error_t err;
    (void)state;
    gs_config_init(&c);
    assert_int_equal(c.clients_per_server, 0); /* auto: the driver's limit */
    assert_int_equal(gs_config_set(&c, "mps-clients-per-server", "60", "--x", &err), 0);
    assert_int_equal(c.clients_per_server, 60);
    assert_int_equal(gs_config_set(&c, "mps-clients-per-server", "auto", "--x", &err), 0);
    assert_int_equal(c.clients_per_server, 0);
    static const char *const bad[] = {"0", "-1", "1025", "many", "4.5", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_true(gs_config_set(&c, "mps-clients-per-server", bad[i], "--mps-clients-per-server",
                                  &err) < 0);
        assert_int_equal(c.clients_per_server, 0); /* unchanged */
    }
    assert_int_equal(gs_config_set(&c, "mps-clients-per-server", "0", "--mps-clients-per-server",
                                   &err),
                     -EINVAL);
    assert_non_null(strstr(err.text, "--mps-clients-per-server"));
    assert_non_null(strstr(err.text, "from 1 to 1024"));
}

static void fronts(unsigned front, char *out, size_t len)
{
    out[0] = '\0';
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        if (k->fronts & front) {
            size_t l = strlen(out);
            snprintf(out + l, len - l, "%s%s", l ? " " : "", k->option);
        }
    }
}

static void test_front_ends_take_what_they_document(void **state)
{
    char got[512];
    (void)state;
    fronts(GS_FRONT_BATCH, got, sizeof(got)); /* gsrun prolog --help */
    assert_string_equal(got, "mps mps-percentage mps-control mps-timeout mps-memory-limit "
                             "mps-clients-per-server mps-priority");
    fronts(GS_FRONT_MCA, got, sizeof(got)); /* doc/openmpi.md's table */
    assert_string_equal(got, "mps mps-percentage mps-control mps-timeout gpu-bind "
                             "mps-memory-limit mps-clients-per-server mps-priority mps-share "
                             "mps-linger mps-fault-grace verbose");
    fronts(GS_FRONT_RANKS, got, sizeof(got)); /* mpirun -x */
    assert_string_equal(got, "mps mps-percentage mps-control mps-timeout gpu-bind "
                             "mps-memory-limit mps-clients-per-server mps-priority mps-share "
                             "mps-linger mps-fault-grace verbose");
    fronts(GS_FRONT_SPANK, got, sizeof(got));
    assert_string_equal(got, "mps mps-percentage mps-control mps-timeout gpu-bind "
                             "mps-memory-limit mps-clients-per-server mps-priority mps-share "
                             "mps-linger mps-fault-grace verbose");
    /* doc/slurm.md's plugstack arguments */
    assert_string_equal(gs_config_key("mps-percentage")->spank, "percentage");
    assert_string_equal(gs_config_key("mps-memory-limit")->spank, "memory_limit");
    assert_string_equal(gs_config_key("mps-clients-per-server")->spank, "clients_per_server");
    assert_string_equal(gs_config_key("mps-priority")->spank, "priority");
    assert_string_equal(gs_config_key("mps-share")->spank, "share");
    assert_string_equal(gs_config_key("mps-linger")->spank, "linger");
    assert_string_equal(gs_config_key("mps-fault-grace")->spank, "fault_grace");
    assert_null(gs_config_key("launcher")->spank);
    /* The measuring switch is no front end's option. */
    assert_int_equal(gs_config_key("mps-prestart")->fronts, 0);
}

/* The share's default, auto: the user's jobs share, except in a Slurm job
 * step (Slurm ends what a step started with it). */
static void test_share_auto(void **state)
{
    gs_config_t c;
    gs_error_t err;
    char buf[32];
    (void)state;
    unsetenv("SLURM_STEP_ID");
    gs_config_init(&c);
    assert_true(c.share_auto);
    assert_true(c.share_node);
    gs_config_key("mps-share")->format(&c, buf, sizeof(buf));
    assert_string_equal(buf, "auto");
    setenv("SLURM_STEP_ID", "3", 1);
    gs_config_init(&c);
    assert_false(c.share_node);
    assert_int_equal(gs_config_set(&c, "mps-share", "node", "--mps-share", &err), 0);
    assert_true(c.share_node);
    assert_false(c.share_auto);
    assert_int_equal(gs_config_set(&c, "mps-share", "auto", "--mps-share", &err), 0);
    assert_false(c.share_node); /* still in the step */
    setenv("SLURM_STEP_ID", "batch", 1); /* a batch script's own processes: not a step */
    assert_int_equal(gs_config_set(&c, "mps-share", "auto", "--mps-share", &err), 0);
    assert_true(c.share_node);
    assert_int_equal(gs_config_set(&c, "mps-share", "job", "--mps-share", &err), 0);
    assert_false(c.share_node);
    unsetenv("SLURM_STEP_ID");
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
        cmocka_unit_test(test_site_mps_from_env),
        cmocka_unit_test(test_option_names),
        cmocka_unit_test(test_find_executable),
        cmocka_unit_test(test_table_rows_round_trip),
        cmocka_unit_test(test_clients_per_server),
        cmocka_unit_test(test_front_ends_take_what_they_document),
        cmocka_unit_test(test_share_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
