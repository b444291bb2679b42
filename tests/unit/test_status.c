/* SPDX-License-Identifier: BSD-3-Clause */
/* The status file `gsrun status` reads: round trip, and the text, JSON and
 * Prometheus text it prints (the JSON is documented in gsrun(1), the
 * metrics in doc/metrics.md: both must stay stable). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/files/status.h"
#include "runtime/files/status_end.h"

static gs_status_t sample(void)
{
    gs_status_t s;
    memset(&s, 0, sizeof(s));
    snprintf(s.job, sizeof(s.job), "gsrun.AbC123");
    snprintf(s.node, sizeof(s.node), "n1");
    snprintf(s.job_dir, sizeof(s.job_dir), "/tmp/gsrun.AbC123");
    snprintf(s.mps, sizeof(s.mps), "on");
    s.uid = 1000;
    s.agent_pid = 42;
    s.launcher_pid = 40;
    s.gsrun_pid = 39;
    s.started_ms = 1000000;
    s.memory_limit_mb = 4096;
    s.local_size = 3;
    s.registered = 3;
    s.alive = 2;
    s.nservers = 2;
    s.server[0] = (gs_status_server_t){
        "GPU-a", "H200 \"x\"", 50, 51, "core 7 (PU 7)", "100", "0-1", 2, 1, 0, 0, 1, "/t/g0"};
    s.server[1] = (gs_status_server_t){"MIG-b", "H200 MIG", 60, 61, "core 6 (PU 6)", "", "2", 1, 1,
                                 1, 0, 1, "/t/g1"};
    s.server[1].node_gpu = 1;
    for (int g = 0; g < 2; g++) { /* as the reader leaves them: no look yet */
        s.server[g].server_mib = s.server[g].clients_mib = GS_STATUS_MIB_UNKNOWN;
    }
    return s;
}

/* The sample with its three ranks: 0 an MPS client whose memory NVML gave,
 * 1 on the same server not yet seen by MPS (memory unknown), 2 on the
 * second server and exited (its peak kept). */
static gs_status_t sample_ranks(void)
{
    gs_status_t s = sample();
    s.memory_every_ms = 2000;
    s.nranks = 3;
    s.rank[0] = (gs_status_rank_t){0, 100, 0, "client", 1, 512, 600};
    s.rank[1] = (gs_status_rank_t){1, 101, 0, "unseen", 1, GS_STATUS_MIB_UNKNOWN,
                                   GS_STATUS_MIB_UNKNOWN};
    s.rank[2] = (gs_status_rank_t){2, 102, 1, "client", 0, GS_STATUS_MIB_UNKNOWN, 300};
    s.server[0].nclients = 1;
    s.server[0].server_mib = 30;
    s.server[0].clients_mib = 512;
    return s;
}

static void test_roundtrip(void **state)
{
    static gs_status_t s, r;
    gs_error_t err;
    char dir[] = "/tmp/gsst.XXXXXX";
    (void)state;
    assert_non_null(mkdtemp(dir));
    s = sample();
    snprintf(s.server[1].wedged, sizeof(s.server[1].wedged),
             "the MPS control daemon 60 is stopped (state T); replaced by control daemon 70");
    assert_int_equal(gs_status_write(dir, &s, &err), 0);
    memset(&r, 0, sizeof(r));
    assert_int_equal(gs_status_read(dir, &r, &err), 0);
    assert_string_equal(r.server[1].wedged, s.server[1].wedged);
    assert_string_equal(r.server[0].wedged, "");
    assert_string_equal(r.mps, "on");
    assert_int_equal(r.agent_pid, 42);
    assert_int_equal(r.launcher_pid, 40);
    assert_int_equal(r.gsrun_pid, 39);
    assert_int_equal(r.started_ms, 1000000);
    assert_int_equal(r.memory_limit_mb, 4096);
    assert_int_equal(r.alive, 2);
    assert_int_equal(r.nservers, 2);
    assert_string_equal(r.server[0].name, "H200 \"x\"");
    assert_string_equal(r.server[0].core, "core 7 (PU 7)");
    assert_string_equal(r.server[1].uuid, "MIG-b");
    assert_string_equal(r.server[1].pct, "");
    assert_int_equal(r.server[1].daemon_pid, 60);
    /* A truncated file is refused, not half read. */
    char path[64];
    snprintf(path, sizeof(path), "%s/status", dir);
    FILE *f = fopen(path, "w");
    fputs("gsrun-status 1\nmps on\n", f);
    fclose(f);
    assert_int_not_equal(gs_status_read(dir, &r, &err), 0);
    unlink(path);
    rmdir(dir);
}

/* An older agent's file (no memory, no client count, no ranks) reads as
 * not known: null in the JSON, no sample in the Prometheus output; never 0. */
static void test_old_file(void **state)
{
    static gs_status_t r;
    gs_error_t err;
    char dir[] = "/tmp/gsst.XXXXXX", path[64];
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/status", dir);
    FILE *f = fopen(path, "w");
    fputs("gsrun-status 1\nmps on\nagent_pid 42\nlocal_size 2\ngpu.0.uuid GPU-a\n"
          "gpu.0.daemon_pid 50\ngpu.0.clients 2/2\nend\n",
          f);
    fclose(f);
    memset(&r, 0, sizeof(r));
    assert_int_equal(gs_status_read(dir, &r, &err), 0);
    assert_int_equal(r.nservers, 1);
    assert_int_equal(r.nranks, 0);
    assert_int_equal(r.server[0].nclients, -1);
    assert_int_equal(r.server[0].server_mib, GS_STATUS_MIB_UNKNOWN);
    assert_int_equal(r.server[0].clients_mib, GS_STATUS_MIB_UNKNOWN);
    static char buf[4096];
    FILE *m = fmemopen(buf, sizeof(buf), "w");
    gs_status_print_json(m, "n1", &r, 1, 0);
    fclose(m);
    assert_non_null(strstr(buf, "\"mps_clients\":null,\"server_memory_mib\":null,"
                                "\"clients_memory_mib\":null"));
    snprintf(r.job, sizeof(r.job), "gsrun.Old123");
    m = fmemopen(buf, sizeof(buf), "w");
    gs_status_print_prometheus(m, &r, 1);
    fclose(m);
    assert_null(strstr(buf, "gsrun_mps_server"));
    unlink(path);
    rmdir(dir);
}

static char *print(int json, const gs_status_t *s, int n)
{
    static char buf[8192];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    if (json) {
        gs_status_print_json(f, "n1", s, n, 3500000);
    } else {
        gs_status_print_text(f, s, n, 3500000);
    }
    fclose(f);
    return buf;
}

static void test_json(void **state)
{
    static gs_status_t s[2];
    (void)state;
    s[0] = sample_ranks();
    s[1] = sample();
    s[1].stale = 1;
    s[1].nservers = 0;
    assert_string_equal(
        print(1, s, 2),
        "{\"version\":1,\"node\":\"n1\",\"jobs\":["
        "{\"job\":\"gsrun.AbC123\",\"uid\":1000,\"state\":\"running\",\"mps\":\"on\","
        "\"message\":\"\",\"job_dir\":\"/tmp/gsrun.AbC123\",\"agent_pid\":42,\"launcher_pid\":40,"
        "\"gsrun_pid\":39,\"uptime_s\":2500.000,\"local_size\":3,\"registered\":3,\"alive\":2,"
        "\"memory_limit_mb\":4096,\"shared\":\"\",\"pids\":\"\",\"memory_every_ms\":2000,\"gpus\":["
        "{\"index\":0,\"uuid\":\"GPU-a\",\"name\":\"H200 \\\"x\\\"\",\"server\":0,\"servers\":1,"
        "\"pipe_dir\":\"/t/g0\",\"daemon_pid\":50,"
        "\"server_pid\":51,\"core\":\"core 7 (PU 7)\",\"percentage\":\"100\",\"ranks\":\"0-1\","
        "\"registered\":2,\"alive\":1,\"node_gpu\":0,\"jobs\":\"\",\"fault\":null,\"wedged\":null,"
        "\"clients\":null,\"mps_clients\":1,\"server_memory_mib\":30,\"clients_memory_mib\":512},"
        "{\"index\":1,\"uuid\":\"MIG-b\",\"name\":\"H200 MIG\",\"server\":0,\"servers\":1,"
        "\"pipe_dir\":\"/t/g1\",\"daemon_pid\":60,"
        "\"server_pid\":61,\"core\":\"core 6 (PU 6)\",\"percentage\":null,\"ranks\":\"2\","
        "\"registered\":1,\"alive\":1,\"node_gpu\":1,\"jobs\":\"\",\"fault\":null,\"wedged\":null,"
        "\"clients\":null,\"mps_clients\":0,\"server_memory_mib\":null,\"clients_memory_mib\":null}"
        "],\"ranks\":["
        "{\"rank\":0,\"pid\":100,\"entry\":0,\"gpu\":0,\"gpu_uuid\":\"GPU-a\",\"state\":\"client\","
        "\"alive\":true,\"memory_mib\":512,\"peak_memory_mib\":600},"
        "{\"rank\":1,\"pid\":101,\"entry\":0,\"gpu\":0,\"gpu_uuid\":\"GPU-a\",\"state\":\"unseen\","
        "\"alive\":true,\"memory_mib\":null,\"peak_memory_mib\":null},"
        "{\"rank\":2,\"pid\":102,\"entry\":1,\"gpu\":1,\"gpu_uuid\":\"MIG-b\",\"state\":\"client\","
        "\"alive\":false,\"memory_mib\":null,\"peak_memory_mib\":300}]},"
        "{\"job\":\"gsrun.AbC123\",\"uid\":1000,\"state\":\"stale\",\"mps\":\"on\","
        "\"message\":\"\",\"job_dir\":\"/tmp/gsrun.AbC123\",\"agent_pid\":42,\"launcher_pid\":40,"
        "\"gsrun_pid\":39,\"uptime_s\":2500.000,\"local_size\":3,\"registered\":3,\"alive\":2,"
        "\"memory_limit_mb\":4096,\"shared\":\"\",\"pids\":\"\",\"memory_every_ms\":0,\"gpus\":[],"
        "\"ranks\":[]}]}\n");
    assert_string_equal(print(1, s, 0), "{\"version\":1,\"node\":\"n1\",\"jobs\":[]}\n");
    /* A rank without a server has no GPU to name. */
    s[0].rank[1].entry = -1;
    assert_non_null(strstr(print(1, s, 1), "{\"rank\":1,\"pid\":101,\"entry\":-1,\"gpu\":-1,"
                                           "\"gpu_uuid\":null,\"state\":\"unseen\""));
}

static void test_text(void **state)
{
    static gs_status_t s;
    const char *text;
    (void)state;
    s = sample();
    assert_string_equal(
        print(0, &s, 1),
        "job gsrun.AbC123 (uid 1000): agent 42, launcher 40, gsrun 39, up 2500.0 s, MPS on, 3 of 3 "
        "ranks registered, 2 alive, memory limit 4096 MiB per rank\n"
        "  GPU 0 (H200 \"x\", GPU-a): daemon 50 on core 7 (PU 7), server 51, 100%, pipe /t/g0, "
        "ranks 0-1: 2 registered, 1 alive\n"
        "  GPU 1 (H200 MIG, MIG-b): daemon 60 on core 6 (PU 6), server 61, 100%, pipe /t/g1, "
        "ranks 2: 1 registered, 1 alive\n");
    /* The job's own GPU numbers renumbered by CUDA_VISIBLE_DEVICES=2,3: the
     * node's as nvidia-smi shows them, then the job's. */
    static gs_status_server_t keep[2];
    keep[0] = s.server[0];
    keep[1] = s.server[1];
    s.server[0].node_gpu = 2;
    s.server[1].node_gpu = 3;
    text = print(0, &s, 1);
    assert_non_null(strstr(text, "\n  GPU 2, the job's 0 (H200 \"x\", GPU-a): daemon 50"));
    assert_non_null(strstr(text, "\n  GPU 3, the job's 1 (H200 MIG, MIG-b): daemon 60"));
    s.server[0] = keep[0];
    s.server[1] = keep[1];
    /* Two servers on one GPU: each its own line, named by GPU and server. */
    s.server[1] = s.server[0];
    s.server[0].gpu_servers = s.server[1].gpu_servers = 2;
    s.server[1].server = 1;
    snprintf(s.server[1].pipe_dir, sizeof(s.server[1].pipe_dir), "/t/g1");
    snprintf(s.server[1].ranks, sizeof(s.server[1].ranks), "2");
    s.server[1].daemon_pid = 60;
    s.server[1].server_pid = 61;
    text = print(0, &s, 1);
    assert_non_null(strstr(text, "  GPU 0 server 0 of 2 (H200 \"x\", GPU-a): daemon 50 on core 7 "
                                 "(PU 7), server 51, 100%, pipe /t/g0, ranks 0-1:"));
    assert_non_null(strstr(text, "  GPU 0 server 1 of 2 (H200 \"x\", GPU-a): daemon 60 on core 7 "
                                 "(PU 7), server 61, 100%, pipe /t/g1, ranks 2:"));
}

/* The Prometheus text (gsrun status --format=prometheus, doc/metrics.md):
 * a job with ranks of known and unknown memory, one whose name needs the
 * label escapes, a stale and a starting one (left out), the user's shared
 * MPS (its server's own memory only), and a repeat of a job (left out: two
 * equal label sets make node_exporter drop the whole file). */
static const char prom_golden[] =
    "# HELP gsrun_rank_gpu_memory_bytes GPU memory of a running rank's processes at NVML's last "
    "look; absent when not known.\n"
    "# TYPE gsrun_rank_gpu_memory_bytes gauge\n"
    "gsrun_rank_gpu_memory_bytes{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",rank=\"0\",gpu_uuid=\"GPU-a\"} "
    "536870912\n"
    "# HELP gsrun_rank_gpu_memory_peak_bytes Largest GPU memory of a rank's processes over NVML's "
    "looks while it ran; absent when not known.\n"
    "# TYPE gsrun_rank_gpu_memory_peak_bytes gauge\n"
    "gsrun_rank_gpu_memory_peak_bytes{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",rank=\"0\","
    "gpu_uuid=\"GPU-a\"} 629145600\n"
    "gsrun_rank_gpu_memory_peak_bytes{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",rank=\"2\","
    "gpu_uuid=\"MIG-b\"} 314572800\n"
    "# HELP gsrun_rank_mps_client 1 when MPS lists the running rank as a client of its server, 0 "
    "when it does not.\n"
    "# TYPE gsrun_rank_mps_client gauge\n"
    "gsrun_rank_mps_client{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",rank=\"0\",gpu_uuid=\"GPU-a\"} 1\n"
    "gsrun_rank_mps_client{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",rank=\"1\",gpu_uuid=\"GPU-a\"} 0\n"
    "# HELP gsrun_mps_server_clients The job's ranks that are MPS clients of this server now.\n"
    "# TYPE gsrun_mps_server_clients gauge\n"
    "gsrun_mps_server_clients{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",gpu_uuid=\"GPU-a\",server=\"0\"} "
    "1\n"
    "gsrun_mps_server_clients{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",gpu_uuid=\"MIG-b\",server=\"0\"} "
    "0\n"
    "# HELP gsrun_mps_server_gpu_memory_bytes GPU memory of the MPS server process itself; absent "
    "when not known.\n"
    "# TYPE gsrun_mps_server_gpu_memory_bytes gauge\n"
    "gsrun_mps_server_gpu_memory_bytes{gsrun_job=\"gsrun.AbC123\",uid=\"1000\",gpu_uuid=\"GPU-a\","
    "server=\"0\"} 31457280\n"
    "gsrun_mps_server_gpu_memory_bytes{gsrun_job=\"mps-share\",uid=\"1000\",gpu_uuid=\"GPU-a\","
    "server=\"0\"} 41943040\n"
    "# HELP gsrun_mps_server_clients_gpu_memory_bytes GPU memory of the job's running clients of "
    "this MPS server in all; absent when not known.\n"
    "# TYPE gsrun_mps_server_clients_gpu_memory_bytes gauge\n"
    "gsrun_mps_server_clients_gpu_memory_bytes{gsrun_job=\"gsrun.AbC123\",uid=\"1000\","
    "gpu_uuid=\"GPU-a\",server=\"0\"} 536870912\n"
    "# HELP gsrun_job_ranks_alive The job's ranks on this node that are running.\n"
    "# TYPE gsrun_job_ranks_alive gauge\n"
    "gsrun_job_ranks_alive{gsrun_job=\"gsrun.AbC123\",uid=\"1000\"} 2\n"
    "gsrun_job_ranks_alive{gsrun_job=\"gsrun.q\\\"\\\\\\n\",uid=\"1001\"} 1\n"
    "# HELP gsrun_job_mps_memory_limit_bytes The job's MPS pinned device memory limit per rank "
    "(--mps-memory-limit).\n"
    "# TYPE gsrun_job_mps_memory_limit_bytes gauge\n"
    "gsrun_job_mps_memory_limit_bytes{gsrun_job=\"gsrun.AbC123\",uid=\"1000\"} 4294967296\n";

static char *print_prom(void)
{
    static gs_status_t s[6];
    static char buf[8192];
    s[0] = sample_ranks();
    s[1] = sample(); /* a name with '"', '\' and a newline; no GPU, no limit */
    snprintf(s[1].job, sizeof(s[1].job), "gsrun.q\"\\\n");
    s[1].uid = 1001;
    s[1].nservers = 0;
    s[1].alive = 1;
    s[1].memory_limit_mb = 0;
    s[2] = sample_ranks();
    s[2].stale = 1;
    s[3] = sample_ranks();
    snprintf(s[3].mps, sizeof(s[3].mps), "starting");
    s[4] = sample_ranks(); /* the shared agent: its server's own memory only */
    snprintf(s[4].job, sizeof(s[4].job), "mps-share");
    snprintf(s[4].shared, sizeof(s[4].shared), "node");
    s[4].nservers = 1;
    s[4].server[0].server_mib = 40;
    s[5] = s[1];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    gs_status_print_prometheus(f, s, 6);
    fclose(f);
    return buf;
}

static void test_prometheus(void **state)
{
    (void)state;
    assert_string_equal(print_prom(), prom_golden);
}

/* The comparison is exact: the golden with any one byte changed (or cut
 * short, or one longer) is not what gsrun prints. */
static void test_prometheus_byte(void **state)
{
    static char want[sizeof(prom_golden) + 1];
    const char *got = print_prom();
    (void)state;
    for (size_t i = 0; i < sizeof(prom_golden) - 1; i++) {
        memcpy(want, prom_golden, sizeof(prom_golden));
        want[i] = want[i] == 'x' ? 'y' : 'x';
        assert_int_not_equal(strcmp(got, want), 0);
    }
    memcpy(want, prom_golden, sizeof(prom_golden));
    want[sizeof(prom_golden) - 2] = '\0';
    assert_int_not_equal(strcmp(got, want), 0);
    want[sizeof(prom_golden) - 2] = '\n';
    want[sizeof(prom_golden) - 1] = '\n';
    want[sizeof(prom_golden)] = '\0';
    assert_int_not_equal(strcmp(got, want), 0);
}

/* The words of an agent's report that hang on how the job ended
 * (status_end.c): mpirun's status, else unknown. */
static void test_end(void **state)
{
    char out[400];
    (void)state;
    const char *line = "no rank of the 4 used the GPU: they exited" GS_END_MARK_ADVICE
                       "; x{y}";
    gs_status_end_fill(line, 127, out, sizeof(out));
    assert_string_equal(out, "no rank of the 4 used the GPU: they exited (the job ended with "
                             "status 127: see its output); x{y}");
    gs_status_end_fill(line, 0, out, sizeof(out));
    assert_string_equal(out, "no rank of the 4 used the GPU: they exited (the job ended with "
                             "status 0: a program without CUDA runs as well with --mps=off); "
                             "x{y}");
    gs_status_end_fill(line, -1, out, sizeof(out));
    assert_non_null(strstr(out, "exited (if the job ended well, a program without CUDA runs as "
                                "well with --mps=off); x{y}"));
    gs_status_end_fill("a" GS_END_MARK_STATUS "b", 0, out, sizeof(out));
    assert_string_equal(out, "ab");
    gs_status_end_fill("a" GS_END_MARK_STATUS "b", 137, out, sizeof(out));
    assert_string_equal(out, "a (the job ended with status 137: see its output)b");
    gs_status_end_fill("a" GS_END_MARK_STATUS "b", 137, out, 10); /* cut to fit */
    assert_string_equal(out, "a (the jo");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_old_file),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_prometheus),
        cmocka_unit_test(test_prometheus_byte),
        cmocka_unit_test(test_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
