/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/rank/jobkey.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"

long long gs_jobkey_start_time(pid_t pid)
{
    return gs_proctree_stat_field(pid, GS_STAT_STARTTIME);
}

int gs_jobkey_get(char *out, size_t len, const char **source)
{
    const char *v;

    if ((v = getenv("GSRUN_JOB_KEY")) != NULL && *v != '\0') {
        *source = "GSRUN_JOB_KEY";
        snprintf(out, len, "%s", v);
    } else if ((v = getenv("PMIX_NAMESPACE")) != NULL && *v != '\0') {
        *source = "PMIX_NAMESPACE";
        snprintf(out, len, "%s", v);
    } else if ((v = getenv("SLURM_JOB_ID")) != NULL && *v != '\0' &&
               getenv("SLURM_STEP_ID") != NULL) {
        *source = "SLURM_JOB_ID";
        snprintf(out, len, "slurm-%s.%s", v, getenv("SLURM_STEP_ID"));
    } else if ((v = getenv("FLUX_JOB_ID")) != NULL && *v != '\0') {
        *source = "FLUX_JOB_ID";
        snprintf(out, len, "flux-%s", v);
    } else {
        pid_t parent = getppid();
        long long t = gs_jobkey_start_time(parent);
        if (t < 0) {
            return -ENOENT;
        }
        *source = "parent";
        snprintf(out, len, "ppid-%d-%lld", (int)parent, t);
    }
    return 0;
}

void gs_jobkey_dir_name(const char *key, char *out, size_t len)
{
    /* FNV-1a of the whole key: two keys that read alike once cleaned (or
     * once cut) still get two names. */
    unsigned hash = 2166136261u;
    for (const unsigned char *k = (const unsigned char *)key; *k != '\0'; k++) {
        hash = (hash ^ *k) * 16777619u;
    }
    size_t n = snprintf(out, len, "exec-%08x-", hash);
    for (const char *k = key; *k != '\0' && n + 1 < len && n < 100; k++) {
        char c = *k;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        out[n++] = ok ? c : '_';
    }
    out[n < len ? n : len - 1] = '\0';
}
