/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/plan/policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

double gs_policy_default_percentage(int nranks)
{
    double pct;
    if (nranks <= 2) {
        return 100.0;
    }
    pct = 200.0 / (double)nranks;
    return pct > 100.0 ? 100.0 : pct;
}

void gs_policy_format_percentage(double pct, char *buf, size_t len)
{
    size_t n;
    snprintf(buf, len, "%.4f", pct);
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == '0') {
        buf[--n] = '\0';
    }
    if (n > 0 && buf[n - 1] == '.') {
        buf[--n] = '\0';
    }
}

/* Which count the default share divides: the ranks of the rank's own
 * server (1), or of its whole GPU (0). Measured: doc/benchmarks.md. */
#define GS_POLICY_SHARE_OF_SERVER 1

static void off(gs_plan_t *plan, int notice, const char *reason)
{
    plan->use_mps = 0;
    plan->notice = notice;
    snprintf(plan->reason, sizeof(plan->reason), "%s", reason);
}

int gs_policy_memory_warning(int gpu, int nranks, unsigned long long mem_mib, char *buf,
                             size_t len)
{
    unsigned long long need = (unsigned long long)nranks * GS_MPS_CONTEXT_MIB;
    if (mem_mib == 0 || nranks < 1 || need * 10 <= mem_mib * 9) {
        return 0;
    }
    unsigned long long fit = mem_mib * 9 / 10 / GS_MPS_CONTEXT_MIB;
    snprintf(buf, len,
             "warning: GPU %d: %d ranks' MPS contexts (about %d MiB each) take about %llu of "
             "its %llu MiB, leaving less than a tenth for the program; run at most %llu ranks "
             "on it (fewer ranks per node, or more GPUs)",
             gpu, nranks, GS_MPS_CONTEXT_MIB, need, mem_mib, fit);
    return 1;
}

int gs_policy_clients_per_server(int cfg_clients, int cuda_version)
{
    if (cfg_clients > 0) {
        return cfg_clients;
    }
    return cuda_version >= GS_MPS_CLIENTS_NEW_FROM ? GS_MPS_CLIENTS_NEW : GS_MPS_CLIENTS_OLD;
}

int gs_policy_clients_per_server_known(int cfg_clients, int known)
{
    if (cfg_clients <= 0 && known > 0) {
        return known;
    }
    return gs_policy_clients_per_server(cfg_clients, 0);
}

static void set_share(const gs_config_t *cfg, gs_server_share_t *s)
{
    s->pct_text[0] = '\0';
    switch (cfg->pct_mode) {
    case GS_PCT_OFF:
        s->pct_set = 0;
        break;
    case GS_PCT_FIXED:
        s->pct_set = 1;
        s->pct = cfg->pct;
        break;
    default:
        /* Servers on one GPU time-slice with each other: a rank's share is a
         * share of its own server's slice (doc/benchmarks.md, "Several
         * servers on one GPU"). */
        s->pct_set = 1;
        s->pct = gs_policy_default_percentage(GS_POLICY_SHARE_OF_SERVER ? s->nranks : s->gpu_ranks);
        break;
    }
    if (s->pct_set) {
        gs_policy_format_percentage(s->pct, s->pct_text, sizeof(s->pct_text));
    }
}

/* Deals GPU g's block [first, first + n) over ceil(n / limit) servers,
 * blocks differing by at most one, into the server-major entries. */
static int deal_servers(const gs_config_t *cfg, int used, int limit, const int *first,
                        const int *n, gs_plan_t *plan)
{
    int most = 0, count = 0;
    plan->nservers = 0;
    for (int g = 0; g < used; g++) {
        int ns = (n[g] + limit - 1) / limit;
        most = ns > most ? ns : most;
        count += ns;
    }
    if (count > GS_MAX_GPUS) {
        return -E2BIG;
    }
    for (int k = 0; k < most; k++) {
        for (int g = 0; g < used; g++) {
            int ns = (n[g] + limit - 1) / limit;
            if (k >= ns) {
                continue;
            }
            gs_server_share_t *s = &plan->server[plan->nservers++];
            s->gpu = g;
            s->server = k;
            s->gpu_servers = ns;
            s->gpu_ranks = n[g];
            s->first_rank = first[g] + (int)((long)k * n[g] / ns);
            s->nranks = first[g] + (int)((long)(k + 1) * n[g] / ns) - s->first_rank;
            set_share(cfg, s);
        }
    }
    return 0;
}

int gs_policy_plan_compute(const gs_config_t *cfg, int local_size, int ngpus, int have_control,
                           const char *control_error, int clients_per_server, gs_plan_t *plan,
                           gs_error_t *err)
{
    return gs_policy_plan_packed(cfg, local_size, ngpus, NULL, have_control, control_error,
                                 clients_per_server, plan, err);
}

/* Where the job's setting, the site or the node decides against MPS before
 * any rank is dealt: 1 with the plan off (or -errno with err under
 * --mps=on), 0 to go on. */
static int decided_first(const gs_config_t *cfg, int ngpus, const char *mps, gs_plan_t *plan,
                         gs_error_t *err)
{
    char why[300];
    if (cfg->mps == GS_MPS_OFF) {
        snprintf(why, sizeof(why), "MPS disabled (%s=off)", mps);
        off(plan, 0, why);
        return 1;
    }
    if (cfg->site_mps[0] != '\0') {
        /* A second daemon on the GPUs of the site's would take them from
         * the other jobs that share them: the job keeps Slurm's share. */
        if (cfg->mps == GS_MPS_ON) {
            return gs_error_set(err, EBUSY,
                                "%s=on: Slurm's gres/mps gives this job a share of the site's "
                                "MPS daemon (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s), and gsrun "
                                "starts no second one; ask Slurm for GPUs (--gpus-per-node, "
                                "--gres=gpu) instead of mps, or use %s=auto",
                                mps, cfg->site_mps, mps);
        }
        snprintf(why, sizeof(why),
                 "Slurm's gres/mps gives this job a share of the site's MPS daemon "
                 "(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s): gsrun starts none and leaves "
                 "the share as Slurm set it",
                 cfg->site_mps);
        off(plan, 1, why);
        return 1;
    }
    if (ngpus == 0) {
        if (cfg->mps == GS_MPS_ON) {
            return gs_error_set(err, ENODEV,
                                "%s=on: no NVIDIA GPU is visible on this node (NVML found none, "
                                "or CUDA_VISIBLE_DEVICES hides them); run on a GPU node or use "
                                "%s=auto",
                                mps, mps);
        }
        off(plan, 1, "no NVIDIA GPU found on this node; running without MPS");
        return 1;
    }
    return 0;
}

/* Blocks of consecutive local ranks per GPU, first[g] and n[g] for the
 * GPUs used: the packing's counts (a prefix of the GPUs), else sizes
 * differing by at most one. The number of GPUs used, or -EINVAL. */
static int rank_blocks(int local_size, int ngpus, const int *counts, int *first, int *n,
                       gs_error_t *err)
{
    int used = ngpus < local_size ? ngpus : local_size;
    if (counts != NULL) {
        int sum = 0;
        for (used = 0; used < ngpus && counts[used] > 0; used++) {
            sum += counts[used];
        }
        if (sum != local_size) {
            return gs_error_set(err, EINVAL, "invalid plan input: %d ranks packed, %d local ranks",
                                sum, local_size);
        }
    }
    for (int g = 0; g < used; g++) {
        if (counts != NULL) {
            first[g] = g == 0 ? 0 : first[g - 1] + n[g - 1];
            n[g] = counts[g];
        } else {
            first[g] = (int)((long)g * local_size / used);
            n[g] = (int)((long)(g + 1) * local_size / used) - first[g];
        }
    }
    return used;
}

/* Once the ranks are dealt (most: the most on one GPU; dealt: whether the
 * servers fit a node): MPS on, or off with why (-errno under --mps=on). */
static int decide_mps(const gs_config_t *cfg, int local_size, int most, int dealt,
                      int have_control, const char *control_error, const char *mps,
                      gs_plan_t *plan, gs_error_t *err)
{
    char why[300];
    int per = plan->clients_per_server;
    /* Sharing the user's servers, a rank alone on its GPU is still their
     * client: the user's next job may land beside it, and a context outside
     * MPS would time-slice with the shared server (doc/tuning.md). */
    if (cfg->mps == GS_MPS_AUTO && most < 2 && !cfg->share_node) {
        snprintf(why, sizeof(why), "every rank has a GPU of its own; MPS not needed (%s=on forces it)",
                 mps);
        off(plan, 0, why);
        return 0;
    }
    /* Only where MPS would run does a missing control program matter. */
    if (!have_control) {
        if (cfg->mps == GS_MPS_ON) {
            return gs_error_set(err, ENODEV, "%s=on: %s", mps,
                                control_error ? control_error : "no MPS control binary");
        }
        snprintf(why, sizeof(why), "%s; running without MPS",
                 control_error ? control_error : "no MPS control binary");
        off(plan, 1, why);
        return 0;
    }
    if (dealt != 0) {
        if (cfg->mps == GS_MPS_ON) {
            return gs_error_set(err, E2BIG,
                                "%s=on: %d ranks on this node need more than the %d MPS servers "
                                "gsrun starts per node (%d clients each); start at most %d "
                                "ranks per node, or use %s=off",
                                mps, local_size, GS_MAX_GPUS, per, GS_MAX_GPUS * per, mps);
        }
        snprintf(why, sizeof(why),
                 "%d ranks on this node need more than the %d MPS servers gsrun starts per "
                 "node (%d clients each); running without MPS",
                 local_size, GS_MAX_GPUS, per);
        off(plan, 1, why);
        return 0;
    }
    plan->use_mps = 1;
    return 0;
}

int gs_policy_plan_packed(const gs_config_t *cfg, int local_size, int ngpus, const int *counts,
                          int have_control, const char *control_error, int clients_per_server,
                          gs_plan_t *plan, gs_error_t *err)
{
    int used, most = 0, first[GS_MAX_GPUS], n[GS_MAX_GPUS], rc;
    char mps[64];

    memset(plan, 0, sizeof(*plan));
    if (local_size < 1 || ngpus < 0 || clients_per_server < 1) {
        return gs_error_set(err, EINVAL,
                            "invalid plan input: %d local ranks, %d GPUs, %d clients per server",
                            local_size, ngpus, clients_per_server);
    }
    if (ngpus > GS_MAX_GPUS) {
        ngpus = GS_MAX_GPUS;
    }
    plan->clients_per_server = clients_per_server;
    gs_config_opt(cfg, "mps", mps, sizeof(mps));
    if ((rc = decided_first(cfg, ngpus, mps, plan, err)) != 0) {
        return rc < 0 ? rc : 0;
    }
    if ((used = rank_blocks(local_size, ngpus, counts, first, n, err)) < 0) {
        return used;
    }
    plan->nused = used;
    for (int g = 0; g < used; g++) {
        most = n[g] > most ? n[g] : most;
    }
    /* The servers, listed even where MPS turns out off (the GPUs the ranks
     * are given); too many for a node only matters once MPS is on. */
    int dealt = deal_servers(cfg, used, clients_per_server, first, n, plan);
    return decide_mps(cfg, local_size, most, dealt, have_control, control_error, mps, plan, err);
}

int gs_policy_plan_server_of_rank(const gs_plan_t *plan, int local_rank)
{
    for (int g = 0; g < plan->nservers; g++) {
        const gs_server_share_t *s = &plan->server[g];
        if (local_rank >= s->first_rank && local_rank < s->first_rank + s->nranks) {
            return g;
        }
    }
    return -1;
}

int gs_policy_linger(const gs_config_t *cfg, int any_exclusive)
{
    if (!cfg->linger_auto) {
        return cfg->linger_s;
    }
    return any_exclusive ? 0 : GS_DEFAULT_LINGER_S;
}

int gs_policy_may_need_mps(const gs_config_t *cfg, int ranks_at_most, int ngpus)
{
    if (cfg->mps == GS_MPS_OFF) {
        return 0;
    }
    return !(cfg->mps == GS_MPS_AUTO && !cfg->share_node && ranks_at_most > 0 &&
             ranks_at_most <= ngpus);
}
