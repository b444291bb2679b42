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

/* MPS clients per GPU. NVIDIA documents 48 for Volta and later, 60 in newer
 * documents. Measured on an H200 with driver 580 (tests/gpu/client_limit.sh):
 * 48 clients run, the 49th fails ("Maximum number of clients (48) reached"). */
#define GS_MPS_MAX_CLIENTS 48

typedef struct {
    int first_rank; /* first node-local rank on this GPU */
    int nranks;     /* ranks sharing it */
    int pct_set;    /* CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is set for them */
    double pct;
} gs_gpu_share_t;

typedef struct {
    int use_mps;
    int notice;           /* reason is worth telling the user without -v */
    int ngpus;            /* GPUs in use (a prefix of the visible ones) */
    gs_gpu_share_t gpu[GS_MAX_GPUS];
    char reason[256];     /* why MPS is off, when it is */
} gs_plan_t;

/* Default share: 100 / (0.5 n), at most 100. */
double gs_policy_default_percentage(int nranks);

/* Formats a percentage for CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: at most four
 * decimals, no trailing zeros ("12.5", "66.6667", "100"). */
void gs_policy_format_percentage(double pct, char *buf, size_t len);

/* Computes the plan for local_size ranks on a node with ngpus visible GPUs.
 * have_control: the MPS control binary was found (with its error text in
 * control_error otherwise). Returns -EINVAL for impossible inputs and
 * -ENODEV or -E2BIG when MPS is required (--mps=on) but there is no GPU or
 * control program, or more ranks share a GPU than MPS serves: the job must
 * not start; err says why and what to do. Under auto those cases give a
 * plan without MPS and a notice. */
int gs_policy_plan_compute(const gs_config_t *cfg, int local_size, int ngpus, int have_control,
                           const char *control_error, gs_plan_t *plan, gs_error_t *err);

/* Index of the GPU in the plan that local_rank uses, or -1. */
int gs_policy_plan_gpu_of_rank(const gs_plan_t *plan, int local_rank);

#endif
