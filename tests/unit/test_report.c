/* SPDX-License-Identifier: BSD-3-Clause */
/* The report alone: lines and problems, the timeline, each sink, delivered
 * once, and rank 0's stderr as a sink once it can be opened. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/agent/report.h"

static void drain(int fd, char *buf, size_t len)
{
    ssize_t n, got = 0;
    while ((n = read(fd, buf + got, len - 1 - (size_t)got)) > 0) {
        got += n;
    }
    buf[got] = '\0';
}

static void test_lines_and_problems(void **state)
{
    static gs_report_t r;
    (void)state;
    gs_report_init(&r, "n1", 0, 0);
    gs_report_add(&r, 0, "MPS ready in %d ms", 12);
    gs_report_add(&r, 1, "GPU %d: died", 0);
    assert_int_equal(r.problems, 1);
    assert_string_equal(r.text, "node n1: MPS ready in 12 ms\nproblem: node n1: GPU 0: died\n");
    gs_report_clear(&r);
    assert_int_equal(r.problems, 0);
    assert_string_equal(r.text, "");
}

static void test_full_report_stays_bounded(void **state)
{
    static gs_report_t r;
    (void)state;
    gs_report_init(&r, "n1", 0, 0);
    for (int i = 0; i < 2000; i++) {
        gs_report_add(&r, 1, "line %d with some text to fill the report", i);
    }
    assert_true(r.len < sizeof(r.text));
    assert_int_equal(r.text[r.len], '\0');
}

static void test_timeline(void **state)
{
    static gs_report_t r;
    (void)state;
    gs_report_init(&r, "n1", 0, 0);
    gs_report_mark(&r, "agent");
    gs_report_mark(&r, "planned");
    assert_non_null(strstr(r.timeline, "agent "));
    assert_non_null(strstr(r.timeline, ", planned "));
}

/* Lines to an FD: without -v only the problems, each prefixed "gsrun: ";
 * delivered once; the FD is closed. */
static void test_fd_sink_filters_and_delivers_once(void **state)
{
    static gs_report_t r;
    int p[2];
    char buf[4096];
    (void)state;
    for (int verbose = 0; verbose <= 1; verbose++) {
        assert_int_equal(pipe(p), 0);
        gs_report_init(&r, "n1", verbose, 0);
        gs_report_to_fd(&r, GS_SINK_LEADER_FD, p[1]);
        gs_report_add(&r, 0, "served 4 of 4 ranks");
        gs_report_add(&r, 1, "GPU 0: escalated");
        gs_report_deliver(&r);
        gs_report_deliver(&r);
        assert_int_equal(r.fd, -1);
        drain(p[0], buf, sizeof(buf));
        close(p[0]);
        assert_string_equal(buf, verbose ? "gsrun: node n1: served 4 of 4 ranks\n"
                                           "gsrun: problem: node n1: GPU 0: escalated\n"
                                         : "gsrun: problem: node n1: GPU 0: escalated\n");
    }
}

static void test_file_sink(void **state)
{
    static gs_report_t r;
    char dir[] = "/tmp/gst-report.XXXXXX", path[600], buf[4096];
    (void)state;
    assert_non_null(mkdtemp(dir));
    gs_report_init(&r, "n1", 0, 0);
    gs_report_to_file(&r, dir);
    gs_report_add(&r, 0, "served");
    gs_report_add(&r, 1, "bad");
    gs_report_deliver(&r);
    gs_report_file_path(dir, "n1", path, sizeof(path));
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    drain(fd, buf, sizeof(buf));
    close(fd);
    assert_string_equal(buf, "gsrun-report problems=1 fault_end=0\nnode n1: served\nproblem: node n1: bad\n");
    gs_report_drop_job_dir(dir, "n1");
    assert_int_equal(access(dir, F_OK), -1);
}

static void test_rank0_sink(void **state)
{
    static gs_report_t r;
    (void)state;
    gs_report_init(&r, "n1", 0, 0);
    gs_report_to_fd(&r, GS_SINK_RANK0, -1);
    assert_int_equal(gs_report_open_rank0(&r, 0, 0, 1000), 50); /* not registered yet */
    /* Our own stderr stands for rank 0's: opened, the sink is that FD. */
    assert_int_equal(gs_report_open_rank0(&r, getpid(), 0, 1000), -1);
    assert_int_equal(r.sink, GS_SINK_LEADER_FD);
    assert_true(r.fd >= 0);
    gs_report_close(&r);
    /* A rank 0 that is gone: nobody to tell. */
    gs_report_to_fd(&r, GS_SINK_RANK0, -1);
    assert_int_equal(gs_report_open_rank0(&r, 999999999, 0, 1000), -1);
    assert_int_equal(r.sink, GS_SINK_NOWHERE);
    gs_report_deliver(&r); /* nothing to do, nothing breaks */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_and_problems),
        cmocka_unit_test(test_full_report_stays_bounded),
        cmocka_unit_test(test_timeline),
        cmocka_unit_test(test_fd_sink_filters_and_delivers_once),
        cmocka_unit_test(test_file_sink),
        cmocka_unit_test(test_rank0_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
