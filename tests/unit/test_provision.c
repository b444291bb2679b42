/* SPDX-License-Identifier: BSD-3-Clause */
/* A batch job's node (gsrun prolog): the job dir's name, and each task's
 * environment from the state the job's agent publishes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rank/node.h"
#include "runtime/batch/provision.h"
#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"

static const char *find(const gs_clientenv_t *env, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < env->nset; i++) {
        if (strncmp(env->set[i], name, n) == 0 && env->set[i][n] == '=') {
            return env->set[i] + n + 1;
        }
    }
    return NULL;
}

static void test_job_name(void **state)
{
    char out[256];
    gs_error_t err;
    (void)state;
    assert_int_equal(gs_provision_job_name("4711", out, sizeof(out), &err), 0);
    assert_string_equal(out, "job-4711");
    assert_int_equal(gs_provision_job_name("12.pbs-server", out, sizeof(out), &err), 0);
    assert_true(gs_provision_job_name("../etc", out, sizeof(out), &err) < 0);
    assert_true(gs_provision_job_name("a/b", out, sizeof(out), &err) < 0);
    assert_true(gs_provision_job_name(".hidden", out, sizeof(out), &err) < 0);
    assert_true(gs_provision_job_name("", out, sizeof(out), &err) < 0);
    assert_true(gs_provision_job_name(NULL, out, sizeof(out), &err) < 0);
    assert_non_null(strstr(err.text, "--job"));
}

/* Two GPUs provisioned for the job; steps of 6, 2 and 1 tasks. */
static void test_task_env(void **state)
{
    char tmpl[] = "/tmp/gstprov.XXXXXX", job_dir[300], node_dir[400];
    static gs_state_t st;
    gs_clientenv_t env;
    gs_config_t cfg;
    gs_error_t err;
    int on;
    (void)state;

    assert_non_null(mkdtemp(tmpl));
    snprintf(job_dir, sizeof(job_dir), "%s/gsrun.job-1", tmpl);
    assert_int_equal(gs_node_dir(job_dir, node_dir, sizeof(node_dir), &err), 0);
    gs_config_init(&cfg);
    /* Not provisioned: nothing to set. */
    assert_int_equal(gs_provision_task_env(&cfg, job_dir, 0, 4, &env, &on, &err), 0);
    assert_int_equal(on, 0);

    assert_int_equal(gs_rundir_ensure(job_dir, &err), 0);
    assert_int_equal(gs_rundir_ensure(node_dir, &err), 0);
    memset(&st, 0, sizeof(st));
    st.kind = GS_STATE_ON;
    st.nservers = 2;
    for (int g = 0; g < 2; g++) {
        snprintf(st.server[g].uuid, sizeof(st.server[g].uuid), "GPU-%d", g);
        snprintf(st.server[g].pipe_dir, sizeof(st.server[g].pipe_dir), "%s/g%d", node_dir, g);
        snprintf(st.server[g].log_dir, sizeof(st.server[g].log_dir), "%s/g%d.log", node_dir, g);
    }
    snprintf(st.socket, sizeof(st.socket), "%s/agent.sock", node_dir);
    assert_int_equal(gs_state_write(node_dir, &st, &err), 0);

    /* 6 tasks: 3 per GPU at 66.6667 %; task 4 is the second GPU's. */
    assert_int_equal(gs_provision_task_env(&cfg, job_dir, 4, 6, &env, &on, &err), 0);
    assert_int_equal(on, 1);
    assert_string_equal(find(&env, "GSRUN_GPU_UUID"), "GPU-1");
    assert_string_equal(find(&env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "66.6667");
    assert_non_null(strstr(find(&env, "CUDA_MPS_PIPE_DIRECTORY"), "/g1"));
    /* 2 tasks on 2 GPUs: one each, no MPS needed. */
    assert_int_equal(gs_provision_task_env(&cfg, job_dir, 1, 2, &env, &on, &err), 0);
    assert_int_equal(on, 0);
    /* A fixed share wins. */
    assert_int_equal(gs_config_set(&cfg, "mps-percentage", "30", "--mps-percentage", &err), 0);
    assert_int_equal(gs_provision_task_env(&cfg, job_dir, 0, 8, &env, &on, &err), 0);
    assert_string_equal(find(&env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
    gs_rundir_remove(tmpl);
}

/* A user's base that another user took first: the next free name, the same
 * for every rank; all taken: an error that says what to do. Planted files
 * stand for the other user's names (a link or file: ENOTDIR). */
static void test_user_base_any(void **state)
{
    char dir[] = "/tmp/gsprov.XXXXXX", want[128], out[512], taken[512], path[160];
    gs_error_t err;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(want, sizeof(want), "%s/gsrun-x", dir);
    assert_int_equal(gs_rundir_user_base_any(want, out, sizeof(out), taken, sizeof(taken), &err),
                     0);
    assert_string_equal(out, want);
    assert_string_equal(taken, "");
    assert_int_equal(rmdir(want), 0);
    FILE *f = fopen(want, "w"); /* planted */
    assert_non_null(f);
    fclose(f);
    assert_int_equal(gs_rundir_user_base_any(want, out, sizeof(out), taken, sizeof(taken), &err),
                     0);
    snprintf(path, sizeof(path), "%s.1", want);
    assert_string_equal(out, path);
    assert_non_null(strstr(taken, "exists and is not a directory"));
    /* Found again by the next rank. */
    assert_int_equal(gs_rundir_user_base_any(want, out, sizeof(out), taken, sizeof(taken), &err),
                     0);
    assert_string_equal(out, path);
    /* The other user's name freed again: the user's jobs stay where they
     * met (before: the next job made want, a second place). */
    assert_int_equal(unlink(want), 0);
    assert_int_equal(gs_rundir_user_base_any(want, out, sizeof(out), taken, sizeof(taken), &err),
                     0);
    assert_string_equal(out, path);
    assert_non_null(strstr(taken, "was taken when the user's first job here ran"));
    assert_int_equal(access(want, F_OK), -1);
    f = fopen(want, "w"); /* planted again, for the cases below */
    assert_non_null(f);
    fclose(f);
    assert_int_equal(rmdir(path), 0);
    for (int k = 1; k <= GS_RUNDIR_BASE_TRIES; k++) {
        snprintf(path, sizeof(path), "%s.%d", want, k);
        assert_int_equal(symlink("/", path), 0);
    }
    /* Every guessable name another user's (links here, which are never
     * ours): a base nobody could take first, want.x<6 random>, which the
     * next call finds again (issue 52, hole 1). */
    char made[700], again[700];
    assert_int_equal(gs_rundir_user_base_any(want, made, sizeof(made), taken, sizeof(taken), &err),
                     0);
    snprintf(path, sizeof(path), "%s.x", want);
    assert_int_equal(strncmp(made, path, strlen(path)), 0);
    assert_int_equal(strlen(made), strlen(path) + 6);
    assert_non_null(strstr(taken, "(taken by other users): the user's jobs meet in"));
    struct stat mst;
    assert_int_equal(lstat(made, &mst), 0);
    assert_int_equal(mst.st_mode & 0777, 0700);
    assert_int_equal(gs_rundir_user_base_any(want, again, sizeof(again), taken, sizeof(taken), &err),
                     0);
    assert_string_equal(again, made);
    assert_int_equal(gs_rundir_user_base_find(want, again, sizeof(again)), 0);
    assert_string_equal(again, made);
    /* gsrun exec's ranks: the first rank and the others meet there at once. */
    long long t0 = gs_proc_now_ms();
    assert_int_equal(gs_provision_exec_job_dir(want, "exec-1", 1, 5000, out, sizeof(out), taken,
                                               sizeof(taken), &err),
                     0);
    assert_int_equal(gs_provision_exec_job_dir(want, "exec-1", 0, 5000, again, sizeof(again), taken,
                                               sizeof(taken), &err),
                     0);
    assert_string_equal(again, out);
    assert_true(gs_proc_now_ms() - t0 < 1000);
    assert_int_equal(rmdir(out), 0);
    assert_int_equal(rmdir(made), 0);
    snprintf(path, sizeof(path), "%s.7", want);
    assert_int_equal(unlink(path), 0);
    /* A rank before the first: waits until the first rank has made the
     * job dir (.7, the one name free), then goes where it went. */
    pid_t first = fork();
    if (first == 0) {
        usleep(200 * 1000);
        _exit(gs_provision_exec_job_dir(want, "exec-1", 1, 5000, out, sizeof(out), taken,
                                        sizeof(taken), &err) == 0
                  ? 0
                  : 1);
    }
    assert_int_equal(gs_provision_exec_job_dir(want, "exec-1", 0, 5000, out, sizeof(out), taken,
                                               sizeof(taken), &err),
                     0);
    snprintf(path, sizeof(path), "%s.7/exec-1", want);
    assert_string_equal(out, path);
    int st;
    assert_int_equal(waitpid(first, &st, 0), first);
    assert_int_equal(WEXITSTATUS(st), 0);
    /* No first rank at all: the wait ends at its bound. */
    assert_int_equal(gs_provision_exec_job_dir(want, "exec-2", 0, 300, out, sizeof(out), taken,
                                               sizeof(taken), &err),
                     -ETIMEDOUT);
    snprintf(path, sizeof(path), "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_name),
        cmocka_unit_test(test_task_env),
        cmocka_unit_test(test_user_base_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
