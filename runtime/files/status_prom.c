/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun status --format=prometheus`: the jobs' gauges in the Prometheus
 * text exposition format 0.0.4, for node_exporter's textfile collector
 * (doc/metrics.md names them). Each family is written once with all its
 * samples together: promtool and the collector refuse a family split in
 * two. What gsrun does not know is left out, never written as 0, so that
 * a graph shows a gap rather than a false drop. */
#include "gs_autoconf.h"

#include <string.h>

#include "runtime/files/status.h"

#define MIB 1048576LL

enum { PER_RANK, PER_SERVER, PER_JOB };

/* A sample's value into *v: 1, or 0 when there is none (unknown, or not
 * this family's to tell). */
typedef int (*value_fn)(const gs_status_t *s, int i, long long *v);

typedef struct {
    const char *name;
    const char *help;
    int per;
    value_fn value;
} family_t;

static int is_shared_agent(const gs_status_t *s)
{
    return strcmp(s->shared, "node") == 0;
}

static int rank_memory(const gs_status_t *s, int i, long long *v)
{
    const gs_status_rank_t *r = &s->rank[i];
    *v = r->memory_mib * MIB;
    return r->alive && r->memory_mib >= 0;
}

/* An exited rank keeps its peak: the number a site sizes its jobs by. */
static int rank_peak(const gs_status_t *s, int i, long long *v)
{
    *v = s->rank[i].peak_mib * MIB;
    return s->rank[i].peak_mib >= 0;
}

/* "unwatched": gsrun does not look at MPS's clients (no MPS), so it cannot
 * tell; 0 would claim the rank lost MPS. */
static int rank_client(const gs_status_t *s, int i, long long *v)
{
    const gs_status_rank_t *r = &s->rank[i];
    *v = strcmp(r->state, "client") == 0;
    return r->alive && strcmp(r->state, "unwatched") != 0;
}

/* The shared agent's own count is of no rank: its clients are the jobs'
 * ranks, which each job counts on its own lines. */
static int server_clients(const gs_status_t *s, int i, long long *v)
{
    *v = s->server[i].nclients;
    return s->server[i].nclients >= 0 && !is_shared_agent(s); /* < 0: an older agent's file */
}

/* A server's own memory comes from the agent that runs it: a job on the
 * user's shared MPS leaves it to the shared agent's line, so that it is
 * not counted once per job. */
static int server_memory(const gs_status_t *s, int i, long long *v)
{
    *v = s->server[i].server_mib * MIB;
    return s->server[i].server_mib >= 0 && (s->shared[0] == '\0' || is_shared_agent(s));
}

static int server_clients_memory(const gs_status_t *s, int i, long long *v)
{
    *v = s->server[i].clients_mib * MIB;
    return s->server[i].clients_mib >= 0 && !is_shared_agent(s);
}

static int job_alive(const gs_status_t *s, int i, long long *v)
{
    (void)i;
    *v = s->alive;
    return !is_shared_agent(s);
}

static int job_limit(const gs_status_t *s, int i, long long *v)
{
    (void)i;
    *v = s->memory_limit_mb * MIB;
    return s->memory_limit_mb > 0 && !is_shared_agent(s);
}

static const family_t families[] = {
    {"gsrun_rank_gpu_memory_bytes",
     "GPU memory of a running rank's processes at NVML's last look; absent when not known.",
     PER_RANK, rank_memory},
    {"gsrun_rank_gpu_memory_peak_bytes",
     "Largest GPU memory of a rank's processes over NVML's looks while it ran; absent when not "
     "known.",
     PER_RANK, rank_peak},
    {"gsrun_rank_mps_client",
     "1 when MPS lists the running rank as a client of its server, 0 when it does not.", PER_RANK,
     rank_client},
    {"gsrun_mps_server_clients", "The job's ranks that are MPS clients of this server now.",
     PER_SERVER, server_clients},
    {"gsrun_mps_server_gpu_memory_bytes",
     "GPU memory of the MPS server process itself; absent when not known.", PER_SERVER,
     server_memory},
    {"gsrun_mps_server_clients_gpu_memory_bytes",
     "GPU memory of the job's running clients of this MPS server in all; absent when not known.",
     PER_SERVER, server_clients_memory},
    {"gsrun_job_ranks_alive", "The job's ranks on this node that are running.", PER_JOB, job_alive},
    {"gsrun_job_mps_memory_limit_bytes",
     "The job's MPS pinned device memory limit per rank (--mps-memory-limit).", PER_JOB, job_limit},
};

/* The exposition format's escapes in a label value: backslash, double
 * quote and newline (the status reader has already made the rest safe). */
static void label(FILE *f, const char *sep, const char *name, const char *v)
{
    fprintf(f, "%s%s=\"", sep, name);
    for (; *v != '\0'; v++) {
        if (*v == '\\' || *v == '"') {
            fputc('\\', f);
            fputc(*v, f);
        } else if (*v == '\n') {
            fputs("\\n", f);
        } else {
            fputc(*v, f);
        }
    }
    fputc('"', f);
}

static void sample(FILE *f, const family_t *m, const gs_status_t *s, int i, long long v)
{
    char num[24];
    fprintf(f, "%s{", m->name);
    label(f, "", "gsrun_job", s->job);
    snprintf(num, sizeof(num), "%d", s->uid);
    label(f, ",", "uid", num);
    if (m->per == PER_RANK) {
        snprintf(num, sizeof(num), "%d", s->rank[i].rank);
        label(f, ",", "rank", num);
        label(f, ",", "gpu_uuid", s->server[s->rank[i].entry].uuid);
    } else if (m->per == PER_SERVER) {
        label(f, ",", "gpu_uuid", s->server[i].uuid);
        snprintf(num, sizeof(num), "%d", s->server[i].server);
        label(f, ",", "server", num);
    }
    fprintf(f, "} %lld\n", v);
}

/* Job j is shown: running (not stale, its agent has written), and the
 * first of its name and user (two equal label sets make the collector
 * drop the whole file). */
static int job_shown(const gs_status_t *s, int j)
{
    if (s[j].stale || strcmp(s[j].mps, "starting") == 0) {
        return 0;
    }
    for (int k = 0; k < j; k++) {
        if (s[k].uid == s[j].uid && strcmp(s[k].job, s[j].job) == 0 && !s[k].stale &&
            strcmp(s[k].mps, "starting") != 0) {
            return 0;
        }
    }
    return 1;
}

/* Rank i has a GPU to name (ranks without one have no per-GPU sample), is
 * registered, and is the first line of its rank. */
static int rank_shown(const gs_status_t *s, int i)
{
    const gs_status_rank_t *r = &s->rank[i];
    if (is_shared_agent(s) || r->pid <= 0 || r->entry < 0 || r->entry >= s->nservers ||
        r->entry >= GS_MAX_GPUS) {
        return 0;
    }
    for (int k = 0; k < i; k++) {
        if (s->rank[k].rank == r->rank) {
            return 0;
        }
    }
    return 1;
}

/* Entry i is an MPS server (not a GPU of a job without MPS). */
static int server_shown(const gs_status_t *s, int i)
{
    /* (a job's entry on the user's shared MPS may not know its daemon yet) */
    return strcmp(s->mps, "on") == 0 && (s->server[i].daemon_pid > 0 || s->shared[0] != '\0');
}

static int place_shown(int per, const gs_status_t *s, int i)
{
    return per == PER_RANK ? rank_shown(s, i) : per == PER_SERVER ? server_shown(s, i) : 1;
}

static void family(FILE *f, const family_t *m, const gs_status_t *s, int n)
{
    int header = 0;
    for (int j = 0; j < n; j++) {
        if (!job_shown(s, j)) {
            continue;
        }
        int count = m->per == PER_RANK ? s[j].nranks : m->per == PER_SERVER ? s[j].nservers : 1;
        int max = m->per == PER_RANK ? GS_STATUS_MAX_RANKS : GS_MAX_GPUS;
        for (int i = 0; i < count && i < max; i++) {
            long long v;
            if (!place_shown(m->per, &s[j], i) || !m->value(&s[j], i, &v)) {
                continue;
            }
            if (!header) { /* a family without samples is not written at all */
                fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", m->name, m->help, m->name);
                header = 1;
            }
            sample(f, m, &s[j], i, v);
        }
    }
}

void gs_status_print_prometheus(FILE *f, const gs_status_t *s, int n)
{
    for (size_t m = 0; m < sizeof(families) / sizeof(families[0]); m++) {
        family(f, &families[m], s, n);
    }
}
