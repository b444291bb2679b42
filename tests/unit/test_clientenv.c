/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment each rank gets. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rank/clientenv.h"

static gs_config_t cfg; /* the defaults (main) */

static const char *find(const gs_clientenv_t *e, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < e->nset; i++) {
        if (strncmp(e->set[i], name, n) == 0 && e->set[i][n] == '=') {
            return e->set[i] + n + 1;
        }
    }
    return NULL;
}

static int unsets(const gs_clientenv_t *e, const char *name)
{
    for (int i = 0; i < e->nunset; i++) {
        if (strcmp(e->unset[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

static gs_state_t on_state(void)
{
    gs_state_t st;
    memset(&st, 0, sizeof(st));
    st.kind = GS_STATE_ON;
    snprintf(st.socket, sizeof(st.socket), "/r/n/agent.sock");
    st.nservers = 2;
    st.server[0] =
        (gs_state_server_t){0, 8, 1, "25", "GPU-aaaa", "/r/n/g0", "/r/n/g0.log", 0, 0, 1, 8};
    st.server[1] =
        (gs_state_server_t){8, 8, 0, "", "GPU-bbbb", "/r/n/g1", "/r/n/g1.log", 1, 0, 1, 8};
    return st;
}

static void test_mps_on(void **state)
{
    static gs_state_t st;
    gs_clientenv_t e;
    gs_error_t err;
    (void)state;
    st = on_state();
    assert_int_equal(gs_clientenv_build(&st, -1, 3, 16, &cfg, &e, &err), 0);
    assert_string_equal(find(&e, "CUDA_MPS_PIPE_DIRECTORY"), "/r/n/g0");
    /* The server's log is the agents' to read, not the ranks' to know. */
    assert_null(find(&e, "CUDA_MPS_LOG_DIRECTORY"));
    assert_true(unsets(&e, "CUDA_MPS_LOG_DIRECTORY"));
    assert_string_equal(find(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
    /* The daemon sees only this GPU, so the client sees it as device 0. */
    assert_string_equal(find(&e, "CUDA_VISIBLE_DEVICES"), "0");
    assert_string_equal(find(&e, "GSRUN_GPU_UUID"), "GPU-aaaa");
    assert_string_equal(find(&e, "GSRUN_GPU_RANKS"), "8");
    assert_string_equal(find(&e, "GSRUN_LOCAL_RANK"), "3");
    assert_string_equal(find(&e, "GSRUN_LOCAL_SIZE"), "16");
    assert_string_equal(find(&e, "GSRUN_MPS_ACTIVE"), "1");
    assert_true(unsets(&e, "GSRUN_JOB_DIR"));
    /* The job's priority on its server: normal unless it asked for low. */
    assert_string_equal(find(&e, "CUDA_MPS_CLIENT_PRIORITY"), "0");
    gs_config_t low = cfg;
    assert_int_equal(gs_config_set(&low, "mps-priority", "low", "--mps-priority", &err), 0);
    assert_int_equal(gs_clientenv_build(&st, -1, 3, 16, &low, &e, &err), 0);
    assert_string_equal(find(&e, "CUDA_MPS_CLIENT_PRIORITY"), "1");
    /* Percentage off: an inherited value must not survive. */
    assert_int_equal(gs_clientenv_build(&st, -1, 12, 16, &cfg, &e, &err), 0);
    assert_string_equal(find(&e, "CUDA_MPS_PIPE_DIRECTORY"), "/r/n/g1");
    assert_null(find(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    assert_true(unsets(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    /* A rank outside the plan is an error, not a guess. */
    assert_true(gs_clientenv_build(&st, -1, 16, 17, &cfg, &e, &err) < 0);
    /* The agent's answer (placement by the rank's cores) wins over blocks. */
    assert_int_equal(gs_clientenv_build(&st, 1, 3, 16, &cfg, &e, &err), 0);
    assert_string_equal(find(&e, "CUDA_MPS_PIPE_DIRECTORY"), "/r/n/g1");
    assert_string_equal(find(&e, "GSRUN_GPU_UUID"), "GPU-bbbb");
    assert_null(find(&e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
    /* A memory limit is for device 0, the rank's only device. */
    st.mem_limit_mb = 4096;
    assert_int_equal(gs_clientenv_build(&st, 1, 3, 16, &cfg, &e, &err), 0);
    assert_string_equal(find(&e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=4096MB");
}

static void test_mps_off(void **state)
{
    gs_state_t st;
    gs_clientenv_t e;
    gs_error_t err;
    (void)state;
    memset(&st, 0, sizeof(st));
    st.kind = GS_STATE_OFF;
    assert_int_equal(gs_clientenv_build(&st, -1, 1, 2, &cfg, &e, &err), 0);
    assert_string_equal(find(&e, "GSRUN_MPS_ACTIVE"), "0");
    assert_null(find(&e, "CUDA_MPS_PIPE_DIRECTORY"));
    assert_null(find(&e, "CUDA_VISIBLE_DEVICES"));
    /* Off with GPUs listed (gpu-bind): each rank gets its own, by UUID. */
    st.nservers = 2;
    snprintf(st.server[0].uuid, sizeof(st.server[0].uuid), "GPU-aaaa");
    snprintf(st.server[1].uuid, sizeof(st.server[1].uuid), "MIG-bbbb");
    st.server[0].nranks = st.server[1].nranks = 1;
    st.server[1].first_rank = 1;
    assert_int_equal(gs_clientenv_build(&st, -1, 1, 2, &cfg, &e, &err), 0);
    assert_string_equal(find(&e, "CUDA_VISIBLE_DEVICES"), "MIG-bbbb");
    assert_int_equal(gs_clientenv_build(&st, 0, 1, 2, &cfg, &e, &err), 0);
    assert_string_equal(find(&e, "CUDA_VISIBLE_DEVICES"), "GPU-aaaa");
    assert_null(find(&e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
}

static void test_apply(void **state)
{
    static gs_state_t st;
    gs_clientenv_t e;
    gs_error_t err;
    (void)state;
    st = on_state();
    setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "77", 1);
    setenv("GSRUN_JOB_DIR", "/x", 1);
    assert_int_equal(gs_clientenv_build(&st, -1, 9, 16, &cfg, &e, &err), 0);
    assert_int_equal(gs_clientenv_apply(&e, &err), 0);
    assert_null(getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    assert_null(getenv("GSRUN_JOB_DIR"));
    assert_string_equal(getenv("CUDA_MPS_PIPE_DIRECTORY"), "/r/n/g1");
    assert_string_equal(getenv("CUDA_VISIBLE_DEVICES"), "0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mps_on),
        cmocka_unit_test(test_mps_off),
        cmocka_unit_test(test_apply),
    };
    gs_config_init(&cfg);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
