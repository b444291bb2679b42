/* SPDX-License-Identifier: BSD-3-Clause */
/* Policy: thread percentages, block placement, the client limit, and when
 * MPS is on, off or refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/plan/policy.h"

static gs_config_t cfg_auto(void)
{
    gs_config_t c;
    gs_config_init(&c);
    return c;
}

static void test_default_percentage(void **state)
{
    (void)state;
    assert_true(fabs(gs_policy_default_percentage(1) - 100.0) < 1e-9);
    assert_true(fabs(gs_policy_default_percentage(2) - 100.0) < 1e-9);
    assert_true(fabs(gs_policy_default_percentage(3) - 200.0 / 3) < 1e-9);
    assert_true(fabs(gs_policy_default_percentage(16) - 12.5) < 1e-9);
    assert_true(fabs(gs_policy_default_percentage(48) - 200.0 / 48) < 1e-9);
    assert_true(fabs(gs_policy_default_percentage(60) - 200.0 / 60) < 1e-9);
}

static void test_format(void **state)
{
    char b[32];
    (void)state;
    gs_policy_format_percentage(12.5, b, sizeof(b));
    assert_string_equal(b, "12.5");
    gs_policy_format_percentage(100, b, sizeof(b));
    assert_string_equal(b, "100");
    gs_policy_format_percentage(200.0 / 3, b, sizeof(b));
    assert_string_equal(b, "66.6667");
    gs_policy_format_percentage(200.0 / 48, b, sizeof(b));
    assert_string_equal(b, "4.1667");
    gs_policy_format_percentage(200.0 / 60, b, sizeof(b));
    assert_string_equal(b, "3.3333");
}

static void test_one_gpu_shares(void **state)
{
    static const int ns[] = {2, 3, 16, 48};
    (void)state;
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        gs_config_t c = cfg_auto();
        gs_plan_t p;
        assert_int_equal(gs_policy_plan_compute(&c, ns[i], 1, 1, NULL, &p, NULL), 0);
        assert_true(p.use_mps);
        assert_int_equal(p.ngpus, 1);
        assert_int_equal(p.gpu[0].first_rank, 0);
        assert_int_equal(p.gpu[0].nranks, ns[i]);
        assert_true(p.gpu[0].pct_set);
        assert_true(fabs(p.gpu[0].pct - gs_policy_default_percentage(ns[i])) < 1e-9);
    }
}

static void test_single_rank_auto_is_off(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 1, NULL, &p, NULL), 0);
    assert_false(p.use_mps);
    assert_false(p.notice);
    /* Forced on, one rank gets MPS at 100 %. */
    c.mps = GS_MPS_ON;
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 1, NULL, &p, NULL), 0);
    assert_true(p.use_mps);
    assert_true(fabs(p.gpu[0].pct - 100.0) < 1e-9);
}

static void test_uneven_blocks(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    /* 5 ranks on 2 GPUs: 0-1 and 2-4 (blocks differ by at most one). */
    assert_int_equal(gs_policy_plan_compute(&c, 5, 2, 1, NULL, &p, NULL), 0);
    assert_true(p.use_mps);
    assert_int_equal(p.ngpus, 2);
    assert_int_equal(p.gpu[0].first_rank, 0);
    assert_int_equal(p.gpu[0].nranks, 2);
    assert_int_equal(p.gpu[1].first_rank, 2);
    assert_int_equal(p.gpu[1].nranks, 3);
    assert_true(fabs(p.gpu[0].pct - 100.0) < 1e-9);
    assert_true(fabs(p.gpu[1].pct - 200.0 / 3) < 1e-9);
    for (int r = 0; r < 5; r++) {
        assert_int_equal(gs_policy_plan_gpu_of_rank(&p, r), r < 2 ? 0 : 1);
    }
    assert_int_equal(gs_policy_plan_gpu_of_rank(&p, 5), -1);
    /* 16 ranks on 3 GPUs: 5, 5, 6 */
    assert_int_equal(gs_policy_plan_compute(&c, 16, 3, 1, NULL, &p, NULL), 0);
    assert_int_equal(p.gpu[0].nranks + p.gpu[1].nranks + p.gpu[2].nranks, 16);
    assert_int_equal(p.gpu[0].nranks, 5);
    assert_int_equal(p.gpu[2].nranks, 6);
    /* Fewer ranks than GPUs: one each, MPS not needed under auto. */
    assert_int_equal(gs_policy_plan_compute(&c, 3, 4, 1, NULL, &p, NULL), 0);
    assert_false(p.use_mps);
    assert_int_equal(p.ngpus, 3);
}

static void test_fixed_and_off_percentage(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    c.pct_mode = GS_PCT_FIXED;
    c.pct = 25;
    assert_int_equal(gs_policy_plan_compute(&c, 16, 1, 1, NULL, &p, NULL), 0);
    assert_true(p.gpu[0].pct_set);
    assert_true(fabs(p.gpu[0].pct - 25) < 1e-9);
    c.pct_mode = GS_PCT_OFF;
    assert_int_equal(gs_policy_plan_compute(&c, 16, 1, 1, NULL, &p, NULL), 0);
    assert_false(p.gpu[0].pct_set);
}

static void test_client_limit(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_policy_plan_compute(&c, GS_MPS_MAX_CLIENTS, 1, 1, NULL, &p, &err), 0);
    assert_true(p.use_mps);
    /* auto over the limit: the job runs without MPS, with a notice. */
    assert_int_equal(gs_policy_plan_compute(&c, GS_MPS_MAX_CLIENTS + 1, 1, 1, NULL, &p, &err), 0);
    assert_false(p.use_mps);
    assert_true(p.notice);
    assert_non_null(strstr(p.reason, "49 ranks share GPU 0, more than the 48 clients"));
    assert_non_null(strstr(p.reason, "running without MPS"));
    assert_int_equal(gs_policy_plan_compute(&c, 60, 1, 1, NULL, &p, &err), 0);
    assert_false(p.use_mps);
    /* on over the limit: an error that says what to do. */
    c.mps = GS_MPS_ON;
    assert_true(gs_policy_plan_compute(&c, GS_MPS_MAX_CLIENTS + 1, 1, 1, NULL, &p, &err) < 0);
    assert_non_null(strstr(err.text, "at most 48 clients"));
    assert_true(gs_policy_plan_compute(&c, 60, 1, 1, NULL, &p, &err) < 0);
    /* 60 ranks over 2 GPUs is 30 each: fine. */
    assert_int_equal(gs_policy_plan_compute(&c, 60, 2, 1, NULL, &p, &err), 0);
    assert_true(p.use_mps);
    /* --mps=off never hits the limit. */
    c.mps = GS_MPS_OFF;
    assert_int_equal(gs_policy_plan_compute(&c, 60, 1, 1, NULL, &p, &err), 0);
    assert_false(p.use_mps);
}

static void test_no_gpu_and_no_control(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_policy_plan_compute(&c, 16, 0, 1, NULL, &p, &err), 0);
    assert_false(p.use_mps);
    assert_true(p.notice);
    assert_non_null(strstr(p.reason, "no NVIDIA GPU"));
    assert_int_equal(gs_policy_plan_compute(&c, 16, 1, 0, "control missing", &p, &err), 0);
    assert_false(p.use_mps);
    assert_non_null(strstr(p.reason, "control missing"));
    assert_true(p.notice);
    /* One rank per GPU needs no MPS under auto: no control program is no
     * news then. */
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 0, "control missing", &p, &err), 0);
    assert_false(p.use_mps);
    assert_false(p.notice);
    assert_null(strstr(p.reason, "control missing"));
    c.mps = GS_MPS_ON;
    assert_true(gs_policy_plan_compute(&c, 16, 0, 1, NULL, &p, &err) < 0);
    assert_non_null(strstr(err.text, "--mps=on"));
    assert_true(gs_policy_plan_compute(&c, 16, 1, 0, "control missing", &p, &err) < 0);
    assert_non_null(strstr(err.text, "control missing"));
}

static void test_bad_input(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    assert_true(gs_policy_plan_compute(&c, 0, 1, 1, NULL, &p, NULL) < 0);
    assert_true(gs_policy_plan_compute(&c, 4, -1, 1, NULL, &p, NULL) < 0);
}

/* Slurm's gres/mps: the job keeps the site's MPS and Slurm's share. */
static void test_site_mps(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    gs_error_t err;
    (void)state;
    snprintf(c.site_mps, sizeof(c.site_mps), "%s", "25");
    assert_int_equal(gs_policy_plan_compute(&c, 4, 1, 1, NULL, &p, &err), 0);
    assert_false(p.use_mps);
    assert_true(p.notice);
    assert_non_null(strstr(p.reason, "gres/mps"));
    assert_non_null(strstr(p.reason, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"));
    c.mps = GS_MPS_ON;
    assert_true(gs_policy_plan_compute(&c, 4, 1, 1, NULL, &p, &err) < 0);
    assert_non_null(strstr(err.text, "starts no second one"));
    c.mps = GS_MPS_OFF; /* off says so first */
    assert_int_equal(gs_policy_plan_compute(&c, 4, 1, 1, NULL, &p, &err), 0);
    assert_false(p.notice);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_percentage), cmocka_unit_test(test_format),
        cmocka_unit_test(test_one_gpu_shares),     cmocka_unit_test(test_single_rank_auto_is_off),
        cmocka_unit_test(test_uneven_blocks),      cmocka_unit_test(test_fixed_and_off_percentage),
        cmocka_unit_test(test_client_limit),       cmocka_unit_test(test_no_gpu_and_no_control),
        cmocka_unit_test(test_bad_input),          cmocka_unit_test(test_site_mps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
