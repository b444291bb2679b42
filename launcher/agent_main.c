/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun-agent: the node agent, started by the node leader's gsrun-shim.
 *
 *   gsrun-agent --job-dir DIR --node NAME --local-size N --watch-pid PID
 *               --gsrun-pid PID --ready-fd FD [--report-fd FD] [--in-sequence 0|1]
 *               [--early 1 --watch-fd FD] [--job-long 1] [--report-rank0 1]
 *
 * --job-long: provisioned for a whole batch job by `gsrun prolog` (no rank
 * registers; `gsrun epilog` stops it).
 * --gsrun-pid is 0 when gsrun does not run on this node; the report then
 * goes to --report-fd (the node leader's stderr).
 * Settings come from the GSRUN_* environment, as for the shim. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "config.h"

static int to_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < -1 || v > 1 << 30) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    gs_agent_opts_t o;
    gs_error_t err;
    int v;

    memset(&o, 0, sizeof(o));
    o.ready_fd = -1;
    o.report_fd = -1;
    o.watch_fd = -1;
    gs_config_init(&o.cfg);
    if (gs_config_load_env(&o.cfg, &err) != 0) {
        fprintf(stderr, "gsrun-agent: %s\n", err.text);
        return 2;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *val = argv[i + 1];
        if (strcmp(k, "--job-dir") == 0) {
            snprintf(o.job_dir, sizeof(o.job_dir), "%s", val);
        } else if (strcmp(k, "--node") == 0) {
            snprintf(o.node_name, sizeof(o.node_name), "%s", val);
        } else if (to_int(val, &v) != 0) {
            fprintf(stderr, "gsrun-agent: %s: bad number '%s'\n", k, val);
            return 2;
        } else if (strcmp(k, "--local-size") == 0) {
            o.local_size = v;
        } else if (strcmp(k, "--watch-pid") == 0) {
            o.watch_pid = v;
        } else if (strcmp(k, "--gsrun-pid") == 0) {
            o.gsrun_pid = v;
        } else if (strcmp(k, "--ready-fd") == 0) {
            o.ready_fd = v;
        } else if (strcmp(k, "--report-fd") == 0) {
            o.report_fd = v;
        } else if (strcmp(k, "--in-sequence") == 0) {
            o.in_sequence = v;
        } else if (strcmp(k, "--early") == 0) {
            o.early = v;
        } else if (strcmp(k, "--watch-fd") == 0) {
            o.watch_fd = v;
        } else if (strcmp(k, "--job-long") == 0) {
            o.job_long = v;
        } else if (strcmp(k, "--report-rank0") == 0) {
            o.report_rank0 = v;
        } else {
            fprintf(stderr, "gsrun-agent: unknown argument %s\n", k);
            return 2;
        }
    }
    if (o.job_dir[0] != '/' || o.node_name[0] == '\0' || (o.local_size < 1 && !o.early && !o.job_long)) {
        fprintf(stderr, "gsrun-agent: --job-dir, --node and --local-size are required; "
                        "gsrun-agent is started by gsrun-shim\n");
        return 2;
    }
    return gs_agent_main(&o);
}
