/* SPDX-License-Identifier: BSD-3-Clause */
/* The user's placement record of a node: entries of live jobs count, those
 * of jobs that are gone (ended, killed) stop counting and are removed, the
 * last job leaves no record behind. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/files/ledger.h"

static char tmp[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof(tmp), "/tmp/gsledger.XXXXXX");
    if (mkdtemp(tmp) == NULL) {
        return -1;
    }
    setenv("TMPDIR", tmp, 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void two_gpus(gs_gpu_t *g)
{
    memset(g, 0, 2 * sizeof(*g));
    snprintf(g[0].uuid, sizeof(g[0].uuid), "GPU-aaaa");
    snprintf(g[1].uuid, sizeof(g[1].uuid), "GPU-bbbb");
}

/* A job that records ranks and holds its entry until SIGKILLed, or told
 * to end (SIGUSR1: it closes its entry). */
static pid_t job_process(const int *ranks)
{
    int go[2];
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL); /* the child waits for it with sigwait */
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gs_gpu_t g[2];
        gs_ledger_t l;
        gs_error_t err;
        int sig;
        two_gpus(g);
        gs_ledger_init(&l);
        close(go[0]);
        if (gs_ledger_lock(&l, "node1", 2000, &err) != 0 ||
            gs_ledger_record(&l, "gsrun.job", g, 2, ranks, &err) != 0) {
            _exit(1);
        }
        gs_ledger_unlock(&l);
        (void)write(go[1], "x", 1);
        close(go[1]);
        sigwait(&usr1, &sig);
        gs_ledger_close(&l);
        _exit(0);
    }
    close(go[1]);
    char c;
    assert_int_equal(read(go[0], &c, 1), 1);
    close(go[0]);
    return pid;
}

static void end_job(pid_t pid)
{
    int status;
    kill(pid, SIGUSR1);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int load_now(int *load)
{
    gs_gpu_t g[2];
    gs_ledger_t l;
    gs_error_t err;
    two_gpus(g);
    gs_ledger_init(&l);
    assert_int_equal(gs_ledger_lock(&l, "node1", 2000, &err), 0);
    int jobs = gs_ledger_load(&l, g, 2, load);
    gs_ledger_close(&l);
    return jobs;
}

static void test_live_jobs_count(void **state)
{
    int a[2] = {3, 1}, b[2] = {0, 2}, load[2], status;
    (void)state;
    pid_t pa = job_process(a), pb = job_process(b);
    assert_int_equal(load_now(load), 2);
    assert_int_equal(load[0], 3);
    assert_int_equal(load[1], 3);
    /* A job that ends gives its count back at once. */
    end_job(pa);
    assert_int_equal(load_now(load), 1);
    assert_int_equal(load[0], 0);
    assert_int_equal(load[1], 2);
    /* So does a SIGKILLed one (its flock goes with it); its entry is removed. */
    kill(pb, SIGKILL);
    assert_int_equal(waitpid(pb, &status, 0), pb);
    assert_int_equal(load_now(load), 0);
    assert_int_equal(load[0] + load[1], 0);
}

static void test_last_job_leaves_nothing(void **state)
{
    int a[2] = {1, 0}, load[2];
    char path[256];
    struct stat st;
    (void)state;
    pid_t p = job_process(a);
    snprintf(path, sizeof(path), "%s/gsrun-%u/place/node1", tmp, (unsigned)getuid());
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    end_job(p);
    assert_int_equal(stat(path, &st), -1); /* the node's last job removed the record */
    snprintf(path, sizeof(path), "%s/gsrun-%u/place", tmp, (unsigned)getuid());
    assert_int_equal(stat(path, &st), -1);
    /* A reader after that makes it anew and finds nobody. */
    assert_int_equal(load_now(load), 0);
}

typedef struct {
    int n;
    char job[96];
    int ranks;
} seen_t;

static void seen(void *ctx, const gs_ledger_job_t *job)
{
    seen_t *s = ctx;
    s->n++;
    snprintf(s->job, sizeof(s->job), "%s", job->job);
    s->ranks = job->n > 0 ? job->ranks[0] : -1;
}

static void test_each_and_garbage(void **state)
{
    int a[2] = {0, 4};
    char path[256], dir[256];
    seen_t s = {0};
    (void)state;
    pid_t p = job_process(a);
    snprintf(dir, sizeof(dir), "%s/gsrun-%u/place/node1", tmp, (unsigned)getuid());
    /* Not an entry: no magic line, and a file nobody holds. */
    snprintf(path, sizeof(path), "%s/junk", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("hello\n", f);
    fclose(f);
    assert_int_equal(gs_ledger_each(dir, seen, &s), 1);
    assert_int_equal(s.ranks, 4);
    assert_non_null(strstr(s.job, "gsrun.job."));
    unlink(path); /* before the job ends: it leaves the dir only when empty */
    end_job(p);
}

static void test_applies(void **state)
{
    (void)state;
    assert_true(gs_ledger_applies("/tmp/gsrun.Ab12Cd"));
    assert_true(gs_ledger_applies("/tmp/gsrun-0/exec-1234abcd-key"));
    assert_false(gs_ledger_applies("/run/gsrun/slurm-77.4"));
    assert_false(gs_ledger_applies("/run/gsrun/job-803"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_live_jobs_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_job_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_and_garbage, setup, teardown),
        cmocka_unit_test(test_applies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
