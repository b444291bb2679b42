/* SPDX-License-Identifier: BSD-3-Clause */
/* The lease's lines, against golden strings: a job's agent and the node
 * service of another gsrun build must read each other byte for byte, so a
 * format gives exactly the golden line, a parse of it gives the fields
 * back, and a line with a wrong word or number is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "runtime/wire/lease.h"
#include "runtime/wire/protocol.h"

/* The goldens: what the wire carries, byte for byte. */
#define GOLD_LEASE "lease 30 mpirun.4242 2 GPU-aa11 3 GPU-bb22 1\n"
#define GOLD_LEASED "ok 0 5\n"
#define GOLD_REFUSAL "error the node's shared MPS serves as many jobs as it can\n"
#define GOLD_GPUS "gpus 2 12040 0 -\n"
#define GOLD_GPUS_NONE "gpus 0 12040 1 no GPU: NVML found none\n"
#define GOLD_LOST "lost 3 signal 9\n"
#define GOLD_LOST_WEDGED "lost 1 wedged 9\n"
#define GOLD_FAULT "fault 2 2026-11-29T13:05:01 4711 4712\n"
#define GOLD_FAULT_NONE "fault 0 ? \n"
#define GOLD_RENEW "renew 2\n"
#define GOLD_WEDGED "wedged 4\n"
#define GOLD_WEDGED_TOLD "wedged GPU 0 (GPU-aa11): the user's shared MPS server was wedged\n"

static void test_lease(void **state)
{
    gs_lease_req_t q, r;
    char buf[512];
    (void)state;
    memset(&q, 0, sizeof(q));
    q.linger_s = 30;
    strcpy(q.job, "mpirun.4242");
    q.n = 2;
    strcpy(q.uuid[0], "GPU-aa11");
    q.clients[0] = 3;
    strcpy(q.uuid[1], "GPU-bb22");
    q.clients[1] = 1;
    assert_int_equal(gs_lease_fmt_lease(buf, sizeof(buf), &q), strlen(GOLD_LEASE));
    assert_string_equal(buf, GOLD_LEASE);
    assert_int_equal(gs_lease_parse_lease(GOLD_LEASE, GS_MAX_GPUS, &r), 0);
    assert_memory_equal(&q, &r, sizeof(q));
    /* Too small a buffer, a job name with a space: never a cut line. */
    assert_int_equal(gs_lease_fmt_lease(buf, strlen(GOLD_LEASE), &q), -ENOSPC);
    strcpy(q.job, "two words");
    assert_int_equal(gs_lease_fmt_lease(buf, sizeof(buf), &q), -EINVAL);
    /* A wrong word, a count out of range, a missing pair, more GPUs than max. */
    assert_int_equal(gs_lease_parse_lease("lease_30 j 1 GPU-a 1\n", 64, &r), -EINVAL);
    assert_int_equal(gs_lease_parse_lease("lease 30 j 1 GPU-a 0\n", 64, &r), -EINVAL);
    assert_int_equal(gs_lease_parse_lease("lease 30 j 2 GPU-a 1\n", 64, &r), -EINVAL);
    assert_int_equal(gs_lease_parse_lease(GOLD_LEASE, 1, &r), -EINVAL);
    assert_int_equal(gs_lease_parse_lease("lease -1 j 1 GPU-a 1\n", 64, &r), -EINVAL);
}

static void test_leased_and_refusal(void **state)
{
    int server[2] = {0, 5}, back[2];
    const char *why;
    char buf[128];
    (void)state;
    assert_int_equal(gs_lease_fmt_leased(buf, sizeof(buf), 2, server), strlen(GOLD_LEASED));
    assert_string_equal(buf, GOLD_LEASED);
    assert_int_equal(gs_lease_parse_leased(GOLD_LEASED, 2, 64, back), 0);
    assert_memory_equal(server, back, sizeof(server));
    assert_int_equal(gs_lease_parse_leased("ok 0 64\n", 2, 64, back), -EINVAL);
    assert_int_equal(gs_lease_parse_leased("ok 0\n", 2, 64, back), -EINVAL);
    assert_int_equal(gs_lease_parse_leased("no 0 5\n", 2, 64, back), -EINVAL);
    assert_int_equal(gs_lease_fmt_leased(buf, 5, 2, server), -ENOSPC);

    assert_int_equal(gs_lease_fmt_refusal(buf, sizeof(buf),
                                          "the node's shared MPS serves as many jobs as it can"),
                     strlen(GOLD_REFUSAL));
    assert_string_equal(buf, GOLD_REFUSAL);
    assert_int_equal(gs_lease_parse_refusal(GOLD_REFUSAL, &why), 0);
    assert_string_equal(why, GOLD_REFUSAL + 6);
    assert_int_equal(gs_lease_parse_refusal("errors x\n", &why), -EINVAL);
    assert_int_equal(gs_lease_parse_refusal(GOLD_LEASED, &why), -EINVAL);
}

static void test_gpus(void **state)
{
    char buf[128], reason[64];
    const char *body;
    int count, cuda, beyond;
    (void)state;
    /* The verbs and the one-word lines, as the service's table and
     * `gsrun stop` send them. */
    assert_string_equal(GS_LEASE_GPUS_ASK, "gpus\n");
    assert_string_equal(GS_LEASE_STOP, "stop\n");
    assert_string_equal(GS_LEASE_STOP, GS_PROTO_STOP);
    assert_string_equal(GS_LEASE_RETIRE, "retire\n");
    assert_string_equal(GS_LEASE_VERB_LEASE " " GS_LEASE_VERB_GPUS " " GS_LEASE_VERB_RETIRE,
                        "lease gpus retire");

    assert_int_equal(gs_lease_fmt_gpus(buf, sizeof(buf), 2, 12040, 0, "ignored"),
                     strlen(GOLD_GPUS));
    assert_string_equal(buf, GOLD_GPUS);
    assert_int_equal(gs_lease_fmt_gpus(buf, sizeof(buf), 0, 12040, 1, "no GPU: NVML found none"),
                     strlen(GOLD_GPUS_NONE));
    assert_string_equal(buf, GOLD_GPUS_NONE);
    const char *answer = GOLD_GPUS "0 GPU-aa11 ...\n1 GPU-bb22 ...\n";
    assert_int_equal(
        gs_lease_parse_gpus(answer, &count, &cuda, &beyond, reason, sizeof(reason), &body), 0);
    assert_int_equal(count, 2);
    assert_int_equal(cuda, 12040);
    assert_int_equal(beyond, 0);
    assert_string_equal(reason, "-");
    assert_ptr_equal(body, answer + strlen(GOLD_GPUS) - 1);
    assert_int_equal(
        gs_lease_parse_gpus(GOLD_GPUS_NONE, &count, &cuda, &beyond, reason, sizeof(reason), &body),
        0);
    assert_string_equal(reason, "no GPU: NVML found none");
    assert_int_equal(beyond, 1);
    assert_int_equal(gs_lease_parse_gpus("gpus 65 12040 0 -\n", &count, &cuda, &beyond, reason,
                                         sizeof(reason), &body),
                     -EINVAL);
    assert_int_equal(gs_lease_parse_gpus("gpu 2 12040 0 -\n", &count, &cuda, &beyond, reason,
                                         sizeof(reason), &body),
                     -EINVAL);
    assert_int_equal(gs_lease_parse_gpus("error NVML is slow\n", &count, &cuda, &beyond, reason,
                                         sizeof(reason), &body),
                     -EINVAL);
}

static void test_lost(void **state)
{
    char buf[64];
    int s, code;
    gs_lease_lost_t how;
    (void)state;
    assert_int_equal(gs_lease_fmt_lost(buf, sizeof(buf), 3, GS_LEASE_LOST_SIGNAL, 9),
                     strlen(GOLD_LOST));
    assert_string_equal(buf, GOLD_LOST);
    assert_int_equal(gs_lease_fmt_lost(buf, sizeof(buf), 1, GS_LEASE_LOST_WEDGED, 9),
                     strlen(GOLD_LOST_WEDGED));
    assert_string_equal(buf, GOLD_LOST_WEDGED);
    assert_int_equal(gs_lease_parse_lost(GOLD_LOST, &s, &how, &code), 0);
    assert_int_equal(s, 3);
    assert_int_equal(how, GS_LEASE_LOST_SIGNAL);
    assert_int_equal(code, 9);
    assert_int_equal(gs_lease_parse_lost("lost 0 status 1\n", &s, &how, &code), 0);
    assert_int_equal(how, GS_LEASE_LOST_STATUS);
    assert_string_equal(gs_lease_lost_word(how), "status");
    assert_int_equal(gs_lease_parse_lost(GOLD_LOST_WEDGED, &s, &how, &code), 0);
    assert_int_equal(how, GS_LEASE_LOST_WEDGED);
    assert_int_equal(gs_lease_parse_lost("lost 3 sigsegv 9\n", &s, &how, &code), -EINVAL);
    assert_int_equal(gs_lease_parse_lost("lost 3 signal\n", &s, &how, &code), -EINVAL);
    assert_int_equal(gs_lease_parse_lost("last 3 signal 9\n", &s, &how, &code), -EINVAL);
    assert_int_equal(gs_lease_kind(GOLD_LOST), GS_LEASE_LOST);
}

static void test_fault(void **state)
{
    char buf[128];
    pid_t pids[2] = {4711, 4712}, back[4];
    gs_lease_fault_t f;
    (void)state;
    /* The time's space travels as 'T'; an unknown time as "?". */
    assert_int_equal(gs_lease_fmt_fault(buf, sizeof(buf), 2, "2026-11-29 13:05:01", pids, 2),
                     strlen(GOLD_FAULT));
    assert_string_equal(buf, GOLD_FAULT);
    assert_int_equal(gs_lease_fmt_fault(buf, sizeof(buf), 0, "", pids, 0), strlen(GOLD_FAULT_NONE));
    assert_string_equal(buf, GOLD_FAULT_NONE);
    assert_int_equal(gs_lease_parse_fault(GOLD_FAULT, &f, back, 4), 0);
    assert_int_equal(f.server, 2);
    assert_string_equal(f.at, "2026-11-29 13:05:01");
    assert_int_equal(f.npids, 2);
    assert_memory_equal(back, pids, sizeof(pids));
    /* At most max PIDs; a PID <= 1 ends them. */
    assert_int_equal(gs_lease_parse_fault(GOLD_FAULT, &f, back, 1), 0);
    assert_int_equal(f.npids, 1);
    assert_int_equal(gs_lease_parse_fault("fault 2 t 4711 1 4712\n", &f, back, 4), 0);
    assert_int_equal(f.npids, 1);
    assert_int_equal(gs_lease_parse_fault(GOLD_FAULT_NONE, &f, back, 4), 0);
    assert_int_equal(f.npids, 0);
    assert_string_equal(f.at, "?");
    assert_int_equal(gs_lease_parse_fault("fault x 2026 4711\n", &f, back, 4), -EINVAL);
    assert_int_equal(gs_lease_parse_fault("faults 2 2026 4711\n", &f, back, 4), -EINVAL);
    assert_int_equal(gs_lease_fmt_fault(buf, 20, 2, "2026-11-29 13:05:01", pids, 2), -ENOSPC);
    assert_int_equal(gs_lease_kind(GOLD_FAULT), GS_LEASE_FAULT);
}

static void test_renew_and_wedged(void **state)
{
    char buf[128];
    const char *text;
    int s;
    (void)state;
    assert_int_equal(gs_lease_fmt_renew(buf, sizeof(buf), 2), strlen(GOLD_RENEW));
    assert_string_equal(buf, GOLD_RENEW);
    assert_int_equal(gs_lease_parse_renew(GOLD_RENEW, &s), 0);
    assert_int_equal(s, 2);
    assert_int_equal(gs_lease_parse_renew("renew x\n", &s), -EINVAL);
    assert_int_equal(gs_lease_parse_renew("renewed 2\n", &s), -EINVAL);
    assert_int_equal(gs_lease_kind(GOLD_RENEW), GS_LEASE_RENEW);

    assert_int_equal(gs_lease_fmt_wedged(buf, sizeof(buf), 4), strlen(GOLD_WEDGED));
    assert_string_equal(buf, GOLD_WEDGED);
    assert_int_equal(gs_lease_parse_wedged(GOLD_WEDGED, &s), 0);
    assert_int_equal(s, 4);
    assert_int_equal(gs_lease_parse_wedged("wedged GPU 0\n", &s), -EINVAL);
    assert_int_equal(gs_lease_kind(GOLD_WEDGED), GS_LEASE_WEDGED);

    assert_int_equal(gs_lease_fmt_wedged_told(buf, sizeof(buf),
                                              "GPU 0 (GPU-aa11): the user's shared MPS server "
                                              "was wedged"),
                     strlen(GOLD_WEDGED_TOLD));
    assert_string_equal(buf, GOLD_WEDGED_TOLD);
    assert_int_equal(gs_lease_parse_wedged_told(GOLD_WEDGED_TOLD, &text), 0);
    assert_string_equal(text, GOLD_WEDGED_TOLD + 7);
    assert_int_equal(gs_lease_parse_wedged_told("wedgedGPU 0\n", &text), -EINVAL);
    assert_int_equal(gs_lease_fmt_wedged_told(buf, 8, "GPU 0 was wedged"), -ENOSPC);

    assert_int_equal(gs_lease_kind("leased 2\n"), GS_LEASE_OTHER);
    assert_int_equal(gs_lease_kind("renew"), GS_LEASE_OTHER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease), cmocka_unit_test(test_leased_and_refusal),
        cmocka_unit_test(test_gpus),  cmocka_unit_test(test_lost),
        cmocka_unit_test(test_fault), cmocka_unit_test(test_renew_and_wedged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
