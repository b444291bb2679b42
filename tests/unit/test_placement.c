/* SPDX-License-Identifier: BSD-3-Clause */
/* Placement tables: which GPU each local rank gets, from the ranks' cores
 * and the GPUs' (4 GPUs on 2 NUMA nodes, as the fake NVML describes them). */
#define _GNU_SOURCE /* CPU_COUNT */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runtime/gpu/affinity.h"
#include "runtime/plan/placement.h"

/* 4 GPUs: 0 and 1 near CPUs 0-7 (NUMA 0), 2 and 3 near CPUs 8-15. */
static void four_gpus(gs_gpu_t *g)
{
    memset(g, 0, 4 * sizeof(*g));
    for (int i = 0; i < 4; i++) {
        g[i].have_cpumask = 1;
        g[i].cpumask[0] = i < 2 ? 0x00ffUL : 0xff00UL;
    }
}

/* Places n ranks whose CPU lists are given, with the given targets. */
static void place(const char *const *cpus, int n, const int *targets, int *out)
{
    gs_gpu_t g[4];
    unsigned char near[64 * 4];
    four_gpus(g);
    for (int r = 0; r < n; r++) {
        cpu_set_t set;
        assert_int_equal(gs_affinity_cpuset_parse(cpus[r], &set), 0);
        gs_placement_near(&set, g, 4, near + r * 4);
    }
    gs_placement_ranks(n, 4, targets, near, out);
}

static void expect(const int *got, const int *want, int n)
{
    for (int r = 0; r < n; r++) {
        if (got[r] != want[r]) {
            fail_msg("rank %d: GPU %d, expected %d", r, got[r], want[r]);
        }
    }
}

static void test_unbound_is_blocks(void **state)
{
    static const char *const all[8] = {"0-15", "0-15", "0-15", "0-15",
                                       "0-15", "0-15", "0-15", "0-15"};
    int t[4] = {2, 2, 2, 2}, got[8], want[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    (void)state;
    place(all, 8, t, got);
    expect(got, want, 8);
}

/* mpirun --map-by socket (Open MPI 4's default above 2 ranks): ranks
 * alternate NUMA nodes; blocks would put half of them on a far GPU. */
static void test_map_by_socket(void **state)
{
    static const char *const cpus[8] = {"0-7", "8-15", "0-7", "8-15",
                                        "0-7", "8-15", "0-7", "8-15"};
    int t[4] = {2, 2, 2, 2}, got[8], want[8] = {0, 2, 0, 2, 1, 3, 1, 3};
    (void)state;
    place(cpus, 8, t, got);
    expect(got, want, 8);
}

/* --bind-to core, --map-by core: consecutive cores, blocks per NUMA node. */
static void test_bind_to_core(void **state)
{
    static const char *const cpus[8] = {"0", "2", "4", "6", "8", "10", "12", "14"};
    int t[4] = {2, 2, 2, 2}, got[8], want[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    (void)state;
    place(cpus, 8, t, got);
    expect(got, want, 8);
}

/* Uneven: 17 ranks on 4 GPUs take 4, 4, 4, 5 (the plan's blocks), and
 * placement never changes those counts, so every GPU's share holds. */
static void test_uneven_counts_hold(void **state)
{
    static const char *cpus[17];
    int t[4] = {4, 4, 4, 5}, got[17], load[4] = {0};
    (void)state;
    for (int r = 0; r < 17; r++) {
        cpus[r] = "0-7"; /* all on NUMA 0: GPUs 2 and 3 still take their share */
    }
    place(cpus, 17, t, got);
    for (int r = 0; r < 17; r++) {
        assert_in_range(got[r], 0, 3);
        load[got[r]]++;
    }
    assert_int_equal(load[0], 4);
    assert_int_equal(load[1], 4);
    assert_int_equal(load[2], 4);
    assert_int_equal(load[3], 5);
    assert_int_equal(got[0], 0);
    assert_int_equal(got[8], 2); /* near GPUs full: the first GPU with room */
}

/* Fewer ranks than GPUs, one each: the GPUs near the ranks. */
static void test_fewer_ranks_than_gpus(void **state)
{
    static const char *const cpus[2] = {"8", "9"};
    int t[4] = {1, 1, 1, 1}, got[2], want[2] = {2, 3};
    (void)state;
    place(cpus, 2, t, got);
    expect(got, want, 2);
}

static void test_near_and_locality(void **state)
{
    gs_gpu_t g[4];
    unsigned char near[4];
    cpu_set_t set;
    (void)state;
    four_gpus(g);
    assert_true(gs_placement_by_locality(g, 4));
    assert_false(gs_placement_by_locality(g, 2)); /* same masks: blocks it is */
    assert_false(gs_placement_by_locality(g, 1));
    gs_affinity_cpuset_parse("7-8", &set);
    gs_placement_near(&set, g, 4, near);
    assert_memory_equal(near, ((unsigned char[]){1, 1, 1, 1}), 4);
    gs_affinity_cpuset_parse("20", &set); /* touches no GPU: near all */
    gs_placement_near(&set, g, 4, near);
    assert_memory_equal(near, ((unsigned char[]){1, 1, 1, 1}), 4);
    gs_placement_near(NULL, g, 4, near);
    assert_memory_equal(near, ((unsigned char[]){1, 1, 1, 1}), 4);
    g[3].have_cpumask = 0;
    assert_false(gs_placement_by_locality(g, 4));
}

static void test_cpuset_text(void **state)
{
    cpu_set_t set;
    char buf[64];
    (void)state;
    assert_int_equal(gs_affinity_cpuset_parse("0-3,8,10-11", &set), 0);
    assert_int_equal(CPU_COUNT(&set), 7);
    gs_affinity_cpuset_format(&set, buf, sizeof(buf));
    assert_string_equal(buf, "0-3,8,10-11");
    assert_int_equal(gs_affinity_cpuset_parse("", &set), 0);
    assert_int_equal(CPU_COUNT(&set), 0);
    assert_int_equal(gs_affinity_cpuset_parse("3-1", &set), -EINVAL);
    assert_int_equal(gs_affinity_cpuset_parse("a", &set), -EINVAL);
    assert_int_equal(gs_affinity_cpuset_parse("1,,2", &set), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbound_is_blocks),  cmocka_unit_test(test_map_by_socket),
        cmocka_unit_test(test_bind_to_core),       cmocka_unit_test(test_uneven_counts_hold),
        cmocka_unit_test(test_fewer_ranks_than_gpus), cmocka_unit_test(test_near_and_locality),
        cmocka_unit_test(test_cpuset_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
