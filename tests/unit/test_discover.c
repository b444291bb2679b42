/* SPDX-License-Identifier: BSD-3-Clause */
/* Discovery without a PMIx server: the launchers' own variables. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "pmix/discover.h"

static void clear(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASKS_PER_NODE",
                                       "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_ID",
                                       "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
                                       "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE",
                                       "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "GSRUN_LOCAL_RANK",
                                       "GSRUN_LOCAL_SIZE", "JSM_NAMESPACE_LOCAL_RANK",
                                       "JSM_NAMESPACE_LOCAL_SIZE", "FLUX_TASK_LOCAL_ID", NULL};
    for (const char *const *v = vars; *v; v++) {
        unsetenv(*v);
    }
}

static void test_openmpi(void **state)
{
    gs_local_t l;
    gs_error_t err;
    (void)state;
    clear();
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "16", 1);
    assert_int_equal(gs_discover_from_env(&l, &err), 0);
    assert_int_equal(l.local_rank, 3);
    assert_int_equal(l.local_size, 16);
    assert_string_equal(l.source, "openmpi");
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "16", 1);
    assert_true(gs_discover_from_env(&l, &err) < 0);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
    assert_true(gs_discover_from_env(&l, &err) < 0);
    /* With no PMIx server the full discovery falls back to the same. */
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    assert_int_equal(gs_discover(&l, &err), 0);
    assert_int_equal(l.local_rank, 1);
}

static void test_slurm(void **state)
{
    gs_local_t l;
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_discover_slurm_tasks("4", 0), 4);
    assert_int_equal(gs_discover_slurm_tasks("2(x3),1", 0), 2);
    assert_int_equal(gs_discover_slurm_tasks("2(x3),1", 2), 2);
    assert_int_equal(gs_discover_slurm_tasks("2(x3),1", 3), 1);
    assert_true(gs_discover_slurm_tasks("2(x3),1", 4) < 0);
    assert_true(gs_discover_slurm_tasks("2(x", 0) < 0);
    assert_true(gs_discover_slurm_tasks("abc", 0) < 0);
    assert_true(gs_discover_slurm_tasks("", 0) < 0);
    clear();
    setenv("SLURM_LOCALID", "2", 1);
    setenv("SLURM_NODEID", "1", 1);
    setenv("SLURM_TASKS_PER_NODE", "8(x2)", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    assert_int_equal(gs_discover_from_env(&l, &err), 0);
    assert_int_equal(l.local_rank, 2);
    assert_int_equal(l.local_size, 8);
    assert_string_equal(l.source, "slurm");
    assert_string_equal(l.job, "4242");
    /* A step of fewer tasks than the job: the step's count wins. */
    setenv("SLURM_STEP_TASKS_PER_NODE", "3,1", 1);
    setenv("SLURM_LOCALID", "0", 1);
    assert_int_equal(gs_discover_from_env(&l, &err), 0);
    assert_int_equal(l.local_size, 1);
    setenv("SLURM_LOCALID", "1", 1);
    assert_true(gs_discover_from_env(&l, &err) < 0);
}

static void test_nothing(void **state)
{
    gs_local_t l;
    gs_error_t err;
    (void)state;
    clear();
    assert_true(gs_discover_from_env(&l, &err) < 0);
    assert_non_null(strstr(err.text, "set GSRUN_LOCAL_RANK and GSRUN_LOCAL_SIZE"));
}

/* Environments as each launcher sets them (recorded from their sources and
 * users' scripts, doc/launchers.md): the local rank and size, and which
 * launcher said so; a launcher's pair wins over the ones after it. */
static void test_other_launchers(void **state)
{
    static const struct {
        const char *vars[6];
        const char *source;
        int rank, size;
    } cases[] = {
        /* mpiexec.hydra -n 5 -ppn 3, rank 4 (Intel MPI prints the same) */
        {{"MPI_LOCALRANKID", "1", "MPI_LOCALNRANKS", "2", NULL}, "hydra", 1, 2},
        /* MVAPICH's mpirun_rsh */
        {{"MV2_COMM_WORLD_LOCAL_RANK", "5", "MV2_COMM_WORLD_LOCAL_SIZE", "8", NULL}, "mvapich", 5, 8},
        /* HPE Cray PALS mpiexec */
        {{"PALS_LOCAL_RANKID", "0", "PALS_LOCAL_SIZE", "12", NULL}, "pals", 0, 12},
        /* IBM jsrun (LSF's JSM): jsrun -n 2 -a 6, a task of the second set */
        {{"JSM_NAMESPACE_LOCAL_RANK", "4", "JSM_NAMESPACE_LOCAL_SIZE", "6", NULL}, "jsrun", 4, 6},
        /* flux run -N 2 -n 8 --env=GSRUN_LOCAL_SIZE=4: Flux's local rank, the
         * count by hand */
        {{"FLUX_TASK_LOCAL_ID", "3", "GSRUN_LOCAL_SIZE", "4", NULL}, "flux", 3, 4},
        /* set by hand, any launcher */
        {{"GSRUN_LOCAL_RANK", "2", "GSRUN_LOCAL_SIZE", "3", NULL}, "gsrun", 2, 3},
        /* Hydra's pair comes before a hand-set one */
        {{"MPI_LOCALRANKID", "0", "MPI_LOCALNRANKS", "4", "GSRUN_LOCAL_RANK", "9"}, "hydra", 0, 4},
    };
    gs_local_t l;
    gs_error_t err;
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        clear();
        for (int v = 0; v < 6 && cases[i].vars[v] != NULL; v += 2) {
            setenv(cases[i].vars[v], cases[i].vars[v + 1], 1);
        }
        assert_int_equal(gs_discover_from_env(&l, &err), 0);
        assert_string_equal(l.source, cases[i].source);
        assert_int_equal(l.local_rank, cases[i].rank);
        assert_int_equal(l.local_size, cases[i].size);
    }
    /* Half a pair is no pair; a rank past the size is refused. */
    clear();
    setenv("MPI_LOCALRANKID", "1", 1);
    assert_true(gs_discover_from_env(&l, &err) < 0);
    setenv("MPI_LOCALNRANKS", "1", 1);
    assert_true(gs_discover_from_env(&l, &err) < 0);
    assert_non_null(strstr(err.text, "from hydra"));
    /* Flux without the count: one line saying how to give it. */
    clear();
    setenv("FLUX_TASK_LOCAL_ID", "0", 1);
    assert_true(gs_discover_from_env(&l, &err) < 0);
    assert_non_null(strstr(err.text, "FLUX_TASK_LOCAL_ID"));
    assert_non_null(strstr(err.text, "--env=GSRUN_LOCAL_SIZE="));
    clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openmpi),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_nothing),
        cmocka_unit_test(test_other_launchers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
