/* SPDX-License-Identifier: BSD-3-Clause */
/* Policy: which GPU each node-local rank uses, whether MPS runs, and each
 * rank's share of its GPU. Pure functions of their inputs, so every rank and
 * every front end computes the same plan. */
#ifndef GS_POLICY_H
#define GS_POLICY_H

#include <stddef.h>

#include "runtime/core/config.h"
#include "runtime/core/limits.h"
#include "runtime/core/gs_error.h"

/* Clients one MPS server takes. NVIDIA's MPS documentation: 60 client
 * contexts per device from CUDA 13.1 on, "increased from 48 ... on CUDA 13.0
 * and prior". Measured (tests/gpu/client_limit.sh): 48 on an H200 and an H100
 * with driver 580 (CUDA 13.0); the 49th client fails with
 * cudaErrorDevicesUnavailable. */
#define GS_MPS_CLIENTS_OLD 48
#define GS_MPS_CLIENTS_NEW 60
#define GS_MPS_CLIENTS_NEW_FROM 13010 /* CUDA 13.1, as NVML reports it */

/* One MPS server's share of a GPU: a GPU with more ranks than one server
 * takes has several servers (control daemons with pipe dirs of their own),
 * each serving a block of that GPU's ranks. */
typedef struct {
    int gpu;        /* the GPU, as an index into the visible GPUs */
    int server;     /* which of its servers, from 0 */
    int gpu_servers; /* how many that GPU has */
    int gpu_ranks;  /* ranks on that GPU, all its servers together */
    int first_rank; /* first node-local rank this server serves */
    int nranks;     /* ranks it serves */
    int pct_set;    /* CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is set for them */
    double pct;
    char pct_text[24]; /* pct as the ranks get it ("12.5"), "" when unset: formatted once */
} gs_server_share_t;

/* The entries of server[] are servers, in server-major order: every GPU's
 * first server (entry g is GPU g's, g < nused), then every second server,
 * and so on, so that the daemons an early agent starts on every GPU before
 * the plan keep their places. */
typedef struct {
    int use_mps;
    int notice;           /* reason is worth telling the user without -v */
    int nservers;         /* entries of server[] */
    int nused;            /* GPUs in use (a prefix of the visible ones) */
    int clients_per_server; /* the limit the plan used */
    gs_server_share_t server[GS_MAX_GPUS];
    char reason[256];     /* why MPS is off, when it is */
} gs_plan_t;

/* Device memory one MPS client's context takes: free memory seen from
 * inside with 1 and with 60 contexts on an H100 (driver 580, CUDA 13.0,
 * tests/gpu/servers.sh): 54 MiB a client under MPS (525 MiB a process
 * without MPS). */
#define GS_MPS_CONTEXT_MIB 54

/* When nranks contexts on a device of mem_mib would leave less than a tenth
 * of it for the program: 1 and one line in buf saying the numbers and what
 * to do; else 0. mem_mib 0 (unknown): 0. */
int gs_policy_memory_warning(int gpu, int nranks, unsigned long long mem_mib, char *buf,
                             size_t len);

/* The linger a job's lease asks of the user's shared servers: the setting,
 * or under auto the default, 0 where one of the job's GPUs is in an
 * exclusive compute mode (an idle server there keeps others off it). */
int gs_policy_linger(const gs_config_t *cfg, int any_exclusive);

/* Whether a job of at most ranks_at_most ranks (0: unknown) on a node of
 * ngpus visible GPUs may want MPS before its plan is made: not with MPS
 * off, nor under auto with a GPU for every rank and no sharing (the plan
 * then gives each rank its own GPU without MPS, decide_mps). An early agent
 * starts no MPS on a guess that cannot pay off. */
int gs_policy_may_need_mps(const gs_config_t *cfg, int ranks_at_most, int ngpus);

/* Default share: 100 / (0.5 n), at most 100. */
double gs_policy_default_percentage(int nranks);

/* How many clients one server takes: the setting (cfg_clients > 0), else
 * by the driver's CUDA version (NVML: 13000 for 13.0; 0 unknown, taken as
 * the older, smaller limit). */
int gs_policy_clients_per_server(int cfg_clients, int cuda_version);

/* The same where the driver is not asked again: the setting, else the limit
 * the node's agent found and published (known > 0), else the older one. */
int gs_policy_clients_per_server_known(int cfg_clients, int known);

/* Formats a percentage for CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: at most four
 * decimals, no trailing zeros ("12.5", "66.6667", "100"). */
void gs_policy_format_percentage(double pct, char *buf, size_t len);

/* Computes the plan for local_size ranks on a node with ngpus visible GPUs:
 * blocks of consecutive ranks per GPU, and on a GPU with more ranks than
 * clients_per_server takes, ceil(n / clients_per_server) servers with
 * blocks whose sizes differ by at most one. have_control: the MPS control
 * binary was found (with its error text in control_error otherwise).
 * Returns -EINVAL for impossible inputs, -ENODEV when MPS is required
 * (--mps=on) but there is no GPU or control program, -E2BIG when the
 * servers would not fit GS_MAX_GPUS: the job must not start; err says why
 * and what to do. Under auto those cases give a plan without MPS and a
 * notice. */
int gs_policy_plan_compute(const gs_config_t *cfg, int local_size, int ngpus, int have_control,
                           const char *control_error, int clients_per_server, gs_plan_t *plan,
                           gs_error_t *err);

/* The same with each GPU's rank count given (counts[g] > 0 for the GPUs
 * used, a prefix, 0 after; their sum local_size): the packing's
 * (runtime/plan/pack.h). counts NULL: blocks as above. With the user's
 * shared servers (share_node) a rank alone on its GPU is an MPS client too. */
int gs_policy_plan_packed(const gs_config_t *cfg, int local_size, int ngpus, const int *counts,
                          int have_control, const char *control_error, int clients_per_server,
                          gs_plan_t *plan, gs_error_t *err);

/* Index of the server in the plan that local_rank uses, or -1. */
int gs_policy_plan_server_of_rank(const gs_plan_t *plan, int local_rank);

#endif
