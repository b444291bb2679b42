/* SPDX-License-Identifier: BSD-3-Clause */
/* Whose processes run on a GPU: the user's gsrun ranks and MPS servers are
 * the placement record's to count; anything else is foreign load. Uses a
 * made-up /proc. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/gpu/usage.h"

static char root[64];

static void proc(int pid, const char *comm, const char *environ_text, size_t env_len)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%d", root, pid);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/%d/comm", root, pid);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", comm);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%d/environ", root, pid);
    f = fopen(path, "w");
    assert_non_null(f);
    fwrite(environ_text, 1, env_len, f);
    fclose(f);
}

static void test_whose(void **state)
{
    static const char rank_env[] = "PATH=/bin\0GSRUN_GPU_UUID=GPU-aaaa\0HOME=/root\0";
    static const char plain_env[] = "PATH=/bin\0XGSRUN_GPU_UUID=no\0";
    char big[40000];
    gs_gpu_t g;
    (void)state;
    snprintf(root, sizeof(root), "/tmp/gsproc.XXXXXX");
    assert_non_null(mkdtemp(root));
    proc(100, "lmp", rank_env, sizeof(rank_env) - 1);        /* a rank of gsrun's */
    proc(101, "nvidia-cuda-mps-server", "", 0);                /* the user's server */
    proc(102, "python3", plain_env, sizeof(plain_env) - 1); /* the user's, outside gsrun */
    /* The mark past the first read of the environment. */
    memset(big, 'x', sizeof(big));
    for (size_t i = 99; i < sizeof(big); i += 100) {
        big[i] = '\0';
    }
    memcpy(big + 30000, "GSRUN_GPU_UUID=GPU-b", 20);
    proc(103, "app", big, sizeof(big));
    memset(&g, 0, sizeof(g));
    g.nprocs = 5;
    g.procs[0] = 100;
    g.procs[1] = 101;
    g.procs[2] = 102;
    g.procs[3] = 103;
    g.procs[4] = 104; /* not in this PID namespace */
    assert_int_equal(gs_usage_foreign(&g, getuid(), root), 2);
    /* Another user's processes count, whatever they are. */
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root), 5);
    /* Nothing listed, but memory in use: something NVML does not show here. */
    g.nprocs = 0;
    g.used_mib = GS_USAGE_BUSY_MIB + 1;
    assert_int_equal(gs_usage_foreign(&g, getuid(), root), 1);
    g.used_mib = 600; /* an idle GPU's reserve */
    assert_int_equal(gs_usage_foreign(&g, getuid(), root), 0);
    /* More than NVML's list was asked for: the rest count. */
    g.nprocs = GS_GPU_PROCS_MAX + 3;
    for (int i = 0; i < GS_GPU_PROCS_MAX; i++) {
        g.procs[i] = 100;
    }
    assert_int_equal(gs_usage_foreign(&g, getuid(), root), 3);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
