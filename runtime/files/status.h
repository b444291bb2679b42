/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun status`: what each node agent is running, in a file it rewrites
 * (temporary name + rename) whenever something changes, so that readers
 * never talk to the agent or disturb the job. <node dir>/status holds
 * "key value" lines; GPU keys are "gpu.N.key". */
#ifndef GS_STATUS_H
#define GS_STATUS_H

#include <stdio.h>

#include "runtime/core/gs_error.h"
#include "runtime/files/ledger.h"
#include "runtime/files/record.h"
#include "runtime/plan/policy.h"

#define GS_STATUS_FILE "status"
/* Far more than a node agent writes (64 servers, 64 jobs each). */
#define GS_STATUS_MAX_BYTES (1 << 20)

typedef struct {
    char uuid[96];
    char name[96];
    int daemon_pid;
    int server_pid;
    char core[96];      /* where the daemon is pinned, as -v shows it */
    char pct[24];       /* the ranks' CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, "" unset */
    char ranks[256];    /* local ranks given this GPU ("0-3", "0,2,4") */
    int registered;
    int alive;
    int gpu;            /* the GPU (index among the visible ones) */
    int server;         /* which of its MPS servers, from 0 */
    int gpu_servers;    /* how many it has (0 in old files: 1) */
    char pipe_dir[256]; /* the server's CUDA_MPS_PIPE_DIRECTORY, "" none */
    char jobs[256];     /* a shared server (--mps-share=node): the jobs it serves,
                         * "<job>:<ranks> ...", "" none */
    char fault[512];    /* its server hit a GPU fault: when, and who MPS ended or who
                         * still holds the faulted server; "" none */
    int node_gpu;       /* the GPU's index on the node, as nvidia-smi shows it (NVML's) */
    char wedged[320];   /* its MPS did not answer (stopped, or no answer within the
                         * bound): which process, and what gsrun did; "" never */
    char clients[160];  /* its ranks that MPS lists as its clients: "4/4", the others by
                         * rank and state ("3/4 2:no-mps"); "" not known (deprecated for
                         * the ranks' objects: kept one release) */
    int nclients;       /* its ranks that are MPS clients of it now */
    /* GPU memory (MiB) as NVML gave it at the last look, GS_STATUS_MIB_UNKNOWN when
     * it could not tell: the server process's own, and its ranks' (alive) in all. */
    long long server_mib;
    long long clients_mib;
} gs_status_server_t;

/* Memory NVML could not tell (no GPU, no look yet, a driver without the MPS
 * listing): shown as "unknown" (JSON null, no metric), never as 0. */
#define GS_STATUS_MIB_UNKNOWN (-1LL)
/* Ranks a status lists (a node's local ranks; past it they are counted only). */
#define GS_STATUS_MAX_RANKS 1024

/* One rank of the job on this node: "rank.<i>.key value" in the file, an
 * object of the JSON's "ranks" array. */
typedef struct {
    int rank;           /* its local rank */
    int pid;            /* its registered process, 0 not yet */
    int entry;          /* its server: the index in server[], -1 none */
    char state[16];     /* its MPS state as the driver shows it: "client", "no-mps", ... */
    int alive;
    long long memory_mib; /* its processes' GPU memory at NVML's last look (MiB) */
    long long peak_mib;   /* the largest of those looks while it ran */
} gs_status_rank_t;

typedef struct {
    char job[96];       /* the job dir's name: gsrun.XXXXXX, gsrun.slurm-<job>.<step>
                         * (srun --mps), gsrun.job-<id> (gsrun prolog) */
    char node[64];
    char job_dir[256];
    char mps[16];       /* on, off, error; "starting" before the agent wrote */
    char message[256];  /* why MPS is off */
    int uid;
    int agent_pid;
    int launcher_pid;   /* mpirun or orted on this node */
    int gsrun_pid;      /* 0 when gsrun is not on this node */
    long long started_ms; /* wall clock (ms since the epoch) */
    long long memory_limit_mb;
    int local_size;
    int registered;
    int alive;
    char shared[256];   /* a job on the user's shared MPS (--mps-share=node): its node
                         * dir; the shared agent itself: "node"; "" neither */
    char pids[2048];    /* "<local rank>:<PID> ..." of every registration: MPS's log
                         * names PIDs, other jobs' agents name them as ranks */
    int nservers;       /* entries of server[]: MPS servers, or GPUs without MPS */
    gs_status_server_t server[GS_MAX_GPUS];
    long long memory_every_ms; /* how often NVML's memory is looked at; 0 never */
    int nranks;         /* entries of rank[] */
    gs_status_rank_t rank[GS_STATUS_MAX_RANKS];
    int stale;          /* reader: the agent is gone but its dirs are left */
} gs_status_t;

/* The rows (runtime/files/record.h): the job's, then each server's
 * ("gpu.<entry>.<key>" in the file, the "gpus" array in the JSON). A new
 * field is a row here. */
extern const gs_rec_field_t gs_status_fields[];
extern const gs_rec_field_t gs_status_server_fields[];
extern const gs_rec_field_t gs_status_rank_fields[];

/* Seconds since the agent started, 0 if not known. */
double gs_status_uptime_s(const gs_status_t *s, long long now_ms);

int gs_status_write(const char *node_dir, const gs_status_t *s, gs_error_t *err);
int gs_status_read(const char *node_dir, gs_status_t *s, gs_error_t *err);

/* Makes s safe to show: control characters and bytes that are not UTF-8
 * become '?'. */
void gs_status_clean(char *s);
/* The same for the placement record's summary (its entries' names and
 * lines are the user's writing). */
void gs_status_clean_placement(gs_ledger_summary_t *pl);

/* The jobs in tmpdir with a node dir for this node: the caller's, then
 * (all_users, for root) every other user's. Every string in them is clean
 * (gs_status_clean). Returns how many were put in out (at most max). */
int gs_status_scan(const char *tmpdir, int all_users, gs_status_t *out, int max);
/* The user's shared MPS agents (for root, every user's) that run on this
 * node with their dirs elsewhere (started by a job with another TMPDIR),
 * found by their processes: none of the n in listed, up to max into out.
 * Returns how many. */
int gs_status_scan_shared(int all_users, const gs_status_t *listed, int n, gs_status_t *out,
                          int max);

void gs_status_print_text(FILE *f, const gs_status_t *s, int n, long long now_ms);
/* JSON, documented in gsrun(1): {"version":1,"node":...,"jobs":[...]}. */
/* The user's jobs by GPU (the placement record), after the jobs: text, and
 * the JSON's "placement" member (pl NULL: none). gpu_of names a UUID's
 * place in the node's CUDA order (-1: unknown). */
void gs_status_print_placement(FILE *f, const gs_ledger_summary_t *pl, const char *dir,
                               int (*gpu_of)(const char *uuid));
void gs_status_print_json_placed(FILE *f, const char *node, const gs_status_t *s, int n,
                                 long long now_ms, const gs_ledger_summary_t *pl,
                                 int (*gpu_of)(const char *uuid));
void gs_status_print_json(FILE *f, const char *node, const gs_status_t *s, int n,
                          long long now_ms);
/* Gauges in the Prometheus text format 0.0.4 for node_exporter's textfile
 * collector (doc/metrics.md): stale and starting jobs are left out, and so
 * is every sample whose value is not known. */
void gs_status_print_prometheus(FILE *f, const gs_status_t *s, int n);

#endif
