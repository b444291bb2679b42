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

static void file(int pid, const char *name, const char *text, size_t len)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%d/%s", root, pid, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(text, 1, len, f);
    fclose(f);
}

/* An MPS server (pid), its control daemon (pid + 1) and the gsrun agent
 * that started them (pid + 2, its command line cmd). */
static void chain(int pid, const char *cmd, size_t len)
{
    char stat[64];
    proc(pid + 2, "gsrun-agent", "", 0);
    file(pid + 2, "cmdline", cmd, len);
    for (int p = pid + 1; p >= pid; p--) {
        proc(p, "nvidia-cuda-mps", "", 0);
        int n = snprintf(stat, sizeof(stat), "%d (nvidia-cuda-mps) S %d 1 1", p, p + 1);
        file(p, "stat", stat, (size_t)n);
    }
}

/* The user's gsrun jobs with another TMPDIR (another placement record):
 * their MPS servers (found through the agent that started them) and ranks
 * count as load; those of jobs in this TMPDIR do not. */
static void test_other_tmpdir(void **state)
{
    static const char here_agent[] = "/usr/lib/gsrun/gsrun-agent\0--job-dir\0/tmp/t1/gsrun-0/mps-share\0";
    static const char there_agent[] = "/usr/lib/gsrun/gsrun-agent\0--job-dir\0/scratch/pbs.7/gsrun.Ab\0";
    static const char here_rank[] = "GSRUN_GPU_UUID=GPU-a\0CUDA_MPS_PIPE_DIRECTORY=/tmp/t1/gsrun.Cd/n/g0\0";
    static const char there_rank[] = "GSRUN_GPU_UUID=GPU-a\0CUDA_MPS_PIPE_DIRECTORY=/scratch/pbs.7/gsrun.Ab/n/g0\0";
    gs_gpu_t g;
    (void)state;
    snprintf(root, sizeof(root), "/tmp/gsproc.XXXXXX");
    assert_non_null(mkdtemp(root));
    /* server 200 <- control 201 <- agent 202 (here); 300 <- 301 <- 302 (there) */
    chain(200, here_agent, sizeof(here_agent) - 1);
    chain(300, there_agent, sizeof(there_agent) - 1);
    proc(400, "app", here_rank, sizeof(here_rank) - 1);
    proc(401, "app", there_rank, sizeof(there_rank) - 1);
    memset(&g, 0, sizeof(g));
    g.nprocs = 4;
    g.procs[0] = 200;
    g.procs[1] = 300;
    g.procs[2] = 400;
    g.procs[3] = 401;
    /* On an exclusive GPU (where a server holds the GPU) the other job's
     * server counts beside its rank. */
    g.exclusive = 1;
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, "/tmp/t1"), 2);
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, "/tmp/t1/"), 2);
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, "/scratch/pbs.7"), 2);
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, NULL), 0);
    /* A prefix of a dir's name is not the dir: /tmp/t is not /tmp/t1. */
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, "/tmp/t"), 4);
    /* In the Default mode a server is no load: its clients (listed) are. */
    g.exclusive = 0;
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, "/tmp/t1"), 1);
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, "/scratch/pbs.7"), 1);
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, "/tmp/t"), 2);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
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
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, NULL), 2);
    /* Another user's processes count, whatever they are, but for an MPS
     * server in the Default compute mode (an idle one lingering is no
     * load); on an exclusive GPU it holds the GPU and counts too. */
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root, NULL), 4);
    g.exclusive = 1;
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root, NULL), 5);
    g.exclusive = 0;
    /* Only a server listed: no load in the Default mode, whoever runs it. */
    g.nprocs = 1;
    g.procs[0] = 101;
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root, NULL), 0);
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, NULL), 0);
    /* The name proves nothing: another user's process named as a server
     * that holds a context's memory (a program renamed) is load, and so is
     * one whose memory NVML cannot tell; the user's own is the record's. */
    g.procs_mib[0] = 66;
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root, NULL), 0);
    g.procs_mib[0] = GS_USAGE_SERVER_MIB;
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root, NULL), 0);
    g.procs_mib[0] = 646;
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root, NULL), 1);
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, NULL), 0);
    g.procs_mib[0] = GS_GPU_MIB_UNKNOWN;
    assert_int_equal(gs_usage_foreign(&g, getuid() + 1, root, NULL), 1);
    g.procs_mib[0] = 0;
    /* Nothing listed, but memory in use: something NVML does not show here. */
    g.nprocs = 0;
    g.used_mib = GS_USAGE_BUSY_MIB + 1;
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, NULL), 1);
    g.used_mib = 600; /* an idle GPU's reserve */
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, NULL), 0);
    /* More than NVML's list was asked for: the rest count. */
    g.nprocs = GS_GPU_PROCS_MAX + 3;
    for (int i = 0; i < GS_GPU_PROCS_MAX; i++) {
        g.procs[i] = 100;
    }
    assert_int_equal(gs_usage_foreign(&g, getuid(), root, NULL), 3);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whose),
        cmocka_unit_test(test_other_tmpdir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
