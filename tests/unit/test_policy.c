/* SPDX-License-Identifier: BSD-3-Clause */
/* Policy: thread percentages, block placement, the client limit, and when
 * MPS is on, off or refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>

#include "runtime/plan/policy.h"

/* mps=auto with a job's own servers (--mps-share=job): what most tables
 * here are about; the default's sharing is test_shared_single_rank's. */
static gs_config_t cfg_auto(void)
{
    gs_config_t c;
    gs_config_init(&c);
    c.share_auto = 0;
    c.share_node = 0;
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
        assert_int_equal(gs_policy_plan_compute(&c, ns[i], 1, 1, NULL, 48, &p, NULL), 0);
        assert_true(p.use_mps);
        assert_int_equal(p.nservers, 1);
        assert_int_equal(p.server[0].first_rank, 0);
        assert_int_equal(p.server[0].nranks, ns[i]);
        assert_true(p.server[0].pct_set);
        assert_true(fabs(p.server[0].pct - gs_policy_default_percentage(ns[i])) < 1e-9);
    }
}

static void test_single_rank_auto_is_off(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 1, NULL, 48, &p, NULL), 0);
    assert_false(p.use_mps);
    assert_false(p.notice);
    /* Forced on, one rank gets MPS at 100 %. */
    c.mps = GS_MPS_ON;
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 1, NULL, 48, &p, NULL), 0);
    assert_true(p.use_mps);
    assert_true(fabs(p.server[0].pct - 100.0) < 1e-9);
}

/* With the user's shared servers a rank alone on its GPU is their client
 * too: the user's next job may land beside it. */
static void test_shared_single_rank(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    c.share_node = 1;
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 1, NULL, 48, &p, NULL), 0);
    assert_true(p.use_mps);
    assert_true(fabs(p.server[0].pct - 100.0) < 1e-9);
    assert_int_equal(gs_policy_plan_compute(&c, 2, 4, 1, NULL, 48, &p, NULL), 0);
    assert_true(p.use_mps);
    assert_int_equal(p.nused, 2);
    /* No control program: off under auto, as without sharing. */
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 0, "none", 48, &p, NULL), 0);
    assert_false(p.use_mps);
}

/* The packing's counts: a prefix of the GPUs, blocks in that order. */
static void test_packed_counts(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    gs_error_t err;
    int counts[4] = {6, 2, 0, 0}, bad[2] = {3, 3};
    (void)state;
    assert_int_equal(gs_policy_plan_packed(&c, 8, 4, counts, 1, NULL, 48, &p, &err), 0);
    assert_true(p.use_mps);
    assert_int_equal(p.nused, 2);
    assert_int_equal(p.nservers, 2);
    assert_int_equal(p.server[0].first_rank, 0);
    assert_int_equal(p.server[0].nranks, 6);
    assert_int_equal(p.server[1].first_rank, 6);
    assert_int_equal(p.server[1].nranks, 2);
    assert_true(fabs(p.server[0].pct - 200.0 / 6) < 1e-9);
    /* Past the client limit the GPU's block is dealt over its servers. */
    assert_int_equal(gs_policy_plan_packed(&c, 8, 4, counts, 1, NULL, 4, &p, &err), 0);
    assert_int_equal(p.nservers, 3);
    assert_int_equal(p.server[2].gpu, 0);
    assert_int_equal(p.server[0].nranks + p.server[2].nranks, 6);
    /* Counts that do not add up to the ranks: refused. */
    assert_int_equal(gs_policy_plan_packed(&c, 5, 2, bad, 1, NULL, 48, &p, &err), -EINVAL);
}

static void test_uneven_blocks(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    /* 5 ranks on 2 GPUs: 0-1 and 2-4 (blocks differ by at most one). */
    assert_int_equal(gs_policy_plan_compute(&c, 5, 2, 1, NULL, 48, &p, NULL), 0);
    assert_true(p.use_mps);
    assert_int_equal(p.nservers, 2);
    assert_int_equal(p.server[0].first_rank, 0);
    assert_int_equal(p.server[0].nranks, 2);
    assert_int_equal(p.server[1].first_rank, 2);
    assert_int_equal(p.server[1].nranks, 3);
    assert_true(fabs(p.server[0].pct - 100.0) < 1e-9);
    assert_true(fabs(p.server[1].pct - 200.0 / 3) < 1e-9);
    for (int r = 0; r < 5; r++) {
        assert_int_equal(gs_policy_plan_server_of_rank(&p, r), r < 2 ? 0 : 1);
    }
    assert_int_equal(gs_policy_plan_server_of_rank(&p, 5), -1);
    /* 16 ranks on 3 GPUs: 5, 5, 6 */
    assert_int_equal(gs_policy_plan_compute(&c, 16, 3, 1, NULL, 48, &p, NULL), 0);
    assert_int_equal(p.server[0].nranks + p.server[1].nranks + p.server[2].nranks, 16);
    assert_int_equal(p.server[0].nranks, 5);
    assert_int_equal(p.server[2].nranks, 6);
    /* Fewer ranks than GPUs: one each, MPS not needed under auto. */
    assert_int_equal(gs_policy_plan_compute(&c, 3, 4, 1, NULL, 48, &p, NULL), 0);
    assert_false(p.use_mps);
    assert_int_equal(p.nservers, 3);
}

static void test_fixed_and_off_percentage(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    c.pct_mode = GS_PCT_FIXED;
    c.pct = 25;
    assert_int_equal(gs_policy_plan_compute(&c, 16, 1, 1, NULL, 48, &p, NULL), 0);
    assert_true(p.server[0].pct_set);
    assert_true(fabs(p.server[0].pct - 25) < 1e-9);
    c.pct_mode = GS_PCT_OFF;
    assert_int_equal(gs_policy_plan_compute(&c, 16, 1, 1, NULL, 48, &p, NULL), 0);
    assert_false(p.server[0].pct_set);
}

static void test_clients_per_server(void **state)
{
    (void)state;
    /* The driver's CUDA version sets the limit: 48 up to 13.0, 60 from 13.1. */
    assert_int_equal(gs_policy_clients_per_server(0, 12040), 48);
    assert_int_equal(gs_policy_clients_per_server(0, 13000), 48);
    assert_int_equal(gs_policy_clients_per_server(0, 13010), 60);
    assert_int_equal(gs_policy_clients_per_server(0, 14000), 60);
    assert_int_equal(gs_policy_clients_per_server(0, 0), 48); /* unknown: the smaller */
    /* The setting wins either way. */
    assert_int_equal(gs_policy_clients_per_server(32, 13010), 32);
    assert_int_equal(gs_policy_clients_per_server(60, 13000), 60);
}

/* Checks a plan's servers: every rank served exactly once, no server over
 * the limit, a GPU's servers differing by at most one, entries
 * server-major (every GPU's first server first), each GPU's ranks one
 * block in server order. */
static void check_servers(const gs_plan_t *p, int size, int limit)
{
    int seen[1024] = {0}, lo[GS_MAX_GPUS], hi[GS_MAX_GPUS], count[GS_MAX_GPUS] = {0};
    for (int g = 0; g < GS_MAX_GPUS; g++) {
        lo[g] = 1 << 30;
        hi[g] = 0;
    }
    for (int i = 0; i < p->nservers; i++) {
        const gs_server_share_t *s = &p->server[i];
        assert_true(s->nranks >= 1 && s->nranks <= limit);
        assert_true(s->gpu >= 0 && s->gpu < p->nused);
        assert_true(s->server >= 0 && s->server < s->gpu_servers);
        if (i < p->nused) {
            assert_int_equal(s->gpu, i);
            assert_int_equal(s->server, 0);
        }
        if (i > 0) {
            assert_true(s->server >= p->server[i - 1].server); /* server-major */
        }
        for (int r = s->first_rank; r < s->first_rank + s->nranks; r++) {
            assert_true(r >= 0 && r < size);
            seen[r]++;
        }
        lo[s->gpu] = s->nranks < lo[s->gpu] ? s->nranks : lo[s->gpu];
        hi[s->gpu] = s->nranks > hi[s->gpu] ? s->nranks : hi[s->gpu];
        count[s->gpu]++;
        assert_int_equal(s->gpu_servers, (s->gpu_ranks + limit - 1) / limit);
        /* Server k of a GPU follows server k-1 in rank order. */
        for (int j = 0; j < i; j++) {
            const gs_server_share_t *o = &p->server[j];
            if (o->gpu == s->gpu && o->server == s->server - 1) {
                assert_int_equal(o->first_rank + o->nranks, s->first_rank);
            }
        }
    }
    for (int r = 0; r < size; r++) {
        assert_int_equal(seen[r], 1);
    }
    for (int g = 0; g < p->nused; g++) {
        assert_true(hi[g] - lo[g] <= 1);
        assert_int_equal(count[g], p->server[g].gpu_servers);
    }
}

static void test_servers_per_gpu(void **state)
{
    static const struct {
        int size, ngpus, limit, servers;
    } cases[] = {
        {48, 1, 48, 1},  {49, 1, 48, 2},   {60, 1, 48, 2},  {96, 1, 48, 2},   {97, 1, 48, 3},
        {100, 1, 48, 3}, {128, 1, 48, 3},  {60, 1, 60, 1},  {61, 1, 60, 2},   {100, 2, 48, 4},
        {97, 2, 48, 3},  {200, 4, 48, 8},  {193, 4, 48, 5}, {500, 7, 48, 14}, {16, 1, 4, 4},
        {17, 3, 4, 6},   {1000, 16, 48, 32}, {7, 7, 1, 7},  {64, 1, 1, 64},   {3, 1, 1, 3},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gs_config_t c = cfg_auto();
        gs_plan_t p;
        gs_error_t err;
        c.mps = GS_MPS_ON;
        assert_int_equal(gs_policy_plan_compute(&c, cases[i].size, cases[i].ngpus, 1, NULL,
                                                cases[i].limit, &p, &err),
                         0);
        assert_true(p.use_mps);
        assert_int_equal(p.nservers, cases[i].servers);
        assert_int_equal(p.clients_per_server, cases[i].limit);
        check_servers(&p, cases[i].size, cases[i].limit);
    }
}

static void test_servers_layout(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    gs_error_t err;
    (void)state;
    /* 100 ranks, one GPU: three servers of 34, 33, 33, each its own share. */
    assert_int_equal(gs_policy_plan_compute(&c, 100, 1, 1, NULL, 48, &p, &err), 0);
    assert_true(p.use_mps);
    assert_int_equal(p.nservers, 3);
    assert_int_equal(p.nused, 1);
    assert_int_equal(p.server[0].first_rank, 0);
    assert_int_equal(p.server[0].nranks, 33);
    assert_int_equal(p.server[1].first_rank, 33);
    assert_int_equal(p.server[1].nranks, 33);
    assert_int_equal(p.server[2].first_rank, 66);
    assert_int_equal(p.server[2].nranks, 34);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(p.server[i].gpu, 0);
        assert_int_equal(p.server[i].server, i);
        assert_int_equal(p.server[i].gpu_ranks, 100);
        assert_true(p.server[i].pct_set);
    }
    /* Uneven GPUs: 97 ranks over 2 GPUs are 48 and 49; only the second
     * needs two servers, listed after both first servers. */
    assert_int_equal(gs_policy_plan_compute(&c, 97, 2, 1, NULL, 48, &p, &err), 0);
    assert_int_equal(p.nservers, 3);
    assert_int_equal(p.server[0].gpu, 0);
    assert_int_equal(p.server[0].nranks, 48);
    assert_int_equal(p.server[0].gpu_servers, 1);
    assert_int_equal(p.server[1].gpu, 1);
    assert_int_equal(p.server[1].first_rank, 48);
    assert_int_equal(p.server[1].nranks, 24);
    assert_int_equal(p.server[2].gpu, 1);
    assert_int_equal(p.server[2].server, 1);
    assert_int_equal(p.server[2].first_rank, 72);
    assert_int_equal(p.server[2].nranks, 25);
    /* auto never gives up MPS for the client limit any more. */
    assert_int_equal(gs_policy_plan_compute(&c, 60, 1, 1, NULL, 48, &p, &err), 0);
    assert_true(p.use_mps);
    assert_false(p.notice);
    /* More servers than a node can have: on refuses, auto runs without. */
    assert_int_equal(gs_policy_plan_compute(&c, GS_MAX_GPUS * 2 + 1, 1, 1, NULL, 2, &p, &err), 0);
    assert_false(p.use_mps);
    assert_true(p.notice);
    assert_non_null(strstr(p.reason, "MPS servers"));
    c.mps = GS_MPS_ON;
    assert_true(gs_policy_plan_compute(&c, GS_MAX_GPUS * 2 + 1, 1, 1, NULL, 2, &p, &err) < 0);
    assert_non_null(strstr(err.text, "start at most 128 ranks per node"));
    /* --mps=off never plans servers. */
    c.mps = GS_MPS_OFF;
    assert_int_equal(gs_policy_plan_compute(&c, 100, 1, 1, NULL, 48, &p, &err), 0);
    assert_false(p.use_mps);
    assert_int_equal(p.nservers, 0);
}

static void test_no_gpu_and_no_control(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_policy_plan_compute(&c, 16, 0, 1, NULL, 48, &p, &err), 0);
    assert_false(p.use_mps);
    assert_true(p.notice);
    assert_non_null(strstr(p.reason, "no NVIDIA GPU"));
    assert_int_equal(gs_policy_plan_compute(&c, 16, 1, 0, "control missing", 48, &p, &err), 0);
    assert_false(p.use_mps);
    assert_non_null(strstr(p.reason, "control missing"));
    assert_true(p.notice);
    /* One rank per GPU needs no MPS under auto: no control program is no
     * news then. */
    assert_int_equal(gs_policy_plan_compute(&c, 1, 1, 0, "control missing", 48, &p, &err), 0);
    assert_false(p.use_mps);
    assert_false(p.notice);
    assert_null(strstr(p.reason, "control missing"));
    c.mps = GS_MPS_ON;
    assert_true(gs_policy_plan_compute(&c, 16, 0, 1, NULL, 48, &p, &err) < 0);
    assert_non_null(strstr(err.text, "--mps=on"));
    assert_true(gs_policy_plan_compute(&c, 16, 1, 0, "control missing", 48, &p, &err) < 0);
    assert_non_null(strstr(err.text, "control missing"));
}

static void test_bad_input(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    (void)state;
    assert_true(gs_policy_plan_compute(&c, 0, 1, 1, NULL, 48, &p, NULL) < 0);
    assert_true(gs_policy_plan_compute(&c, 4, 1, 1, NULL, 0, &p, NULL) < 0);
    assert_true(gs_policy_plan_compute(&c, 4, -1, 1, NULL, 48, &p, NULL) < 0);
}

/* Slurm's gres/mps: the job keeps the site's MPS and Slurm's share. */
static void test_site_mps(void **state)
{
    gs_config_t c = cfg_auto();
    gs_plan_t p;
    gs_error_t err;
    (void)state;
    snprintf(c.site_mps, sizeof(c.site_mps), "%s", "25");
    assert_int_equal(gs_policy_plan_compute(&c, 4, 1, 1, NULL, 48, &p, &err), 0);
    assert_false(p.use_mps);
    assert_true(p.notice);
    assert_non_null(strstr(p.reason, "gres/mps"));
    assert_non_null(strstr(p.reason, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"));
    c.mps = GS_MPS_ON;
    assert_true(gs_policy_plan_compute(&c, 4, 1, 1, NULL, 48, &p, &err) < 0);
    assert_non_null(strstr(err.text, "starts no second one"));
    c.mps = GS_MPS_OFF; /* off says so first */
    assert_int_equal(gs_policy_plan_compute(&c, 4, 1, 1, NULL, 48, &p, &err), 0);
    assert_false(p.notice);
}

static void test_memory_warning(void **state)
{
    char buf[512];
    (void)state;
    /* 100 ranks on an 80 GB H100: 5.4 GB of contexts, no warning. */
    assert_int_equal(gs_policy_memory_warning(0, 100, 81559, buf, sizeof(buf)), 0);
    /* Unknown memory: nothing to say. */
    assert_int_equal(gs_policy_memory_warning(0, 1000, 0, buf, sizeof(buf)), 0);
    /* A 10 GB MIG slice: 166 contexts fit in nine tenths, 167 do not. */
    assert_int_equal(gs_policy_memory_warning(2, 166, 10000, buf, sizeof(buf)), 0);
    assert_int_equal(gs_policy_memory_warning(2, 167, 10000, buf, sizeof(buf)), 1);
    assert_non_null(strstr(buf, "GPU 2: 167 ranks' MPS contexts"));
    assert_non_null(strstr(buf, "of its 10000 MiB"));
    assert_non_null(strstr(buf, "run at most 166 ranks on it"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_percentage), cmocka_unit_test(test_format),
        cmocka_unit_test(test_one_gpu_shares),     cmocka_unit_test(test_single_rank_auto_is_off),
        cmocka_unit_test(test_shared_single_rank), cmocka_unit_test(test_packed_counts),
        cmocka_unit_test(test_uneven_blocks),      cmocka_unit_test(test_fixed_and_off_percentage),
        cmocka_unit_test(test_clients_per_server), cmocka_unit_test(test_memory_warning),
        cmocka_unit_test(test_servers_per_gpu), cmocka_unit_test(test_servers_layout),       cmocka_unit_test(test_no_gpu_and_no_control),
        cmocka_unit_test(test_bad_input),          cmocka_unit_test(test_site_mps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
