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
    unsigned long long *v = malloc(GS_GPU_PROCS_MAX * sizeof(*v));
    int np = v != NULL ? list_of(text, 10, v, GS_GPU_PROCS_MAX) : -1;
    int rc = np < 0 || np != (n < GS_GPU_PROCS_MAX ? (n > 0 ? n : 0) : GS_GPU_PROCS_MAX) ? -1 : 0;
    for (int i = 0; rc == 0 && i < np; i++) {
        if (v[i] > INT_MAX) {
            rc = -1;
        }
        out[i] = (int)v[i];
    }
    free(v);
    return rc;
}

/* The next space-separated word of *p, NUL-ended in place; NULL at the end. */
static char *word(char **p)
{
    char *w = *p + strspn(*p, " ");
    if (*w == '\0') {
        return NULL;
    }
    char *end = w + strcspn(w, " ");
    *p = *end != '\0' ? end + 1 : end;
    *end = '\0';
    return w;
}

/* The line's words into w (the 15 before the name), the name's start in
 * *name: 0, or -1. text is cut up in place. */
static int words_of(char *text, char *w[15], const char **name)
{
    char *p = text;
    for (int i = 0; i < 15; i++) {
        if ((w[i] = word(&p)) == NULL) {
            return -1;
        }
    }
    *name = p;
    return 0;
}

/* The number a word holds in base ("-1" too, in base 10): 0, or -1. */
static int num_of(const char *w, int base, unsigned long long *out)
{
    char *end;
    if (strcmp(w, "-1") == 0 && base == 10) {
        *out = (unsigned long long)-1; /* -1 (nprocs, nmps: NVML could not tell) */
        return 0;
    }
    if (*w < '0' || (*w > '9' && base == 10)) {
        return -1;
    }
    errno = 0;
    *out = strtoull(w, &end, base);
    return *end != '\0' || errno != 0 ? -1 : 0;
}

/* An int of a word, -1 allowed. */
static int int_of(const char *w, int *out)
{
    unsigned long long v;
    if (num_of(w, 10, &v) != 0 || (v > INT_MAX && v != (unsigned long long)-1)) {
        return -1;
    }
    *out = v == (unsigned long long)-1 ? -1 : (int)v;
    return 0;
}

int gs_gpu_from_line(const char *line, gs_gpu_t *g)
{
    unsigned long long v[GS_GPU_CPUMASK_WORDS], bus, speed, mem, used;
    char *w[15];
    const char *name;

    if (strlen(line) >= GS_GPU_LINE_MAX) {
        return -EINVAL;
    }
    char *text = strdup(line);
    memset(g, 0, sizeof(*g));
    if (text == NULL) {
        return -ENOMEM;
    }
    int rc = words_of(text, w, &name) != 0 || int_of(w[0], &g->index) != 0 ||
                     int_of(w[1], &g->cuda_index) != 0 || int_of(w[2], &g->mig) != 0 ||
                     num_of(w[3], 16, &bus) != 0 || num_of(w[4], 10, &speed) != 0 ||
                     int_of(w[5], &g->exclusive) != 0 || num_of(w[6], 10, &mem) != 0 ||
                     num_of(w[7], 10, &used) != 0 || int_of(w[8], &g->nprocs) != 0 ||
                     num_list(w[9], g->nprocs, g->procs) != 0 ||
                     num_list(w[10], g->nprocs, g->procs_mib) != 0 ||
                     int_of(w[11], &g->nmps) != 0 || num_list(w[12], g->nmps, g->mps) != 0 ||
                     strlen(w[14]) >= sizeof(g->uuid)
                 ? -EINVAL
                 : 0;
    int nw = rc == 0 ? list_of(w[13], 16, v, GS_GPU_CPUMASK_WORDS) : -1;
    if (nw < 0 || (nw != 0 && nw != GS_GPU_CPUMASK_WORDS)) {
        free(text);
        memset(g, 0, sizeof(*g));
        return -EINVAL;
    }
    g->bus = bus;
    g->speed = speed;
    g->mem_mib = mem;
    g->used_mib = used;
    snprintf(g->uuid, sizeof(g->uuid), "%s", strcmp(w[14], "-") == 0 ? "" : w[14]);
    snprintf(g->name, sizeof(g->name), "%s", name + strspn(name, " "));
    free(text);
    g->have_cpumask = nw > 0;
    for (int k = 0; k < nw; k++) {
        g->cpumask[k] = (unsigned long)v[k];
    }
    return 0;
}

int gs_gpu_is_mps_client(const gs_gpu_t *g, int pid)
{
    for (int k = 0; k < g->nmps && k < GS_GPU_PROCS_MAX; k++) {
        if (g->mps[k] == pid) {
            return 1;
        }
    }
    return 0;
}
