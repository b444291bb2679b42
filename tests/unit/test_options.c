/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun's command line: where gsrun's options end, and a table of bad
 * inputs that each must be refused with a message naming the option. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/options.h"

static int parse(gs_opts_t *o, gs_error_t *err, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    argv[argc++] = "gsrun";
    va_start(ap, err);
    for (char *a = va_arg(ap, char *); a != NULL && argc < 31; a = va_arg(ap, char *)) {
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc] = NULL;
    return gs_opts_parse(argc, argv, o, err);
}

static void clear_env(void)
{
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        unsetenv(k->env);
    }
}

static void test_stops_at_launcher_args(void **state)
{
    gs_opts_t o;
    gs_error_t err;
    (void)state;
    assert_int_equal(parse(&o, &err, "-np", "16", "./app", NULL), 0);
    assert_int_equal(o.first_arg, 1);
    assert_int_equal(parse(&o, &err, "--mps=on", "-v", "-np", "4", "./app", "-v", NULL), 0);
    assert_int_equal(o.first_arg, 3);
    assert_int_equal(o.cfg.mps, GS_MPS_ON);
    assert_int_equal(o.cfg.verbose, 1);
    /* mpirun's own long options end gsrun's. */
    assert_int_equal(parse(&o, &err, "--oversubscribe", "-np", "2", "a", NULL), 0);
    assert_int_equal(o.first_arg, 1);
    /* "--" ends gsrun's options, so mpirun can get its own -v. */
    assert_int_equal(parse(&o, &err, "--mps", "off", "--", "-v", "-np", "2", "a", NULL), 0);
    assert_int_equal(o.first_arg, 4);
    assert_int_equal(o.cfg.mps, GS_MPS_OFF);
    assert_int_equal(parse(&o, &err, "-v", "-v", "--dry-run", "--mps-percentage=25", "a", NULL),
                     0);
    assert_int_equal(o.cfg.verbose, 2);
    assert_true(o.cfg.dry_run);
    assert_int_equal(o.cfg.pct_mode, GS_PCT_FIXED);
    assert_int_equal(parse(&o, &err, "-vv", "-v", "a", NULL), 0);
    assert_int_equal(o.cfg.verbose, 3);
    assert_int_equal(parse(&o, &err, "-vx", "a", NULL), 0); /* not ours: mpirun's */
    assert_int_equal(o.cfg.verbose, 0);
    assert_int_equal(o.first_arg, 1);
}

static void test_env_then_command_line(void **state)
{
    gs_opts_t o;
    gs_error_t err;
    (void)state;
    setenv("GSRUN_MPS", "off", 1);
    setenv("GSRUN_MPS_PERCENTAGE", "30", 1);
    assert_int_equal(parse(&o, &err, "--mps=on", "a", NULL), 0);
    assert_int_equal(o.cfg.mps, GS_MPS_ON);
    assert_int_equal(o.cfg.pct_mode, GS_PCT_FIXED);
    clear_env();
}

static void test_help_needs_no_program(void **state)
{
    gs_opts_t o;
    gs_error_t err;
    (void)state;
    assert_int_equal(parse(&o, &err, "--help", NULL), 0);
    assert_true(o.help);
    assert_int_equal(parse(&o, &err, "-V", NULL), 0);
    assert_true(o.version);
}

/* Each row: arguments (NULL-padded) and a word the message must contain. */
typedef struct {
    const char *args[4];
    const char *must;
} bad_row_t;

static const bad_row_t bad_args[] = {
    {{"--mps-percentage=0", "a"}, "--mps-percentage"},
    {{"--mps-percentage=-5", "a"}, "--mps-percentage"},
    {{"--mps-percentage=101", "a"}, "--mps-percentage"},
    {{"--mps-percentage=150", "a"}, "--mps-percentage"},
    {{"--mps-percentage=abc", "a"}, "--mps-percentage"},
    {{"--mps-percentage=", "a"}, "empty value"},
    {{"--mps-percentage=50%", "a"}, "--mps-percentage"},
    {{"--mps-percentage=1e2", "a"}, "--mps-percentage"},
    {{"--mps-percentage", "0x10", "a"}, "--mps-percentage"},
    {{"--mps-percentage", " 5", "a"}, "--mps-percentage"},
    {{"--mps-percentage=100.5", "a"}, "--mps-percentage"},
    {{"--mps-percentage=auto\t", "a"}, "control characters"},
    {{"--mps=maybe", "a"}, "--mps"},
    {{"--mps=", "a"}, "empty value"},
    {{"--mps=ON", "a"}, "--mps"},
    {{"--mps", "yes", "a"}, "--mps"},
    {{"--mps=on\n", "a"}, "control characters"},
    {{"--mps-timeout=0", "a"}, "--mps-timeout"},
    {{"--mps-timeout=-1", "a"}, "--mps-timeout"},
    {{"--mps-timeout=3601", "a"}, "--mps-timeout"},
    {{"--mps-timeout=abc", "a"}, "--mps-timeout"},
    {{"--mps-timeout=1.5", "a"}, "--mps-timeout"},
    {{"--mps-timeout=", "a"}, "empty value"},
    {{"--mps-timeout=99999999999", "a"}, "--mps-timeout"},
    {{"--mps-control=", "a"}, "empty value"},
    {{"--mps-control=/x\x01y", "a"}, "control characters"},
    {{"--launcher=", "a"}, "empty value"},
    {{"--launcher=mpi\x1brun", "a"}, "control characters"},
    {{"--mps-frobnicate=1", "a"}, "unknown gsrun option"},
    {{"--mps-percent=10", "a"}, "unknown gsrun option"},
    {{"--mpsx", "a"}, "unknown gsrun option"},
    {{"--dry-run=1", "a"}, "unknown gsrun option"},
    {{"--verbose=3", "a"}, "unknown gsrun option"},
    {{"--mps"}, "missing value"},
    {{"--mps-percentage"}, "missing value"},
    {{"--launcher"}, "missing value"},
    {{"--mps-control"}, "missing value"},
    {{"--mps-timeout"}, "missing value"},
    {{NULL}, "no program given"},
    {{"--mps=on"}, "no program given"},
    {{"-v", "--dry-run"}, "no program given"},
    {{"--"}, "no program given"},
};

static void test_bad_arguments(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_args) / sizeof(bad_args[0]); i++) {
        char *argv[8] = {"gsrun"};
        int argc = 1;
        gs_opts_t o;
        gs_error_t err = {{0}};
        for (int j = 0; j < 4 && bad_args[i].args[j] != NULL; j++) {
            argv[argc++] = (char *)bad_args[i].args[j];
        }
        argv[argc] = NULL;
        int rc = gs_opts_parse(argc, argv, &o, &err);
        if (rc == 0 || strstr(err.text, bad_args[i].must) == NULL) {
            fail_msg("row %zu (%s): rc=%d message '%s' lacks '%s'", i,
                     bad_args[i].args[0] ? bad_args[i].args[0] : "(none)", rc, err.text,
                     bad_args[i].must);
        }
    }
}

typedef struct {
    const char *var, *value, *must;
} bad_env_t;

static const bad_env_t bad_env[] = {
    {"GSRUN_MPS", "maybe", "GSRUN_MPS"},
    {"GSRUN_MPS", "", "empty value"},
    {"GSRUN_MPS_PERCENTAGE", "0", "GSRUN_MPS_PERCENTAGE"},
    {"GSRUN_MPS_PERCENTAGE", "-5", "GSRUN_MPS_PERCENTAGE"},
    {"GSRUN_MPS_PERCENTAGE", "101", "GSRUN_MPS_PERCENTAGE"},
    {"GSRUN_MPS_PERCENTAGE", "abc", "GSRUN_MPS_PERCENTAGE"},
    {"GSRUN_MPS_PERCENTAGE", "50%", "GSRUN_MPS_PERCENTAGE"},
    {"GSRUN_MPS_PERCENTAGE", "", "empty value"},
    {"GSRUN_MPS_TIMEOUT", "0", "GSRUN_MPS_TIMEOUT"},
    {"GSRUN_MPS_TIMEOUT", "x", "GSRUN_MPS_TIMEOUT"},
    {"GSRUN_VERBOSE", "-1", "GSRUN_VERBOSE"},
    {"GSRUN_VERBOSE", "high", "GSRUN_VERBOSE"},
    {"GSRUN_DRY_RUN", "2", "GSRUN_DRY_RUN"},
    {"GSRUN_MPS_CONTROL", "", "empty value"},
    {"GSRUN_MPS_CONTROL", "/a\nb", "control characters"},
    {"GSRUN_LAUNCHER", "", "empty value"},
};

static void test_bad_environment(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_env) / sizeof(bad_env[0]); i++) {
        gs_opts_t o;
        gs_error_t err = {{0}};
        clear_env();
        setenv(bad_env[i].var, bad_env[i].value, 1);
        int rc = parse(&o, &err, "-np", "2", "a", NULL);
        if (rc == 0 || strstr(err.text, bad_env[i].must) == NULL) {
            fail_msg("%s='%s': rc=%d message '%s'", bad_env[i].var, bad_env[i].value, rc,
                     err.text);
        }
    }
    clear_env();
}

static void test_help_lists_every_option(void **state)
{
    static char gs_usage_text[16384];
    FILE *f = fmemopen(gs_usage_text, sizeof(gs_usage_text), "w");
    (void)state;
    gs_usage_print(f);
    fclose(f);
    /* Every line fits the terminal's 86 columns we promise. */
    for (const char *l = gs_usage_text; *l != '\0';) {
        size_t n = strcspn(l, "\n");
        assert_true(n <= 86);
        l += n + (l[n] == '\n');
    }
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        char opt[64];
        if (!(k->fronts & GS_FRONT_GSRUN)) {
            assert_null(strstr(gs_usage_text, k->env)); /* not one of gsrun's */
            continue;
        }
        snprintf(opt, sizeof(opt), "--%s", k->option);
        assert_non_null(strstr(gs_usage_text, opt));
        assert_non_null(strstr(gs_usage_text, k->env));
    }
}

int main(void)
{
    clear_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stops_at_launcher_args), cmocka_unit_test(test_env_then_command_line),
        cmocka_unit_test(test_help_needs_no_program),  cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_bad_environment),        cmocka_unit_test(test_help_lists_every_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
