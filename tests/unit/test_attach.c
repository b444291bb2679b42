/* SPDX-License-Identifier: BSD-3-Clause */
/* Each rank's MPS state (runtime/job/attach.c): which findings win, a
 * wrapper's child found by its parents, what a rank's program was started
 * with (a made-up /proc), the lines that explain it, and what status and
 * the summary count. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/job/attach.h"

static char root[] = "/tmp/gst-attach.XXXXXX";

/* root/PID/{stat,status,environ,comm} (its uid this test's, or uid when
 * >= 0), and root/PID/root<pipe>/control when seen. */
static void proc_as(int pid, int ppid, const char *env, size_t envlen, const char *pipe_seen,
                    long uid)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%d", root, pid);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%d/status", root, pid);
    f = fopen(path, "w");
    fprintf(f, "Name:\tprog\nUmask:\t0022\nUid:\t%ld\t%ld\t%ld\t%ld\n", uid, uid, uid, uid);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%d/stat", root, pid);
    f = fopen(path, "w");
    fprintf(f, "%d (a (weird) name) S %d 1 1\n", pid, ppid);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%d/comm", root, pid);
    f = fopen(path, "w");
    fprintf(f, "prog\x1b\n");
    fclose(f);
    if (env != NULL) {
        snprintf(path, sizeof(path), "%s/%d/environ", root, pid);
        f = fopen(path, "w");
        fwrite(env, 1, envlen, f);
        fclose(f);
    }
    if (pipe_seen != NULL) {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%d/root%s' && touch '%s/%d/root%s/control'", root,
                 pid, pipe_seen, root, pid, pipe_seen);
        assert_int_equal(system(cmd), 0);
    }
}

static void proc(int pid, int ppid, const char *env, size_t envlen, const char *pipe_seen)
{
    proc_as(pid, ppid, env, envlen, pipe_seen, (long)geteuid());
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(root) == NULL;
}

static int teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd);
}

static void test_states(void **state)
{
    gs_attach_t t;
    (void)state;
    assert_int_equal(gs_attach_init(&t, 4), 0);
    for (int r = 0; r < 4; r++) {
        gs_attach_registered(&t, r, 100 + r, -1, 0);
    }
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_CLIENT, 100, -1), 1);
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_CLIENT, 100, -1), 0); /* no change */
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_FAULTED, 100, -1), 1); /* a fault */
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_CLIENT, 100, -1), 0);  /* stays */
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_PLAIN, 100, 0), 0);
    /* A client with a worker's context without MPS: that is told. */
    assert_int_equal(gs_attach_set(&t, 1, GS_ATTACH_CLIENT, 101, -1), 1);
    assert_int_equal(gs_attach_set(&t, 1, GS_ATTACH_PLAIN, 101, 2), 1);
    assert_int_equal(gs_attach_set(&t, 1, GS_ATTACH_CLIENT, 101, -1), 0); /* NVML saw it */
    assert_int_equal(gs_attach_set(&t, 1, GS_ATTACH_NODEVICE, 101, -1), 0);
    assert_int_equal(t.r[1].gpu, 2);
    /* What a log line said follows what the daemon says later. */
    assert_int_equal(gs_attach_set(&t, 2, GS_ATTACH_CLIENT, 102, -1), 1);
    assert_int_equal(gs_attach_set(&t, 2, GS_ATTACH_NODEVICE, 102, -1), 1);
    assert_int_equal(gs_attach_set(&t, 9, GS_ATTACH_CLIENT, 1, -1), 0); /* no such rank */
    int c[GS_ATTACH_NSTATES];
    gs_attach_counts(&t, c);
    assert_int_equal(c[GS_ATTACH_UNSEEN], 1);
    assert_int_equal(c[GS_ATTACH_FAULTED], 1);
    assert_int_equal(c[GS_ATTACH_PLAIN], 1);
    assert_int_equal(c[GS_ATTACH_NODEVICE], 1);
    char buf[128];
    int entry[4] = {0, 0, 1, 0};
    gs_attach_status(&t, entry, 4, 0, buf, sizeof(buf));
    assert_string_equal(buf, "0/3 0:faulted 1:no-mps 3:unseen");
    gs_attach_status(&t, entry, 4, 1, buf, sizeof(buf));
    assert_string_equal(buf, "0/1 2:no-device");
    gs_attach_status(&t, entry, 4, 5, buf, sizeof(buf));
    assert_string_equal(buf, "");
    gs_attach_set(&t, 3, GS_ATTACH_CLIENT, 103, -1);
    gs_attach_ranks_in(&t, GS_ATTACH_CLIENT, buf, sizeof(buf));
    assert_string_equal(buf, "3");
    gs_attach_free(&t);
}

/* A client of a server gsrun did not give it (OTHER) and a rank blocked
 * on a wedged MPS (BLOCKED): counted and named apart, never as served. */
static void test_other_blocked(void **state)
{
    gs_attach_t t;
    char buf[128];
    (void)state;
    assert_int_equal(gs_attach_init(&t, 5), 0);
    for (int r = 0; r < 5; r++) {
        gs_attach_registered(&t, r, 200 + r, -1, 0);
    }
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_OTHER, 200, -1), 1);
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_OTHER, 200, -1), 0);
    /* Blocked only while it has no context; then what is seen. */
    assert_int_equal(gs_attach_set(&t, 1, GS_ATTACH_BLOCKED, 201, -1), 1);
    assert_int_equal(gs_attach_set(&t, 1, GS_ATTACH_BLOCKED, 201, -1), 0);
    assert_int_equal(gs_attach_set(&t, 2, GS_ATTACH_BLOCKED, 202, -1), 1);
    assert_int_equal(gs_attach_set(&t, 2, GS_ATTACH_CLIENT, 202, -1), 1);
    assert_int_equal(gs_attach_set(&t, 2, GS_ATTACH_BLOCKED, 202, -1), 0); /* has a context */
    assert_int_equal(t.r[2].state, GS_ATTACH_CLIENT);
    assert_int_equal(gs_attach_set(&t, 3, GS_ATTACH_BLOCKED, 203, -1), 1);
    assert_int_equal(gs_attach_set(&t, 3, GS_ATTACH_PLAIN, 203, 0), 1);
    assert_int_equal(gs_attach_set(&t, 0, GS_ATTACH_BLOCKED, 200, -1), 0); /* a client elsewhere */
    /* A client elsewhere that its daemon lists later is gsrun's. */
    assert_int_equal(gs_attach_set(&t, 4, GS_ATTACH_OTHER, 204, -1), 1);
    assert_int_equal(gs_attach_set(&t, 4, GS_ATTACH_CLIENT, 204, -1), 1);
    int c[GS_ATTACH_NSTATES];
    gs_attach_counts(&t, c);
    assert_int_equal(c[GS_ATTACH_OTHER], 1);
    assert_int_equal(c[GS_ATTACH_BLOCKED], 1);
    assert_int_equal(c[GS_ATTACH_CLIENT], 2);
    assert_int_equal(c[GS_ATTACH_PLAIN], 1);
    int entry[5] = {0, 0, 0, 0, 0};
    gs_attach_status(&t, entry, 5, 0, buf, sizeof(buf));
    assert_string_equal(buf, "2/5 0:other 1:blocked 3:no-mps");
    assert_string_equal(gs_attach_name(GS_ATTACH_OTHER), "other");
    assert_string_equal(gs_attach_name(GS_ATTACH_BLOCKED), "blocked");
    assert_string_equal(gs_attach_name(GS_ATTACH_NSTATES), "?");
    unsigned char pick[5] = {1, 1, 0, 1, 0};
    gs_attach_ranks_where(&t, pick, buf, sizeof(buf));
    assert_string_equal(buf, "0-1,3");
    gs_attach_free(&t);
}

static void test_ranges(void **state)
{
    gs_attach_t t;
    char buf[64];
    (void)state;
    assert_int_equal(gs_attach_init(&t, 7), 0);
    for (int r = 0; r < 7; r++) {
        gs_attach_registered(&t, r, 10 + r, -1, 0);
        if (r != 3) {
            gs_attach_set(&t, r, GS_ATTACH_PLAIN, 10 + r, 0);
        }
    }
    gs_attach_ranks_in(&t, GS_ATTACH_PLAIN, buf, sizeof(buf));
    assert_string_equal(buf, "0-2,4-6");
    gs_attach_free(&t);
}

/* A wrapper's child (a grandchild too) is its rank's; a stranger is not. */
static void test_rank_of(void **state)
{
    gs_attach_t t;
    (void)state;
    proc(500, 400, NULL, 0, NULL);
    proc(501, 500, NULL, 0, NULL);
    proc(502, 501, NULL, 0, NULL);
    proc(600, 1, NULL, 0, NULL);
    assert_int_equal(gs_attach_init(&t, 2), 0);
    gs_attach_registered(&t, 1, 500, -1, 0);
    assert_int_equal(gs_attach_rank_of(&t, 500, root), 1);
    assert_int_equal(gs_attach_rank_of(&t, 502, root), 1);
    assert_int_equal(gs_attach_rank_of(&t, 600, root), -1);
    assert_int_equal(gs_attach_rank_of(&t, 777, root), -1); /* gone */
    gs_attach_free(&t);
}

/* root/PID/stat with its parent and start time (field 22), as the kernel
 * writes it. */
static void proc_started(int pid, int ppid, unsigned long long start)
{
    char path[512];
    proc(pid, ppid, NULL, 0, NULL);
    snprintf(path, sizeof(path), "%s/%d/stat", root, pid);
    FILE *f = fopen(path, "w");
    fprintf(f, "%d (prog) S %d 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 %llu 1 1\n", pid, ppid,
            start);
    fclose(f);
}

/* A rank is its process, not its number: once it exited, its PID held by
 * another process (or one of that process's children) is nobody's. */
static void test_identity(void **state)
{
    gs_attach_t t;
    char path[512];
    (void)state;
    proc_started(800, 1, 5000);
    proc_started(801, 800, 5100);
    assert_int_equal(gs_attach_init(&t, 2), 0);
    gs_attach_registered(&t, 0, 800, -1, 0);
    gs_attach_identify(&t, 0, root);
    assert_true(t.r[0].start == 5000);
    assert_int_equal(gs_attach_rank_of(&t, 801, root), 0);
    proc_started(800, 1, 9000); /* the PID reused */
    assert_int_equal(gs_attach_rank_of(&t, 800, root), -1);
    assert_int_equal(gs_attach_rank_of(&t, 801, root), -1);
    assert_int_equal(gs_attach_rank_exited(&t, 800, root), -1); /* held by another */
    proc_started(800, 1, 5000);
    t.r[0].gone = 1; /* exited: never matched again */
    assert_int_equal(gs_attach_rank_of(&t, 800, root), -1);
    snprintf(path, sizeof(path), "rm -rf '%s/800'", root);
    assert_int_equal(system(path), 0);
    assert_int_equal(gs_attach_rank_exited(&t, 800, root), 0); /* its log line's */
    assert_int_equal(gs_attach_rank_exited(&t, 801, root), -1); /* runs */
    gs_attach_free(&t);
}

/* What the program was started with gives the cause, and what to do. */
static void test_causes(void **state)
{
    gs_attach_rank_t r;
    char line[1600];
    const char *pipe = "/tmp/gsrun-1/g0";
    (void)state;
    /* The pipe dir removed by a wrapper. */
    static const char env1[] = "A=1\0CUDA_VISIBLE_DEVICES=0\0";
    proc(700, 1, env1, sizeof(env1) - 1, NULL);
    memset(&r, 0, sizeof(r));
    r.pid = 700;
    r.state = GS_ATTACH_PLAIN;
    r.gpu = 1;
    gs_attach_read_env(700, root, pipe, &r.env);
    assert_true(r.env.taken);
    assert_string_equal(r.env.prog, "prog?");
    gs_attach_explain(&r, 3, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "rank 3 (prog?, pid 700) ran on GPU 1 without MPS: its program "
                                 "was started without CUDA_MPS_PIPE_DIRECTORY (gsrun set "
                                 "/tmp/gsrun-1/g0"));
    /* A client of another server: the pipe dir its program saw named. */
    r.state = GS_ATTACH_OTHER;
    gs_attach_explain(&r, 3, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "rank 3 (prog?, pid 700) is an MPS client of a server gsrun did "
                                 "not give it: its program was started without "
                                 "CUDA_MPS_PIPE_DIRECTORY (so CUDA took /tmp/nvidia-mps"));
    /* Changed. */
    static const char env2[] = "CUDA_MPS_PIPE_DIRECTORY=/else\x07where\0";
    proc(701, 1, env2, sizeof(env2) - 1, NULL);
    memset(&r, 0, sizeof(r));
    r.gpu = -1; /* not known which */
    r.pid = 701;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(701, root, pipe, &r.env);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "on a GPU without MPS: its program was started with "
                                 "CUDA_MPS_PIPE_DIRECTORY=/else?where, not the /tmp/gsrun-1/g0"));
    r.state = GS_ATTACH_OTHER;
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "a server gsrun did not give it: its program saw "
                                 "CUDA_MPS_PIPE_DIRECTORY=/else?where (a wrapper's or a "
                                 "hand-started daemon's), not the /tmp/gsrun-1/g0 gsrun gave it; "
                                 "that server's share"));
    r.env.taken = 0;
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "its program's environment could not be read (gsrun gave it "
                                 "/tmp/gsrun-1/g0)"));
    /* Right, but hidden where it runs (a container). */
    static const char env3[] = "CUDA_MPS_PIPE_DIRECTORY=/tmp/gsrun-1/g0\0";
    proc(702, 1, env3, sizeof(env3) - 1, NULL);
    memset(&r, 0, sizeof(r));
    r.pid = 702;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(702, root, pipe, &r.env);
    assert_int_equal(r.env.pipe_seen, 0);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "is not there where it runs (a container or mount namespace "
                                 "hides it): bind /tmp/gsrun-1 into it at the same path (podman "
                                 "run -v /tmp/gsrun-1:/tmp/gsrun-1, ch-run -b "
                                 "/tmp/gsrun-1:/tmp/gsrun-1, apptainer exec -B /tmp/gsrun-1, srun "
                                 "--container-mounts=/tmp/gsrun-1:/tmp/gsrun-1 (Pyxis), enroot "
                                 "start -m /tmp/gsrun-1:/tmp/gsrun-1)"));
    /* The same in Charliecloud (its marker): its own option alone. */
    static const char env5[] = "CH_RUNNING=Weird Al Yankovic\0"
                               "CUDA_MPS_PIPE_DIRECTORY=/tmp/gsrun-1/g0\0";
    proc(705, 1, env5, sizeof(env5) - 1, NULL);
    memset(&r, 0, sizeof(r));
    r.pid = 705;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(705, root, pipe, &r.env);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "(its Charliecloud container hides it): bind /tmp/gsrun-1 into "
                                 "it at the same path (ch-run -b /tmp/gsrun-1:/tmp/gsrun-1)"));
    /* Another user's process (a wrapper or container that changed user):
     * that is the cause, whatever else is true. */
    proc_as(706, 1, env3, sizeof(env3) - 1, NULL, (long)geteuid() + 1);
    memset(&r, 0, sizeof(r));
    r.pid = 706;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(706, root, pipe, &r.env);
    assert_int_equal(r.env.uid, (long)geteuid() + 1);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "without MPS: it runs as uid "));
    assert_non_null(strstr(line, "MPS takes clients of its own user only"));
    /* A set-uid program (its effective uid another's), unreadable. */
    proc_as(707, 1, NULL, 0, NULL, (long)geteuid());
    snprintf(line, sizeof(line), "%s/707/status", root);
    FILE *f = fopen(line, "w");
    fprintf(f, "Name:\tprog\nUid:\t%ld\t4242\t4242\t4242\n", (long)geteuid());
    fclose(f);
    memset(&r, 0, sizeof(r));
    r.pid = 707;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(707, root, pipe, &r.env);
    assert_int_equal(r.env.euid, 4242);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "its program runs as uid 4242 (set-uid"));
    /* The pipe variable past the first 64 KiB of a large environment. */
    size_t big = 300 * 1024;
    char *env6 = malloc(big + 64);
    memset(env6, 'x', big);
    memcpy(env6, "JUNK=", 5);
    env6[big - 1] = '\0';
    size_t n6 = big + (size_t)sprintf(env6 + big, "CUDA_MPS_PIPE_DIRECTORY=/else") + 1;
    proc(708, 1, env6, n6, NULL);
    free(env6);
    memset(&r, 0, sizeof(r));
    r.pid = 708;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(708, root, pipe, &r.env);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "started with CUDA_MPS_PIPE_DIRECTORY=/else, not the"));
    /* Some of a rank's contexts without MPS (its workers'): how many. */
    r.nctx = 4;
    r.nplain = 2;
    r.gpu = 1;
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "rank 0 (prog?, pid 708): 2 of its 4 GPU contexts ran on GPU 1 "
                                 "without MPS"));
    /* Right and seen: the cause is not known, and said so. */
    proc(703, 1, env3, sizeof(env3) - 1, pipe);
    memset(&r, 0, sizeof(r));
    r.pid = 703;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(703, root, pipe, &r.env);
    assert_int_equal(r.env.pipe_seen, 1);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "cause unknown"));
    /* Unreadable (CUDA started before the first look): read before stays. */
    memset(&r, 0, sizeof(r));
    r.pid = 799;
    r.state = GS_ATTACH_PLAIN;
    gs_attach_read_env(799, root, pipe, &r.env);
    assert_false(r.env.taken);
    gs_attach_explain(&r, 0, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "why is unknown"));
    /* A wrapper's CUDA_VISIBLE_DEVICES. */
    static const char env4[] = "CUDA_MPS_PIPE_DIRECTORY=/tmp/gsrun-1/g0\0CUDA_VISIBLE_DEVICES=1\0";
    proc(704, 1, env4, sizeof(env4) - 1, pipe);
    memset(&r, 0, sizeof(r));
    r.pid = 704;
    r.state = GS_ATTACH_NODEVICE;
    gs_attach_read_env(704, root, pipe, &r.env);
    gs_attach_explain(&r, 1, pipe, "0", line, sizeof(line));
    assert_non_null(strstr(line, "rank 1 (prog?, pid 704): its CUDA found no device: "
                                 "CUDA_VISIBLE_DEVICES was changed to '1' after gsrun set it to "
                                 "'0'"));
    assert_non_null(strstr(line, "its server's GPU as device 0"));
}

/* CUDA started: its library mapped; a program without it is not. */
static void test_cuda_started(void **state)
{
    char path[300];
    FILE *f;
    (void)state;
    proc(800, 1, NULL, 0, NULL);
    snprintf(path, sizeof(path), "%s/800/maps", root);
    f = fopen(path, "w");
    fprintf(f, "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n");
    fclose(f);
    assert_int_equal(gs_attach_cuda_started(800, root), 0);
    f = fopen(path, "a");
    fprintf(f, "7f02-7f03 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n");
    fclose(f);
    assert_int_equal(gs_attach_cuda_started(800, root), 1);
    assert_int_equal(gs_attach_cuda_started(801, root), 0); /* gone */
    assert_int_equal(gs_attach_cuda_started(getpid(), "/proc"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states),       cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_rank_of),      cmocka_unit_test(test_causes),
        cmocka_unit_test(test_identity),     cmocka_unit_test(test_other_blocked),
        cmocka_unit_test(test_cuda_started),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
