/* SPDX-License-Identifier: BSD-3-Clause */
/* The settings: their defaults and the table of keys (option, variable,
 * what it takes, how it is set and written back). config.c reads them
 * from the command line and the environment. */
#include "gs_autoconf.h"

#include "runtime/core/config.h"
#include "runtime/core/limits.h"
#include "runtime/core/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int share_auto_node(void);

void gs_config_init(gs_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->mps = GS_MPS_AUTO;
    cfg->pct_mode = GS_PCT_AUTO;
    snprintf(cfg->control, sizeof(cfg->control), "%s", GS_DEFAULT_CONTROL);
    snprintf(cfg->launcher, sizeof(cfg->launcher), "%s", GS_DEFAULT_LAUNCHER);
    cfg->timeout_s = GS_DEFAULT_TIMEOUT_S;
    cfg->gpu_bind = 1;
    cfg->prestart = 1;
    cfg->share_auto = 1;
    cfg->share_node = share_auto_node();
    cfg->linger_auto = 1;
    cfg->linger_s = GS_DEFAULT_LINGER_S;
    cfg->fault_grace_s = GS_DEFAULT_FAULT_GRACE_S;
}

static int parse_int_range(const char *text, int lo, int hi, int *out)
{
    long v = 0;
    if (*text == '\0' || strlen(text) > 9) {
        return -EINVAL;
    }
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return -EINVAL;
        }
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi) {
        return -EINVAL;
    }
    *out = (int)v;
    return 0;
}

static int parse_bool(const char *text, int *out)
{
    if (strcmp(text, "1") == 0 || strcmp(text, "yes") == 0 || strcmp(text, "true") == 0) {
        *out = 1;
    } else if (strcmp(text, "0") == 0 || strcmp(text, "no") == 0 || strcmp(text, "false") == 0) {
        *out = 0;
    } else {
        return -EINVAL;
    }
    return 0;
}

/* --- the settings table: each row's reader and writer ------------------- */

static int set_mps(gs_config_t *c, const char *v)
{
    return gs_config_parse_mps(v, &c->mps);
}
static void fmt_mps(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", gs_config_mps_name(c->mps));
}
static int set_pct(gs_config_t *c, const char *v)
{
    gs_pct_mode_t mode;
    double pct;
    int rc = gs_config_parse_percentage(v, &mode, &pct);
    if (rc == 0) {
        c->pct_mode = mode;
        c->pct = pct;
    }
    return rc;
}
static void fmt_pct(const gs_config_t *c, char *b, size_t n)
{
    if (c->pct_mode == GS_PCT_FIXED) {
        snprintf(b, n, "%g", c->pct);
    } else {
        snprintf(b, n, "%s", c->pct_mode == GS_PCT_OFF ? "off" : "auto");
    }
}
static int set_control(gs_config_t *c, const char *v)
{
    snprintf(c->control, sizeof(c->control), "%s", v);
    return 0;
}
static void fmt_control(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->control);
}
static int set_timeout(gs_config_t *c, const char *v)
{
    return parse_int_range(v, 1, GS_MAX_TIMEOUT_S, &c->timeout_s);
}
static void fmt_timeout(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->timeout_s);
}
static int set_gpu_bind(gs_config_t *c, const char *v)
{
    if (strcmp(v, "closest") != 0 && strcmp(v, "none") != 0) {
        return -EINVAL;
    }
    c->gpu_bind = strcmp(v, "closest") == 0;
    return 0;
}
static void fmt_gpu_bind(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->gpu_bind ? "closest" : "none");
}
static int set_mem(gs_config_t *c, const char *v)
{
    return gs_config_parse_size_mb(v, &c->mem_limit_mb);
}
static void fmt_mem(const gs_config_t *c, char *b, size_t n)
{
    if (c->mem_limit_mb > 0) {
        snprintf(b, n, "%lldM", c->mem_limit_mb);
    } else {
        snprintf(b, n, "off");
    }
}
static int set_clients(gs_config_t *c, const char *v)
{
    if (strcmp(v, "auto") == 0) {
        c->clients_per_server = 0;
        return 0;
    }
    return parse_int_range(v, 1, GS_MAX_CLIENTS_PER_SERVER, &c->clients_per_server);
}
static void fmt_clients(const gs_config_t *c, char *b, size_t n)
{
    if (c->clients_per_server > 0) {
        snprintf(b, n, "%d", c->clients_per_server);
    } else {
        snprintf(b, n, "auto");
    }
}
static int set_priority(gs_config_t *c, const char *v)
{
    if (strcmp(v, "normal") != 0 && strcmp(v, "low") != 0) {
        return -EINVAL;
    }
    c->priority_low = strcmp(v, "low") == 0;
    return 0;
}
static void fmt_priority(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->priority_low ? "low" : "normal");
}
/* auto: the user's jobs share, except inside a Slurm job step, whose end
 * Slurm's process tracking makes the end of whatever the step started,
 * the shared servers of the step's neighbours too (doc/tuning.md). */
static int share_auto_node(void)
{
    const char *step = getenv("SLURM_STEP_ID");
    return step == NULL || step[0] < '0' || step[0] > '9';
}
void gs_config_share_in_step(gs_config_t *cfg)
{
    if (cfg->share_auto) {
        cfg->share_auto = 0;
        cfg->share_node = 0;
    }
}
static int set_share(gs_config_t *c, const char *v)
{
    if (strcmp(v, "job") != 0 && strcmp(v, "node") != 0 && strcmp(v, "auto") != 0) {
        return -EINVAL;
    }
    c->share_auto = strcmp(v, "auto") == 0;
    c->share_node = c->share_auto ? share_auto_node() : strcmp(v, "node") == 0;
    return 0;
}
static void fmt_share(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->share_auto ? "auto" : c->share_node ? "node" : "job");
}
static int set_linger(gs_config_t *c, const char *v)
{
    int s;
    if (strcmp(v, "auto") == 0) {
        c->linger_auto = 1;
        c->linger_s = GS_DEFAULT_LINGER_S;
        return 0;
    }
    if (parse_int_range(v, 0, GS_MAX_LINGER_S, &s) != 0) {
        return -EINVAL;
    }
    c->linger_auto = 0;
    c->linger_s = s;
    return 0;
}
static void fmt_linger(const gs_config_t *c, char *b, size_t n)
{
    if (c->linger_auto) {
        snprintf(b, n, "auto");
    } else {
        snprintf(b, n, "%d", c->linger_s);
    }
}
static int set_fault_grace(gs_config_t *c, const char *v)
{
    return parse_int_range(v, 0, GS_MAX_LINGER_S, &c->fault_grace_s);
}
static void fmt_fault_grace(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->fault_grace_s);
}
static int set_launcher(gs_config_t *c, const char *v)
{
    snprintf(c->launcher, sizeof(c->launcher), "%s", v);
    return 0;
}
static void fmt_launcher(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->launcher);
}
static int set_dry_run(gs_config_t *c, const char *v)
{
    return parse_bool(v, &c->dry_run);
}
static void fmt_dry_run(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->dry_run ? 1 : 0);
}
static int set_verbose(gs_config_t *c, const char *v)
{
    return parse_int_range(v, 0, 9, &c->verbose);
}
static void fmt_verbose(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->verbose);
}
static int set_prestart(gs_config_t *c, const char *v)
{
    return parse_bool(v, &c->prestart);
}
static void fmt_prestart(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->prestart ? 1 : 0);
}

#define ALL_FRONTS                                                                                 \
    (GS_FRONT_GSRUN | GS_FRONT_BATCH | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS)
const gs_config_key_t gs_config_keys[] = {
    {"mps", "GSRUN_MPS", "auto, on or off", "mps", ALL_FRONTS, 1, set_mps, fmt_mps, "auto|on|off",
     "use MPS: auto when a GPU is present and ranks share it (default), on always (fail "
     "without GPU), off never",
     0},
    {"mps-percentage", "GSRUN_MPS_PERCENTAGE", "auto, off, or a number from 1 to 100", "percentage",
     ALL_FRONTS, 1, set_pct, fmt_pct, "auto|off|N",
     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per rank: auto is min(100, 200/n) for n ranks on an MPS "
     "server (unset for an executable that links no MPI library; a script or interpreter "
     "gets it), off leaves it unset "
     "(independent ranks, ensembles: use off; which fits which job: doc/tuning.md), N is a "
     "number from 1 to 100",
     0},
    {"mps-control", "GSRUN_MPS_CONTROL", "the path of nvidia-cuda-mps-control", "control",
     ALL_FRONTS, 1, set_control, fmt_control, "PATH",
     "nvidia-cuda-mps-control to use (default: found in PATH, else in /usr/bin, "
     "/usr/local/nvidia/bin or /usr/local/cuda/bin)",
     0},
    {"mps-timeout", "GSRUN_MPS_TIMEOUT", "whole seconds from 1 to 3600", "timeout", ALL_FRONTS, 1,
     set_timeout, fmt_timeout, "SECONDS", "bound on starting MPS, 1 to 3600 (default 30)", 0},
    {"gpu-bind", "GSRUN_GPU_BIND", "closest or none", "gpu_bind",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 1, set_gpu_bind,
     fmt_gpu_bind, "closest|none",
     "without MPS (one rank per GPU), give each rank its own GPU in CUDA_VISIBLE_DEVICES, the "
     "one nearest its cores (default closest)",
     0},
    {"mps-memory-limit", "GSRUN_MPS_MEMORY_LIMIT",
     "off, or a size such as 4G or 512M (K, M, G, T: powers of 1024; at least 1M)", "memory_limit",
     ALL_FRONTS, 1, set_mem, fmt_mem, "SIZE",
     "device memory each rank may allocate under MPS, e.g. 4G or 512M (default off)", 0},
    {"mps-clients-per-server", "GSRUN_MPS_CLIENTS_PER_SERVER",
     "auto (the driver's limit: 48 up to CUDA 13.0, 60 from 13.1), or a number from 1 to 1024",
     "clients_per_server", ALL_FRONTS, 1, set_clients, fmt_clients, "auto|N",
     "ranks one MPS server takes; a GPU with more gets several servers. auto: the driver's "
     "limit (48 up to CUDA 13.0, 60 from 13.1)",
     0},
    {"mps-priority", "GSRUN_MPS_PRIORITY", "normal or low", "priority", ALL_FRONTS, 1,
     set_priority, fmt_priority, "normal|low",
     "the ranks' priority on their MPS server (CUDA_MPS_CLIENT_PRIORITY 0 or 1): low lets "
     "the work of other jobs on the same server go first (default normal)",
     0},
    /* Not the batch commands': a batch job's steps share the job's servers. */
    {"mps-share", "GSRUN_MPS_SHARE", "auto, job or node", "share",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 1, set_share, fmt_share,
     "auto|job|node",
     "node: the user's jobs on a node share one set of MPS servers, one a GPU, started by "
     "the first and stopped after the last (ensembles, sweeps, concurrent and back-to-back "
     "jobs); job: MPS servers of the job's own; auto (default): node, but job inside a Slurm "
     "job step (doc/tuning.md)",
     0},
    {"mps-linger", "GSRUN_MPS_LINGER", "auto, or whole seconds from 0 to 86400", "linger",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 1, set_linger, fmt_linger,
     "auto|SECONDS",
     "with --mps-share=node: how long the shared MPS servers stay up after the node's last job "
     "of the user ended, for the next one to find them warm; auto (default): 60, but 0 on a "
     "GPU in an exclusive compute mode (doc/tuning.md)",
     0},
    {"mps-fault-grace", "GSRUN_MPS_FAULT_GRACE", "whole seconds from 0 to 86400", "fault_grace",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 1, set_fault_grace, fmt_fault_grace, "SECONDS",
     "once a GPU fault has ended a rank's MPS context (told at once), end the job if that rank "
     "still runs this many seconds later, exiting 75 (default 60; 0: wait as long as it runs, "
     "for a program that goes on without the GPU after a fault; doc/tuning.md)",
     0},
    {"launcher", "GSRUN_LAUNCHER", "the path or name of an Open MPI mpirun", NULL, GS_FRONT_GSRUN,
     1, set_launcher, fmt_launcher, "PATH",
     "the launcher to run: Open MPI's mpirun (default: mpirun in PATH) or Slurm's srun; a "
     "first launcher word does the same: gsrun [options] mpirun|mpiexec|orterun|srun "
     "<arguments>",
     0},
    {"dry-run", "GSRUN_DRY_RUN", "0 or 1", NULL, GS_FRONT_GSRUN, 0, set_dry_run, fmt_dry_run, "1",
     "print the launcher command and settings, run nothing", 0},
    {"verbose", "GSRUN_VERBOSE", "a number from 0 to 9", "verbose",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 0, set_verbose, fmt_verbose,
     "N",
     "report what gsrun set up and tore down; -vv adds a timeline of the job (ms after gsrun "
     "started)",
     'v'},
    /* A measuring switch (doc/benchmarks.md), read from the environment only. */
    {"mps-prestart", "GSRUN_MPS_PRESTART", "0 or 1", NULL, 0, 1, set_prestart, fmt_prestart, NULL,
     NULL, 0},
    {NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0},
};
