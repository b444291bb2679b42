/* SPDX-License-Identifier: BSD-3-Clause */
/* An MPS server's health from its log: the lines of a real fault (driver
 * 580, H200: two victims and the faulting client, which stayed alive), a
 * second fault, the list that ends without a line after it, a client that
 * died unlogged, and following a file as it grows. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "runtime/gpu/mps_health.h"

/* As the H200's control daemon printed them (control.out, 2026-11-27). */
static const char *const fault_lines[] = {
    "[2026-11-27 10:43:01.069 Server   553] Status of client {PID: 562, Context ID: 1} is ACTIVE",
    "[2026-11-27 10:43:03.409 Server   553] Client {PID: 560, Context: 1} encountered a fatal GPU error.",
    "[2026-11-27 10:43:03.409 Server   553] Server is handling a fatal GPU error.",
    "[2026-11-27 10:43:03.410 Server   553] Client {PID: 560, Context ID: 1} on device 0 to be torn down",
    "[2026-11-27 10:43:03.410 Server   553] Client {PID: 562, Context ID: 1} on device 0 to be torn down",
    "[2026-11-27 10:43:03.410 Server   553] All clients belonging to error trigging process 560 will be torn down",
    "[2026-11-27 10:43:03.410 Server   553] The following devices will be reset:",
    "[2026-11-27 10:43:03.410 Server   553] 0",
    "[2026-11-27 10:43:03.410 Server   553] The following client process have a sticky error set:",
    "[2026-11-27 10:43:03.410 Server   553] 560",
    "[2026-11-27 10:43:03.410 Server   553] 562",
    "[2026-11-27 10:43:03.410 Server   553] 561",
    "[2026-11-27 10:43:03.432 Server   553] Server failed to recevie command with status 806, assuming client {PID: 560, Context ID: 1} exit",
    NULL};

static int feed(gs_mps_health_t *h, const char *const *lines)
{
    int ev = 0;
    for (const char *const *l = lines; *l != NULL; l++) {
        ev |= gs_mps_health_line(h, *l);
    }
    return ev;
}

/* A client's life as the H200's control daemon printed it (driver 580,
 * 2026-11-28): an MPS client, one whose CUDA_VISIBLE_DEVICES named no device
 * of the server (its own line), and their ends. */
static const char *const client_lines[] = {
    "[2026-11-28 01:44:49.587 Control   783] NEW CLIENT 796 from user 0: Server already exists",
    "[2026-11-28 01:44:49.588 Server   789] Client {PID: 796, Context ID: 0} connected",
    "[2026-11-28 01:44:49.612 Server   789] Client {PID: 796, Context ID: 1} connected",
    "[2026-11-28 01:44:49.612 Server   789] Status of client {PID: 796, Context ID: 1} is ACTIVE",
    "[2026-11-28 01:44:52.719 Server   789] Client process 796 disconnected",
    "[2026-11-28 01:44:55.908 Server   789] Client {PID: 825, Context ID: 0} connected",
    "[2026-11-28 01:44:55.915 Client   825] Invalid CUDA_VISIBLE_DEVICES.",
    "[2026-11-28 01:44:55.915 Client   825] Client requested 1 which is not a valid GPU ID in the MPS visible set of devices",
    "[2026-11-28 01:44:56.418 Server   789] Client process 825 disconnected",
    NULL};

static void test_client_events(void **state)
{
    gs_mps_health_t h;
    pid_t pids[GS_MPS_HEALTH_EVENTS];
    int kinds[GS_MPS_HEALTH_EVENTS];
    (void)state;
    gs_mps_health_init(&h);
    assert_int_equal(feed(&h, client_lines), 0); /* no fault */
    int n = gs_mps_health_take(&h, pids, kinds, GS_MPS_HEALTH_EVENTS);
    assert_int_equal(n, 4);
    assert_int_equal(pids[0], 796);
    assert_int_equal(kinds[0], GS_MPS_CLIENT_ACTIVE);
    assert_int_equal(pids[1], 796);
    assert_int_equal(kinds[1], GS_MPS_CLIENT_GONE);
    assert_int_equal(pids[2], 825);
    assert_int_equal(kinds[2], GS_MPS_CLIENT_NODEVICE);
    assert_int_equal(pids[3], 825);
    assert_int_equal(kinds[3], GS_MPS_CLIENT_GONE);
    assert_int_equal(gs_mps_health_take(&h, pids, kinds, GS_MPS_HEALTH_EVENTS), 0); /* taken */
    /* Past the queue's room the newest are dropped, and counted. */
    for (int i = 0; i < GS_MPS_HEALTH_EVENTS + 5; i++) {
        gs_mps_health_line(&h, "[T Server 1] Status of client {PID: 42, Context ID: 1} is ACTIVE");
    }
    assert_int_equal(gs_mps_health_take(&h, pids, kinds, 3), 3);
    assert_int_equal(h.ev_dropped, 5);
}

/* "560 562 561": the fault's clients (hit, or held), in MPS's order. */
static void join_pids(const pid_t *pids, int n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k + 12 < len; i++) {
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? " " : "", (int)pids[i]);
    }
}

static void test_real_fault(void **state)
{
    gs_mps_health_t h;
    char pids[64];
    (void)state;
    gs_mps_health_init(&h);
    assert_int_equal(feed(&h, fault_lines), GS_MPS_EV_FAULT | GS_MPS_EV_LISTED);
    assert_true(h.fault);
    assert_int_equal(h.faults, 1);
    assert_string_equal(h.at, "2026-11-27 10:43:03.409");
    assert_int_equal(h.named, 560);
    join_pids(h.hit, h.nhit, pids, sizeof(pids));
    assert_string_equal(pids, "560 562 561"); /* "0", the device, is no client */
    assert_int_equal(h.nheld, 3);
    /* The victims go; the faulting client holds the fault. */
    assert_int_equal(gs_mps_health_line(&h, "[2026-11-27 10:43:03.464 Server   553] Client process 561 disconnected"), 0);
    assert_int_equal(gs_mps_health_line(&h, "[2026-11-27 10:43:03.471 Server   553] Client process 560 disconnected"), 0);
    assert_true(h.fault);
    join_pids(h.held, h.nheld, pids, sizeof(pids));
    assert_string_equal(pids, "562");
    /* A client that was never in the list changes nothing. */
    assert_int_equal(gs_mps_health_line(&h, "[x Server 553] Client process 999 disconnected"), 0);
    assert_int_equal(gs_mps_health_line(&h, "[2026-11-27 10:43:15.505 Server   553] Client process 562 disconnected"),
                     GS_MPS_EV_RECOVERED);
    assert_false(h.fault);
    /* A second fault is counted anew, with its own time and list. */
    assert_int_equal(gs_mps_health_line(&h, "[2026-11-27 11:00:00.000 Server   553] Server is handling a fatal GPU error."),
                     GS_MPS_EV_FAULT);
    assert_int_equal(h.faults, 2);
    assert_int_equal(h.named, 0);
    assert_string_equal(h.at, "2026-11-27 11:00:00.000");
    assert_int_equal(h.nhit, 0);
    /* The log is the user's to write: a time field with a terminal's
     * escape sequence keeps a time's characters only. */
    gs_mps_health_init(&h);
    assert_int_equal(gs_mps_health_line(&h, "[\033[2J\033[31m 12:00:00.000 Server   553] Server is handling a fatal GPU error."),
                     GS_MPS_EV_FAULT);
    for (const char *c = h.at; *c != '\0'; c++) {
        assert_true(strchr("0123456789 :.-", *c) != NULL);
    }
}

static void test_list_settles(void **state)
{
    gs_mps_health_t h;
    (void)state;
    gs_mps_health_init(&h);
    const char *const lines[] = {"[2026-11-28 t1 Server 1] Server is handling a fatal GPU error.",
                                 "[2026-11-28 t1 Server 1] The following client process have a sticky error set:",
                                 "[2026-11-28 t1 Server 1] 77", NULL};
    assert_int_equal(feed(&h, lines), GS_MPS_EV_FAULT);
    assert_false(h.listed);
    assert_int_equal(gs_mps_health_settle(&h), GS_MPS_EV_LISTED);
    assert_int_equal(gs_mps_health_settle(&h), 0);
    assert_int_equal(h.nhit, 1);
    assert_string_equal(h.at, "2026-11-28 1"); /* a time's characters only */
}

/* A fault the control daemon denies is forgotten: the next one is counted
 * as the first, and nothing of the denied one stays. */
static void test_dismiss(void **state)
{
    gs_mps_health_t h;
    (void)state;
    gs_mps_health_init(&h);
    feed(&h, fault_lines);
    assert_int_equal(h.faults, 1);
    gs_mps_health_dismiss(&h);
    assert_int_equal(h.faults, 0);
    assert_false(h.fault);
    assert_false(h.listed);
    assert_int_equal(h.nhit, 0);
    assert_int_equal(h.nheld, 0);
    assert_string_equal(h.at, "");
    assert_int_equal(feed(&h, fault_lines) & GS_MPS_EV_FAULT, GS_MPS_EV_FAULT);
    assert_int_equal(h.faults, 1);
    assert_int_equal(h.nhit, 3);
}

static int none_alive(pid_t p)
{
    return p == 0;
}

static void test_prune(void **state)
{
    gs_mps_health_t h;
    (void)state;
    gs_mps_health_init(&h);
    feed(&h, fault_lines);
    assert_int_equal(gs_mps_health_prune(&h, none_alive), GS_MPS_EV_RECOVERED);
    assert_false(h.fault);
    assert_int_equal(h.nheld, 0);
    assert_int_equal(h.nhit, 3); /* who was hit stays told */
}

static void test_follow(void **state)
{
    gs_mps_health_t h;
    char path[] = "/tmp/gs-health-XXXXXX";
    (void)state;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    gs_mps_health_init(&h);
    assert_int_equal(gs_mps_health_follow(&h, path), 0);
    /* A line written in two pieces is taken once whole. */
    const char *a = "[d t Server 5] Server is handling a fat";
    assert_int_equal(write(fd, a, strlen(a)), (ssize_t)strlen(a));
    assert_int_equal(gs_mps_health_follow(&h, path), 0);
    const char *b = "al GPU error.\n[d t Server 5] The following client process have a sticky error set:\n[d t Server 5] 42\n";
    assert_int_equal(write(fd, b, strlen(b)), (ssize_t)strlen(b));
    assert_int_equal(gs_mps_health_follow(&h, path), GS_MPS_EV_FAULT);
    const char *c = "[d t Server 5] Client process 42 disconnected\n";
    assert_int_equal(write(fd, c, strlen(c)), (ssize_t)strlen(c));
    assert_int_equal(gs_mps_health_follow(&h, path), GS_MPS_EV_LISTED | GS_MPS_EV_RECOVERED);
    assert_int_equal(gs_mps_health_follow(&h, path), 0);
    /* Not followed through a link. */
    char link[64];
    snprintf(link, sizeof(link), "%s.l", path);
    assert_int_equal(symlink(path, link), 0);
    gs_mps_health_t h2;
    gs_mps_health_init(&h2);
    assert_int_equal(gs_mps_health_follow(&h2, link), 0);
    assert_int_equal(h2.offset, 0);
    unlink(link);
    /* Nor through a directory that is a link: a log dir put in the place
     * of the daemon's (a user's forged log) is not read. */
    char dir[] = "/tmp/gs-healthd-XXXXXX", dlink[64], in_link[96], file[96];
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/control.out", dir);
    int f2 = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(f2 >= 0);
    const char *forged = "[d t Server 5] Server is handling a fatal GPU error.\n";
    assert_int_equal(write(f2, forged, strlen(forged)), (ssize_t)strlen(forged));
    close(f2);
    snprintf(dlink, sizeof(dlink), "%s.l", dir);
    assert_int_equal(symlink(dir, dlink), 0);
    snprintf(in_link, sizeof(in_link), "%s/control.out", dlink);
    gs_mps_health_init(&h2);
    assert_int_equal(gs_mps_health_follow(&h2, in_link), 0);
    assert_int_equal(h2.offset, 0);
    gs_mps_health_init(&h2); /* the dir itself is read */
    assert_int_equal(gs_mps_health_follow(&h2, file), GS_MPS_EV_FAULT);
    unlink(dlink);
    unlink(file);
    rmdir(dir);
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_events),
        cmocka_unit_test(test_real_fault),
        cmocka_unit_test(test_list_settles),
        cmocka_unit_test(test_dismiss),
        cmocka_unit_test(test_prune),
        cmocka_unit_test(test_follow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
