/* SPDX-License-Identifier: BSD-3-Clause */
/* Container runtimes (runtime/core/container.c): which one a process's
 * environment names, the run dir to bind for a pipe dir, and each runtime's
 * option for it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "runtime/core/container.h"

#define BLOCK(s) (s), sizeof(s) - 1

static void test_markers(void **state)
{
    (void)state;
    assert_int_equal(gs_container_of_environ(BLOCK("A=1\0CH_RUNNING=Weird Al Yankovic\0")),
                     GS_CT_CHARLIECLOUD);
    assert_int_equal(gs_container_of_environ(BLOCK("APPTAINER_CONTAINER=/x.sif\0")),
                     GS_CT_APPTAINER);
    assert_int_equal(gs_container_of_environ(BLOCK("SINGULARITY_CONTAINER=/x.sif\0")),
                     GS_CT_APPTAINER);
    assert_int_equal(gs_container_of_environ(BLOCK("container=podman\0")), GS_CT_PODMAN);
    /* Not podman's value, a name that only begins the same, none at all. */
    assert_int_equal(gs_container_of_environ(BLOCK("container=oci\0")), GS_CT_NONE);
    assert_int_equal(gs_container_of_environ(BLOCK("CH_RUNNINGX=1\0container=podmanx\0")),
                     GS_CT_NONE);
    assert_int_equal(gs_container_of_environ(BLOCK("")), GS_CT_NONE);
    /* A block that ends without its last NUL is read within its length. */
    assert_int_equal(gs_container_of_environ("container=podman", 16), GS_CT_PODMAN);
    assert_int_equal(gs_container_of_environ("container=podman", 12), GS_CT_NONE);
    assert_string_equal(gs_container_name(GS_CT_CHARLIECLOUD), "Charliecloud");
    assert_string_equal(gs_container_name(GS_CT_NONE), "");
}

static void test_bind_dir(void **state)
{
    char out[256];
    (void)state;
    gs_container_bind_dir("/dev/shm/gsrun-1000/mps-share/n1/g0", out, sizeof(out));
    assert_string_equal(out, "/dev/shm/gsrun-1000");
    gs_container_bind_dir("/dev/shm/gsrun-1000.3/exec-ab-k/n1/g0", out, sizeof(out));
    assert_string_equal(out, "/dev/shm/gsrun-1000.3");
    gs_container_bind_dir("/scratch/me/gsrun.Ab12Cd/n1/g1", out, sizeof(out));
    assert_string_equal(out, "/scratch/me/gsrun.Ab12Cd");
    /* Root's base: the job's own dir below it, not every job's. */
    gs_container_bind_dir("/run/gsrun/job-77/n1/g0", out, sizeof(out));
    assert_string_equal(out, "/run/gsrun/job-77");
    gs_container_bind_dir("/run/gsrun", out, sizeof(out));
    assert_string_equal(out, "/run/gsrun");
    /* A name that only begins with gsrun, and none at all: the pipe dir. */
    gs_container_bind_dir("/x/gsrunner/g0", out, sizeof(out));
    assert_string_equal(out, "/x/gsrunner/g0");
    gs_container_bind_dir("/site/mps/g0", out, sizeof(out));
    assert_string_equal(out, "/site/mps/g0");
}

static void test_hints(void **state)
{
    char out[1024];
    (void)state;
    gs_container_bind_hint(GS_CT_PODMAN, "/d", out, sizeof(out));
    assert_string_equal(out, "podman run -v /d:/d");
    gs_container_bind_hint(GS_CT_CHARLIECLOUD, "/d", out, sizeof(out));
    assert_string_equal(out, "ch-run -b /d:/d");
    gs_container_bind_hint(GS_CT_APPTAINER, "/d", out, sizeof(out));
    assert_string_equal(out, "apptainer exec -B /d");
    gs_container_bind_hint(GS_CT_NONE, "/d", out, sizeof(out));
    assert_string_equal(out, "podman run -v /d:/d, ch-run -b /d:/d, apptainer exec -B /d, srun "
                             "--container-mounts=/d:/d (Pyxis), enroot start -m /d:/d");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_markers),
        cmocka_unit_test(test_bind_dir),
        cmocka_unit_test(test_hints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
