/* SPDX-License-Identifier: BSD-3-Clause */
/* One device as one line of text, and back: how the user's node service
 * tells a job's agent the GPUs it found (NVML's facts and what runs on
 * each), so that the job's agent loads no NVML of its own. Numbers only,
 * then the UUID, then the name, which may hold spaces. */
#include "gs_autoconf.h"

#include "runtime/gpu/gpu.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gs_gpu_to_line(const gs_gpu_t *g, char *out, size_t len)
{
    size_t n = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(out + n, n < len ? len - n : 0, __VA_ARGS__);                            \
        n += w_ > 0 ? (size_t)w_ : 0;                                                              \
    } while (0)
    PUT("%d %d %d %llx %llu %d %llu %llu %d ", g->index, g->cuda_index, g->mig, g->bus, g->speed,
        g->exclusive, g->mem_mib, g->used_mib, g->nprocs);
    int listed = g->nprocs < GS_GPU_PROCS_MAX ? g->nprocs : GS_GPU_PROCS_MAX;
    for (int i = 0; i < listed; i++) {
        PUT("%s%d", i ? "," : "", g->procs[i]);
    }
    PUT("%s ", listed > 0 ? "" : "-");
    for (int i = 0; i < listed; i++) {
        PUT("%s%d", i ? "," : "", g->procs_mib[i]);
    }
    PUT("%s %d ", listed > 0 ? "" : "-", g->nmps);
    listed = g->nmps < GS_GPU_PROCS_MAX ? g->nmps : GS_GPU_PROCS_MAX;
    for (int i = 0; i < listed; i++) {
        PUT("%s%d", i ? "," : "", g->mps[i]);
    }
    PUT("%s ", listed > 0 ? "" : "-");
    for (int w = 0; g->have_cpumask && w < GS_GPU_CPUMASK_WORDS; w++) {
        PUT("%s%lx", w ? "," : "", g->cpumask[w]);
    }
    PUT("%s %s %s", g->have_cpumask ? "" : "-", g->uuid[0] ? g->uuid : "-", g->name);
#undef PUT
    if (n >= len || strpbrk(g->uuid, " \n") != NULL || strchr(g->name, '\n') != NULL) {
        return n >= len ? -ENOSPC : -EINVAL;
    }
    return 0;
}

/* A comma list of numbers in base into v (at most max); how many, or -1. */
static int list_of(const char *text, int base, unsigned long long *v, int max)
{
    int k = 0;
    if (strcmp(text, "-") == 0) {
        return 0;
    }
    for (const char *p = text;; p++) {
        char *end;
        if (k == max || *p < '0' || (*p > '9' && base == 10)) {
            return -1;
        }
        v[k++] = strtoull(p, &end, base);
        if (*end == '\0') {
            return k;
        }
        if (*end != ',') {
            return -1;
        }
        p = end;
    }
}

/* A listing's numbers (text: PIDs, or their MiB) into out: n of them were
 * listed (the first GS_GPU_PROCS_MAX travel; -1, none: NVML could not
 * tell). 0, or -1 (one past INT_MAX among them too). */
static int num_list(const char *text, int n, int *out)
{
    unsigned long long v[GS_GPU_PROCS_MAX];
    int np = list_of(text, 10, v, GS_GPU_PROCS_MAX);
    if (np < 0 || np != (n < GS_GPU_PROCS_MAX ? (n > 0 ? n : 0) : GS_GPU_PROCS_MAX)) {
        return -1;
    }
    for (int i = 0; i < np; i++) {
        if (v[i] > INT_MAX) {
            return -1;
        }
        out[i] = (int)v[i];
    }
    return 0;
}

int gs_gpu_from_line(const char *line, gs_gpu_t *g)
{
    char procs[GS_GPU_PROCS_MAX * 12], mib[GS_GPU_PROCS_MAX * 12], mps[GS_GPU_PROCS_MAX * 12];
    char mask[GS_GPU_CPUMASK_WORDS * 17 + 2];
    unsigned long long v[GS_GPU_CPUMASK_WORDS > GS_GPU_PROCS_MAX ? GS_GPU_CPUMASK_WORDS
                                                                  : GS_GPU_PROCS_MAX];
    int name_at = -1;

    if (strlen(line) >= 2048) {
        return -EINVAL;
    }
    memset(g, 0, sizeof(*g));
    if (sscanf(line, "%d %d %d %llx %llu %d %llu %llu %d %383s %383s %d %383s %273s %95s %n",
               &g->index, &g->cuda_index, &g->mig, &g->bus, &g->speed, &g->exclusive,
               &g->mem_mib, &g->used_mib, &g->nprocs, procs, mib, &g->nmps, mps, mask, g->uuid,
               &name_at) != 15 ||
        name_at < 0 || num_list(procs, g->nprocs, g->procs) != 0 ||
        num_list(mib, g->nprocs, g->procs_mib) != 0 || num_list(mps, g->nmps, g->mps) != 0) {
        return -EINVAL;
    }
    int nw = list_of(mask, 16, v, GS_GPU_CPUMASK_WORDS);
    if (nw < 0 || (nw != 0 && nw != GS_GPU_CPUMASK_WORDS)) {
        return -EINVAL;
    }
    g->have_cpumask = nw > 0;
    for (int w = 0; w < nw; w++) {
        g->cpumask[w] = (unsigned long)v[w];
    }
    if (strcmp(g->uuid, "-") == 0) {
        g->uuid[0] = '\0';
    }
    snprintf(g->name, sizeof(g->name), "%s", line + name_at);
    return 0;
}
