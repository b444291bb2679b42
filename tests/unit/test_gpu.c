/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU discovery through the fake NVML (loaded by soname, as the real one),
 * and CUDA_VISIBLE_DEVICES filtering. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/gpu/gpu.h"
#include "runtime/plan/policy.h"

static void test_discover(void **state)
{
    gs_gpu_list_t l;
    gs_error_t err;
    (void)state;
    setenv("FAKE_NVML_GPUS", "3", 1);
    setenv("FAKE_NVML_NEAR_CPU", "1", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.count, 3);
    assert_string_equal(l.gpu[2].uuid, "GPU-fa4e0000-0000-4000-8000-000000000002");
    assert_int_equal(l.gpu[1].index, 1);
    assert_true(l.gpu[0].have_cpumask);
    assert_int_equal(l.gpu[0].cpumask[0], 2UL);
    setenv("FAKE_NVML_GPUS", "0", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.count, 0);
    assert_non_null(strstr(l.reason, "no GPU"));
    setenv("FAKE_NVML_FAIL_INIT", "1", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.count, 0);
    assert_non_null(strstr(l.reason, "Driver Not Loaded"));
    unsetenv("FAKE_NVML_FAIL_INIT");
}

static int visible(const char *cvd, int *idx)
{
    gs_gpu_list_t l;
    gs_error_t err;
    setenv("FAKE_NVML_GPUS", "4", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(gs_gpu_filter_visible(&l, cvd, &err), 0);
    for (int i = 0; i < l.count; i++) {
        idx[i] = l.gpu[i].index;
    }
    return l.count;
}

static void test_visible_devices(void **state)
{
    int idx[8];
    (void)state;
    assert_int_equal(visible(NULL, idx), 4);
    assert_int_equal(visible("2", idx), 1);
    assert_int_equal(idx[0], 2);
    assert_int_equal(visible("3,1", idx), 2);
    assert_int_equal(idx[0], 3);
    assert_int_equal(idx[1], 1);
    assert_int_equal(visible("GPU-fa4e0000-0000-4000-8000-000000000001", idx), 1);
    assert_int_equal(idx[0], 1);
    assert_int_equal(visible("0,7,1", idx), 1); /* CUDA stops at an invalid entry */
    assert_int_equal(visible("", idx), 0);
    assert_int_equal(visible("-1", idx), 0);
    assert_int_equal(visible("GPU-fa4e", idx), 0); /* ambiguous prefix */
    assert_int_equal(visible("0,0", idx), 1);
}

/* CUDA's order: PCI_BUS_ID sorts by bus; the default puts the fastest
 * first, ties by bus; CUDA_VISIBLE_DEVICES indices follow that order. */
static void test_cuda_order(void **state)
{
    gs_gpu_list_t l;
    gs_error_t err;
    (void)state;
    setenv("FAKE_NVML_GPUS", "3", 1);
    setenv("FAKE_NVML_BUS", "9,3,5", 1);
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.count, 3);
    assert_int_equal(l.gpu[0].index, 1);
    assert_int_equal(l.gpu[1].index, 2);
    assert_int_equal(l.gpu[2].index, 0);
    assert_int_equal(l.gpu[2].cuda_index, 2);
    assert_int_equal(gs_gpu_filter_visible(&l, "0", &err), 0);
    assert_int_equal(l.gpu[0].index, 1); /* CUDA's device 0 is NVML's 1 here */
    unsetenv("CUDA_DEVICE_ORDER");
    setenv("FAKE_NVML_CORES", "100,100,200", 1); /* NVML 2 is fastest */
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.gpu[0].index, 2);
    assert_int_equal(l.gpu[1].index, 1); /* then by bus: 3 before 9 */
    assert_int_equal(l.gpu[2].index, 0);
    unsetenv("FAKE_NVML_CORES");
    unsetenv("FAKE_NVML_BUS");
}

/* A GPU in MIG mode becomes its instances, each with its own UUID; an index
 * in CUDA_VISIBLE_DEVICES selects all of them, a MIG UUID one. */
static void test_mig(void **state)
{
    gs_gpu_list_t l;
    gs_error_t err;
    (void)state;
    setenv("FAKE_NVML_GPUS", "3", 1);
    setenv("FAKE_NVML_MIG", "1:2", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.count, 4);
    assert_int_equal(l.gpu[0].mig, 0);
    assert_int_equal(l.gpu[1].mig, 1);
    assert_int_equal(l.gpu[2].mig, 2);
    assert_int_equal(l.gpu[1].index, 1);
    assert_int_equal(l.gpu[2].cuda_index, 1);
    assert_int_equal(l.gpu[3].cuda_index, 2);
    assert_string_equal(l.gpu[1].uuid, "MIG-fa4e0000-0000-4000-8000-000001000000");
    assert_non_null(strstr(l.gpu[2].name, "MIG"));
    gs_gpu_list_t v = l;
    assert_int_equal(gs_gpu_filter_visible(&v, "1", &err), 0);
    assert_int_equal(v.count, 2);
    v = l;
    assert_int_equal(gs_gpu_filter_visible(&v, "MIG-fa4e0000-0000-4000-8000-000001000001,0", &err),
                     0);
    assert_int_equal(v.count, 2);
    assert_int_equal(v.gpu[0].mig, 2);
    assert_int_equal(v.gpu[1].index, 0);
    /* Every GPU in MIG mode without an instance: nothing to serve, said so. */
    setenv("FAKE_NVML_GPUS", "1", 1);
    setenv("FAKE_NVML_MIG", "0:0", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.count, 1); /* 0 instances means not in MIG mode for the fake */
    unsetenv("FAKE_NVML_MIG");
}

static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The kernel's list of CPUs near a PCI device: NVIDIA's only. */
static void test_sysfs_near_cpus(void **state)
{
    char root[] = "/tmp/gs-test-sysfs.XXXXXX", dev[600], cmd[700];
    unsigned long mask[GS_GPU_CPUMASK_WORDS];
    (void)state;
    assert_non_null(mkdtemp(root));
    snprintf(dev, sizeof(dev), "%s/0001:3b:00.0", root);
    assert_int_equal(mkdir(dev, 0700), 0);
    put(dev, "vendor", "0x10de\n");
    put(dev, "local_cpulist", "2-3,70\n");
    assert_int_equal(gs_gpu_sysfs_near_cpus(root, 1, 0x3b, 0, mask), 0);
    assert_int_equal(mask[0], 0xcUL);
    assert_int_equal(mask[1], 1UL << 6);
    assert_int_equal(mask[2], 0UL);
    /* Another bus: no such device. */
    assert_int_equal(gs_gpu_sysfs_near_cpus(root, 1, 0x3c, 0, mask), -1);
    /* Not NVIDIA's (a stand-in GPU's bus number on a real machine). */
    put(dev, "vendor", "0x8086\n");
    assert_int_equal(gs_gpu_sysfs_near_cpus(root, 1, 0x3b, 0, mask), -1);
    /* An empty or unreadable list: NVML is asked instead. */
    put(dev, "vendor", "0x10de\n");
    put(dev, "local_cpulist", "\n");
    assert_int_equal(gs_gpu_sysfs_near_cpus(root, 1, 0x3b, 0, mask), -1);
    put(dev, "local_cpulist", "x\n");
    assert_int_equal(gs_gpu_sysfs_near_cpus(root, 1, 0x3b, 0, mask), -1);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

/* The driver's CUDA version, which sets how many clients one MPS server
 * takes: 13.0 -> 48, 13.1 -> 60, and a driver that cannot tell -> 48. */
static void test_cuda_version_sets_client_limit(void **state)
{
    gs_gpu_list_t l;
    gs_error_t err;
    (void)state;
    setenv("FAKE_NVML_GPUS", "1", 1);
    unsetenv("FAKE_NVML_CUDA_VERSION");
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.cuda_version, 13000);
    assert_int_equal(gs_policy_clients_per_server(0, l.cuda_version), 48);
    setenv("FAKE_NVML_CUDA_VERSION", "13010", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.cuda_version, 13010);
    assert_int_equal(gs_policy_clients_per_server(0, l.cuda_version), 60);
    setenv("FAKE_NVML_CUDA_VERSION", "none", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.cuda_version, 0);
    assert_int_equal(gs_policy_clients_per_server(0, l.cuda_version), 48);
    unsetenv("FAKE_NVML_CUDA_VERSION");
}

/* Every device of a fake node (MIG instances, CPU masks, processes) comes
 * back from its line whole; lines that are not one device are refused. */
static void test_line_round_trip(void **state)
{
    (void)state;
    gs_gpu_list_t l;
    gs_error_t err;
    static char line[GS_GPU_LINE_MAX];
    setenv("FAKE_NVML_GPUS", "3", 1);
    setenv("FAKE_NVML_MIG", "1:2", 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_true(l.count >= 4);
    l.gpu[0].nprocs = GS_GPU_PROCS_MAX + 8; /* more than are kept: the kept ones travel */
    for (int i = 0; i < GS_GPU_PROCS_MAX; i++) {
        l.gpu[0].procs[i] = 4000000 + i; /* the longest PIDs (pid_max 4194304) */
        l.gpu[0].procs_mib[i] = i == 0 ? GS_GPU_MIB_UNKNOWN : 66 + i;
    }
    l.gpu[0].nmps = 2; /* two of them MPS clients */
    l.gpu[0].mps[0] = 4000001;
    l.gpu[0].mps[1] = 4000003;
    l.gpu[1].nprocs = -1; /* NVML could not tell */
    l.gpu[1].nmps = -1;
    snprintf(l.gpu[2].name, sizeof(l.gpu[2].name), "NVIDIA H200 with spaces");
    for (int g = 0; g < l.count; g++) {
        gs_gpu_t back;
        assert_int_equal(gs_gpu_to_line(&l.gpu[g], line, sizeof(line)), 0);
        assert_null(strchr(line, '\n'));
        assert_int_equal(gs_gpu_from_line(line, &back), 0);
        assert_memory_equal(&back, &l.gpu[g], sizeof(back));
    }
    assert_int_equal(gs_gpu_to_line(&l.gpu[0], line, 40), -ENOSPC);
    gs_gpu_t junk;
    assert_int_equal(gs_gpu_from_line("", &junk), -EINVAL);
    /* A line without the processes' memory (a shared agent of an older
     * gsrun): refused, so the job lists the GPUs itself. */
    assert_int_equal(gs_gpu_from_line("0 0 0 1 1 0 1 1 1 5 0 - - GPU-x name", &junk), -EINVAL);
    assert_int_equal(gs_gpu_from_line("0 0 0 1 1 0 1 1 1 5 66 0 - - GPU-x name", &junk), 0);
    assert_int_equal(junk.procs_mib[0], 66);
    assert_int_equal(gs_gpu_from_line("0 0 0 1 1 0 1 1 1 5 2147483648 0 - - GPU-x name", &junk), -EINVAL);
    assert_int_equal(gs_gpu_from_line("0 0 0 zz 1 0 1 1 0 - - GPU-x name", &junk), -EINVAL);
    assert_int_equal(gs_gpu_from_line("0 0 0 1 1 0 1 1 2 5 - GPU-x name", &junk), -EINVAL);
    assert_int_equal(gs_gpu_from_line("0 0 0 1 1 0 1 1 0 - 1,2 GPU-x name", &junk), -EINVAL);
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_MIG");
}

/* NVML's listing read whole: past the first room asked for (the real NVML,
 * like the fake, answers a short room with INSUFFICIENT_SIZE, the count it
 * needs and no entry written). */
static void test_many_processes(void **state)
{
    (void)state;
    static gs_gpu_list_t l;
    gs_error_t err;
    char procs[8192];
    size_t k = 0;
    for (int i = 0; i < 300; i++) {
        k += (size_t)snprintf(procs + k, sizeof(procs) - k, "%s0:%d", i ? "," : "", 5000 + i);
    }
    setenv("FAKE_NVML_PROCS", procs, 1);
    assert_int_equal(gs_gpu_discover(&l, &err), 0);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.gpu[0].nprocs, 300);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(l.gpu[0].procs[i], 5000 + i);
        assert_int_equal(l.gpu[0].procs_mib[i], 520);
    }
    unsetenv("FAKE_NVML_PROCS");
}

int main(int argc, char **argv)
{
    /* dlopen reads LD_LIBRARY_PATH at start: re-exec with the fake first. */
    const char *b = getenv("GS_TOP_BUILDDIR");
    if (getenv("GS_TEST_GPU_REEXEC") == NULL) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/tests/fake", b ? b : ".");
        setenv("LD_LIBRARY_PATH", path, 1);
        setenv("GS_TEST_GPU_REEXEC", "1", 1);
        execv("/proc/self/exe", argv);
        return 99;
    }
    (void)argc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discover),
        cmocka_unit_test(test_visible_devices),
        cmocka_unit_test(test_cuda_order),
        cmocka_unit_test(test_mig),
        cmocka_unit_test(test_sysfs_near_cpus),
        cmocka_unit_test(test_cuda_version_sets_client_limit),
        cmocka_unit_test(test_line_round_trip),
        cmocka_unit_test(test_many_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
