/* GPU discovery through the fake NVML (loaded by soname, as the real one),
 * and CUDA_VISIBLE_DEVICES filtering. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
