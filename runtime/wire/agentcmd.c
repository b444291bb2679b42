/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/wire/agentcmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ARG_STR, ARG_INT, ARG_PID, ARG_LL, ARG_MODE, ARG_REPORT } arg_type_t;

static const char *const mode_names[] = {"per-job", "early", "job-long", "node-share", NULL};
static const char *const report_names[] = {"nowhere", "file", "leader-fd", "rank0", "epilog", NULL};

static const struct {
    const char *flag;
    arg_type_t type;
    size_t offset, size;
} rows[] = {
#define ROW(flag, type, field)                                                                     \
    {                                                                                              \
        flag, type, offsetof(gs_agentcmd_t, field), sizeof(((gs_agentcmd_t *)0)->field)            \
    }
    ROW("--job-dir", ARG_STR, job_dir),
    ROW("--node", ARG_STR, node_name),
    ROW("--local-size", ARG_INT, local_size),
    ROW("--watch-pid", ARG_PID, watch_pid),
    ROW("--gsrun-pid", ARG_PID, gsrun_pid),
    ROW("--ready-fd", ARG_INT, ready_fd),
    ROW("--watch-fd", ARG_INT, watch_fd),
    ROW("--report-fd", ARG_INT, report_fd),
    ROW("--mode", ARG_MODE, mode),
    ROW("--report", ARG_REPORT, report),
    ROW("--in-sequence", ARG_INT, in_sequence),
    ROW("--t0", ARG_LL, t0_ms),
    ROW("--ranks-at-most", ARG_INT, ranks_at_most),
#undef ROW
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

void gs_agentcmd_init(gs_agentcmd_t *a)
{
    memset(a, 0, sizeof(*a));
    a->ready_fd = a->watch_fd = a->report_fd = -1;
}

static void format(const gs_agentcmd_t *a, size_t i, char *out, size_t len)
{
    const char *p = (const char *)a + rows[i].offset;
    switch (rows[i].type) {
    case ARG_STR:
        snprintf(out, len, "%s", p);
        break;
    case ARG_INT:
        snprintf(out, len, "%d", *(const int *)p);
        break;
    case ARG_PID:
        snprintf(out, len, "%d", (int)*(const pid_t *)p);
        break;
    case ARG_LL:
        snprintf(out, len, "%lld", *(const long long *)p);
        break;
    case ARG_MODE:
        snprintf(out, len, "%s", mode_names[*(const gs_agentcmd_mode_t *)p]);
        break;
    case ARG_REPORT:
        snprintf(out, len, "%s", report_names[*(const gs_sink_t *)p]);
        break;
    }
}

int gs_agentcmd_to_argv(const gs_agentcmd_t *a, const char *program, char *buf, size_t len,
                        char **argv, int max)
{
    size_t used = 0;
    int n = 0;
    if (max < (int)(2 * NROWS + 2)) {
        return -ENOSPC;
    }
    argv[n++] = (char *)program;
    for (size_t i = 0; i < NROWS; i++) {
        char value[300];
        format(a, i, value, sizeof(value));
        size_t need = strlen(value) + 1;
        if (used + need > len) {
            return -ENOSPC;
        }
        memcpy(buf + used, value, need);
        argv[n++] = (char *)rows[i].flag;
        argv[n++] = buf + used;
        used += need;
    }
    argv[n] = NULL;
    return 0;
}

static int name_index(const char *const *names, const char *v)
{
    for (int i = 0; names[i] != NULL; i++) {
        if (strcmp(names[i], v) == 0) {
            return i;
        }
    }
    return -1;
}

static int parse_one(gs_agentcmd_t *a, size_t i, const char *v)
{
    char *p = (char *)a + rows[i].offset, *end = NULL;
    long long x = 0;
    if (rows[i].type == ARG_STR) {
        if (strlen(v) >= rows[i].size) {
            return -1;
        }
        memcpy(p, v, strlen(v) + 1);
        return 0;
    }
    if (rows[i].type == ARG_MODE || rows[i].type == ARG_REPORT) {
        int k = name_index(rows[i].type == ARG_MODE ? mode_names : report_names, v);
        if (k < 0) {
            return -1;
        }
        if (rows[i].type == ARG_MODE) {
            *(gs_agentcmd_mode_t *)p = (gs_agentcmd_mode_t)k;
        } else {
            *(gs_sink_t *)p = (gs_sink_t)k;
        }
        return 0;
    }
    x = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < -1 || (rows[i].type != ARG_LL && x > 1 << 30)) {
        return -1;
    }
    if (rows[i].type == ARG_INT) {
        *(int *)p = (int)x;
    } else if (rows[i].type == ARG_PID) {
        *(pid_t *)p = (pid_t)x;
    } else {
        *(long long *)p = x;
    }
    return 0;
}

int gs_agentcmd_parse(int argc, char **argv, gs_agentcmd_t *a, gs_error_t *err)
{
    gs_agentcmd_init(a);
    for (int k = 1; k < argc; k += 2) {
        size_t i = 0;
        while (i < NROWS && strcmp(rows[i].flag, argv[k]) != 0) {
            i++;
        }
        if (i == NROWS) {
            return gs_error_set(err, EINVAL, "unknown argument %s", argv[k]);
        }
        if (k + 1 >= argc || parse_one(a, i, argv[k + 1]) != 0) {
            return gs_error_set(err, EINVAL, "%s: bad value '%s'", argv[k],
                                k + 1 < argc ? argv[k + 1] : "");
        }
    }
    if (a->job_dir[0] != '/' || a->node_name[0] == '\0' ||
        (a->local_size < 1 && a->mode == GS_MODE_PER_JOB)) {
        return gs_error_set(err, EINVAL, "--job-dir, --node and --local-size are required");
    }
    return 0;
}
