/* SPDX-License-Identifier: BSD-3-Clause */
/* Packing tables: a user's jobs started one after another over a node's
 * GPUs (2, 4 and 8), each packed on the load the jobs before it left. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "runtime/plan/pack.h"

/* Packs a job of n ranks on load and adds its ranks to load. */
static void job(int n, int ngpus, int *load, gs_pack_t *pk)
{
    assert_int_equal(gs_pack_compute(n, ngpus, load, pk), 0);
    int sum = 0;
    for (int k = 0; k < pk->nused; k++) {
        assert_true(pk->counts[k] > 0);
        assert_true(k == 0 || pk->counts[k] <= pk->counts[k - 1]); /* a prefix, non-increasing */
        load[pk->order[k]] += pk->counts[k];
        sum += pk->counts[k];
    }
    assert_int_equal(sum, n);
}

static int spread(const int *load, int ngpus)
{
    int lo = load[0], hi = load[0];
    for (int g = 1; g < ngpus; g++) {
        lo = load[g] < lo ? load[g] : lo;
        hi = load[g] > hi ? load[g] : hi;
    }
    return hi - lo;
}

static void test_alone_is_blocks(void **state)
{
    int load[4] = {0};
    gs_pack_t pk;
    (void)state;
    assert_int_equal(gs_pack_compute(6, 4, load, &pk), 0);
    assert_false(pk.loaded);
    assert_int_equal(pk.nused, 4);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(pk.order[k], k);
    }
    /* The plan's own blocks: 1, 2, 1, 2. */
    assert_int_equal(pk.counts[0], 1);
    assert_int_equal(pk.counts[1], 2);
    assert_int_equal(pk.counts[2], 1);
    assert_int_equal(pk.counts[3], 2);
}

/* One-rank jobs one after another: one a GPU before any gets a second. */
static void test_one_rank_jobs_spread(void **state)
{
    static const int sizes[] = {2, 4, 8};
    (void)state;
    for (int i = 0; i < 3; i++) {
        int g = sizes[i], load[8] = {0};
        gs_pack_t pk;
        for (int j = 0; j < 3 * g; j++) {
            job(1, g, load, &pk);
            if (j < g) {
                assert_int_equal(pk.order[0], j); /* the next empty GPU, in order */
            }
            assert_true(spread(load, g) <= 1);
        }
        for (int k = 0; k < g; k++) {
            assert_int_equal(load[k], 3);
        }
    }
}

/* 4 jobs of 3 ranks on 4 GPUs: counts differ by at most one. */
static void test_uneven_jobs_balance(void **state)
{
    int load[4] = {0};
    gs_pack_t pk;
    (void)state;
    for (int j = 0; j < 4; j++) {
        job(3, 4, load, &pk);
        assert_true(spread(load, 4) <= 1);
    }
    for (int g = 0; g < 4; g++) {
        assert_int_equal(load[g], 3);
    }
}

/* Jobs of any size keep the node balanced: 20 jobs of 1 to 7 ranks. */
static void test_many_jobs_never_exceed_balance(void **state)
{
    static const int sizes[] = {1, 7, 3, 2, 5, 1, 1, 4, 6, 2, 3, 3, 1, 7, 2, 5, 4, 1, 2, 6};
    (void)state;
    for (int g = 2; g <= 8; g *= 2) {
        int load[8] = {0}, total = 0;
        gs_pack_t pk;
        for (int j = 0; j < 20; j++) {
            job(sizes[j], g, load, &pk);
            total += sizes[j];
            for (int k = 0; k < g; k++) {
                assert_true(load[k] <= (total + g - 1) / g);
            }
        }
    }
}

/* A GPU busy with another user's process gets the next job's rank last. */
static void test_foreign_process_last(void **state)
{
    int load[4] = {1, 0, 0, 0};
    gs_pack_t pk;
    (void)state;
    for (int j = 0; j < 3; j++) {
        job(1, 4, load, &pk);
        assert_int_equal(pk.order[0], j + 1);
    }
    job(1, 4, load, &pk);
    assert_int_equal(pk.order[0], 0);
}

/* Water filling: 8 ranks where GPU 0 carries 4: 6 on GPU 1, 2 on GPU 0. */
static void test_water_fill(void **state)
{
    int load[2] = {4, 0};
    gs_pack_t pk;
    (void)state;
    assert_int_equal(gs_pack_compute(8, 2, load, &pk), 0);
    assert_true(pk.loaded);
    assert_int_equal(pk.order[0], 1);
    assert_int_equal(pk.counts[0], 6);
    assert_int_equal(pk.order[1], 0);
    assert_int_equal(pk.counts[1], 2);
    assert_int_equal(gs_pack_peak(&pk, load), 6);
    /* A small job stays off the loaded GPU altogether. */
    assert_int_equal(gs_pack_compute(3, 2, load, &pk), 0);
    assert_int_equal(pk.nused, 1);
    assert_int_equal(pk.order[0], 1);
    assert_int_equal(gs_pack_peak(&pk, load), 3);
}

static void test_bad_input(void **state)
{
    int load[2] = {0, -1};
    gs_pack_t pk;
    (void)state;
    assert_int_equal(gs_pack_compute(0, 2, load, &pk), -EINVAL);
    assert_int_equal(gs_pack_compute(1, -1, load, &pk), -EINVAL);
    assert_int_equal(gs_pack_compute(1, 2, NULL, &pk), -EINVAL);
    assert_int_equal(gs_pack_compute(1, 2, load, &pk), -EINVAL);
    assert_int_equal(gs_pack_compute(1, 0, NULL, &pk), 0);
    assert_int_equal(pk.nused, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone_is_blocks),
        cmocka_unit_test(test_one_rank_jobs_spread),
        cmocka_unit_test(test_uneven_jobs_balance),
        cmocka_unit_test(test_many_jobs_never_exceed_balance),
        cmocka_unit_test(test_foreign_process_last),
        cmocka_unit_test(test_water_fill),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
