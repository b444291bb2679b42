/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's placer alone: ranks come one by one with their CPUs, each
 * gets a GPU now or after every rank came (by locality), late ranks fill
 * the GPUs with room. 4 GPUs: 0 and 1 near CPUs 0-7, 2 and 3 near 8-15. */
#define _GNU_SOURCE /* CPU_COUNT */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "runtime/gpu/affinity.h"
#include "runtime/job/placer.h"

static gs_gpu_t numa[4], same[4];

static int setup(void **state)
{
    (void)state;
    memset(numa, 0, sizeof(numa));
    memset(same, 0, sizeof(same));
    for (int i = 0; i < 4; i++) {
        numa[i].have_cpumask = same[i].have_cpumask = 1;
        numa[i].cpumask[0] = i < 2 ? 0x00ffUL : 0xff00UL;
        same[i].cpumask[0] = 0xffffUL;
    }
    return 0;
}

static int add(gs_placer_t *p, int rank, const char *cpus)
{
    cpu_set_t set;
    if (cpus == NULL) {
        return gs_placer_add(p, rank, NULL);
    }
    assert_int_equal(gs_affinity_cpuset_parse(cpus, &set), 0);
    return gs_placer_add(p, rank, &set);
}

static void test_blocks(void **state)
{
    int t[4];
    (void)state;
    gs_placer_blocks(8, 4, t);
    assert_int_equal(t[0] + t[1] + t[2] + t[3], 8);
    assert_int_equal(t[0], 2);
    gs_placer_blocks(5, 2, t);
    assert_int_equal(t[0], 2);
    assert_int_equal(t[1], 3);
    gs_placer_blocks(2, 4, t); /* fewer ranks than GPUs: any GPU may take one */
    for (int g = 0; g < 4; g++) {
        assert_int_equal(t[g], 1);
    }
}

static void test_no_gpu(void **state)
{
    gs_placer_t p;
    (void)state;
    assert_int_equal(gs_placer_init(&p, 3, 0, NULL, NULL, 0, 0), 0);
    assert_int_equal(add(&p, 0, "0-3"), -1);
    assert_false(gs_placer_pending(&p));
    assert_int_equal(gs_placer_gpu(&p, 1), -1);
    gs_placer_free(&p);
}

/* The same CPU mask on every GPU: locality cannot differ from blocks, so
 * every rank is answered at once, in any registration order. */
static void test_no_locality_answers_at_once(void **state)
{
    gs_placer_t p;
    int t[4] = {2, 2, 2, 2}, order[8] = {7, 0, 3, 5, 1, 6, 2, 4};
    char text[64];
    (void)state;
    assert_int_equal(gs_placer_init(&p, 8, 4, t, same, 0, 0), 0);
    assert_false(p.by_locality);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(add(&p, order[i], "0-3"), order[i] / 2);
    }
    gs_placer_ranks_text(&p, 1, text, sizeof(text));
    assert_string_equal(text, "2-3");
    gs_placer_free(&p);
}

/* Ranks alternate NUMA nodes (mpirun --map-by socket): answers wait for
 * every rank, then each rank is near its GPU. */
static void test_by_locality_waits_then_near(void **state)
{
    static const char *const cpus[8] = {"0", "8", "1", "9", "2", "10", "3", "11"};
    gs_placer_t p;
    int t[4] = {2, 2, 2, 2}, m = 0;
    char text[64];
    (void)state;
    assert_int_equal(gs_placer_init(&p, 8, 4, t, numa, 0, 0), 0);
    assert_true(p.by_locality);
    for (int r = 0; r < 8; r++) {
        assert_int_equal(add(&p, r, cpus[r]), GS_PLACER_WAIT);
    }
    assert_true(gs_placer_pending(&p));
    assert_int_equal(gs_placer_flush(&p, &m), 8);
    assert_int_equal(m, 8);
    assert_false(gs_placer_pending(&p));
    for (int r = 0; r < 8; r++) {
        int g = gs_placer_gpu(&p, r);
        assert_true(r % 2 == 0 ? g < 2 : g >= 2);
    }
    gs_placer_ranks_text(&p, 0, text, sizeof(text));
    assert_string_equal(text, "0,2");
    assert_int_equal(gs_placer_flush(&p, &m), -1); /* once */
    gs_placer_free(&p);
}

/* A launcher that starts each rank after the one before has exec'd would
 * deadlock on held answers: blocks, at once. */
static void test_in_sequence_never_waits(void **state)
{
    gs_placer_t p;
    int t[4] = {1, 1, 1, 1};
    (void)state;
    assert_int_equal(gs_placer_init(&p, 4, 4, t, numa, 1, 0), 0);
    assert_false(p.by_locality);
    assert_int_equal(add(&p, 0, "8"), 0);
    assert_int_equal(add(&p, 3, "0"), 3);
    gs_placer_free(&p);
}

/* The deadline passed with 3 of 4 ranks: those are placed by locality, the
 * late one takes the first GPU with room, and its answer comes at once. */
static void test_late_rank_after_deadline(void **state)
{
    gs_placer_t p;
    int t[2] = {2, 2}, m = 0;
    gs_gpu_t two[2] = {numa[0], numa[2]};
    (void)state;
    assert_int_equal(gs_placer_init(&p, 4, 2, t, two, 0, 0), 0);
    assert_int_equal(add(&p, 0, "8"), GS_PLACER_WAIT);
    assert_int_equal(add(&p, 1, "9"), GS_PLACER_WAIT);
    assert_int_equal(add(&p, 2, "0"), GS_PLACER_WAIT);
    assert_int_equal(gs_placer_flush(&p, &m), 3);
    assert_int_equal(m, 3);
    assert_int_equal(gs_placer_gpu(&p, 0), 1);
    assert_int_equal(gs_placer_gpu(&p, 1), 1);
    assert_int_equal(gs_placer_gpu(&p, 2), 0);
    assert_int_equal(gs_placer_gpu(&p, 3), 0); /* not come yet: the GPU with room */
    assert_int_equal(add(&p, 3, "12"), 0);     /* near GPU 1, but GPU 1 is full */
    gs_placer_free(&p);
}

/* Ranks without CPUs (unknown) count as near every GPU: blocks. */
static void test_unknown_cpus_fill_in_blocks(void **state)
{
    gs_placer_t p;
    int t[4] = {1, 1, 1, 1}, m = 0;
    (void)state;
    assert_int_equal(gs_placer_init(&p, 4, 4, t, numa, 0, 0), 0);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(add(&p, r, NULL), GS_PLACER_WAIT);
    }
    assert_int_equal(gs_placer_flush(&p, &m), 4); /* near every GPU */
    assert_int_equal(m, 4);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(gs_placer_gpu(&p, r), r);
    }
    gs_placer_free(&p);
}

static void test_bound_cpus(void **state)
{
    gs_placer_t p;
    int t[1] = {3};
    cpu_set_t out;
    (void)state;
    assert_int_equal(gs_placer_init(&p, 3, 1, t, numa, 0, 0), 0);
    add(&p, 0, "0-15"); /* every online CPU: not bound */
    add(&p, 1, "2");
    add(&p, 2, "5-6");
    assert_int_equal(gs_placer_bound_cpus(&p, 16, &out), 3);
    assert_true(CPU_ISSET(2, &out) && CPU_ISSET(5, &out) && CPU_ISSET(6, &out));
    assert_false(CPU_ISSET(0, &out));
    gs_placer_free(&p);
}

static void test_out_of_range(void **state)
{
    gs_placer_t p;
    int t[1] = {2};
    (void)state;
    assert_int_equal(gs_placer_init(&p, 2, 1, t, numa, 0, 0), 0);
    assert_int_equal(add(&p, 2, "0"), -1);
    assert_int_equal(add(&p, -1, "0"), -1);
    assert_int_equal(gs_placer_gpu(&p, 5), -1);
    gs_placer_free(&p);
}

/* Several MPS servers per GPU: the plan's entries are server-major (GPU 0
 * server 0, GPU 1 server 0, GPU 0 server 1, GPU 1 server 1), and each
 * server's block is where the plan says, not the entries' order. */
static void test_server_blocks(void **state)
{
    gs_placer_t p;
    int target[4] = {25, 25, 25, 25}, first[4] = {0, 50, 25, 75};
    gs_gpu_t gpus[4];
    (void)state;
    memcpy(gpus, same, sizeof(gpus));
    assert_int_equal(gs_placer_init(&p, 100, 4, target, gpus, 0, 0), 0);
    gs_placer_set_blocks(&p, first);
    for (int r = 99; r >= 0; r--) { /* any order */
        int want = r < 25 ? 0 : r < 50 ? 2 : r < 75 ? 1 : 3;
        assert_int_equal(add(&p, r, "0-3"), want);
    }
    char text[64];
    gs_placer_ranks_text(&p, 2, text, sizeof(text));
    assert_string_equal(text, "25-49");
    gs_placer_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_blocks),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_no_gpu),
        cmocka_unit_test(test_no_locality_answers_at_once),
        cmocka_unit_test(test_by_locality_waits_then_near),
        cmocka_unit_test(test_in_sequence_never_waits),
        cmocka_unit_test(test_late_rank_after_deadline),
        cmocka_unit_test(test_unknown_cpus_fill_in_blocks),
        cmocka_unit_test(test_bound_cpus),
        cmocka_unit_test(test_out_of_range),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
