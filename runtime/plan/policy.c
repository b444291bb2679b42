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

static void off(gs_plan_t *plan, int notice, const char *reason)
{
    plan->use_mps = 0;
    plan->notice = notice;
    snprintf(plan->reason, sizeof(plan->reason), "%s", reason);
}

int gs_policy_plan_compute(const gs_config_t *cfg, int local_size, int ngpus, int have_control,
                           const char *control_error, gs_plan_t *plan, gs_error_t *err)
{
    int used, most = 0, busiest = 0;

    memset(plan, 0, sizeof(*plan));
    if (local_size < 1 || ngpus < 0) {
        return gs_error_set(err, EINVAL, "invalid plan input: %d local ranks, %d GPUs", local_size,
                            ngpus);
    }
    if (ngpus > GS_MAX_GPUS) {
        ngpus = GS_MAX_GPUS;
    }
    char mps[64], why[300];
    gs_config_opt(cfg, "mps", mps, sizeof(mps));
    if (cfg->mps == GS_MPS_OFF) {
        snprintf(why, sizeof(why), "MPS disabled (%s=off)", mps);
        off(plan, 0, why);
        return 0;
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
        return 0;
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
        return 0;
    }

    /* Blocks of consecutive local ranks, sizes differing by at most one. */
    used = ngpus < local_size ? ngpus : local_size;
    plan->ngpus = used;
    for (int g = 0; g < used; g++) {
        int first = (int)((long)g * local_size / used);
        int next = (int)((long)(g + 1) * local_size / used);
        gs_gpu_share_t *s = &plan->gpu[g];
        s->first_rank = first;
        s->nranks = next - first;
        if (s->nranks > most) {
            most = s->nranks;
            busiest = g;
        }
        switch (cfg->pct_mode) {
        case GS_PCT_OFF:
            s->pct_set = 0;
            break;
        case GS_PCT_FIXED:
            s->pct_set = 1;
            s->pct = cfg->pct;
            break;
        default:
            s->pct_set = 1;
            s->pct = gs_policy_default_percentage(s->nranks);
            break;
        }
    }
    if (cfg->mps == GS_MPS_AUTO && most < 2) {
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
    if (most > GS_MPS_MAX_CLIENTS && cfg->mps == GS_MPS_AUTO) {
        /* auto means MPS where it helps: a job MPS cannot serve runs as
         * under plain mpirun (time-sliced), with a notice. */
        snprintf(why, sizeof(why),
                 "%d ranks share GPU %d, more than the %d clients MPS serves per GPU; running "
                 "without MPS (start at most %d ranks per GPU on this node to use it)",
                 most, busiest, GS_MPS_MAX_CLIENTS, GS_MPS_MAX_CLIENTS * used);
        off(plan, 1, why);
        return 0;
    }
    if (most > GS_MPS_MAX_CLIENTS) {
        return gs_error_set(err, E2BIG,
                            "%d ranks would share GPU %d, but MPS serves at most %d clients per "
                            "GPU; start at most %d ranks per GPU on this node, or use %s=off",
                            most, busiest, GS_MPS_MAX_CLIENTS, GS_MPS_MAX_CLIENTS * used, mps);
    }
    plan->use_mps = 1;
    return 0;
}

int gs_policy_plan_gpu_of_rank(const gs_plan_t *plan, int local_rank)
{
    for (int g = 0; g < plan->ngpus; g++) {
        const gs_gpu_share_t *s = &plan->gpu[g];
        if (local_rank >= s->first_rank && local_rank < s->first_rank + s->nranks) {
            return g;
        }
    }
    return -1;
}
