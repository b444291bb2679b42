/* SPDX-License-Identifier: BSD-3-Clause */
/* The node's GPUs listed again and again in a thread of their own, for the
 * user's shared agent: NVML's answers take hundreds of ms while the driver
 * creates other contexts (two dozen jobs starting at once), and the shared
 * agent's one loop, which answers every job's lease, must never wait for
 * them. The loop takes the latest listing at once and asks for a fresh one;
 * a job that needs a fresher one than there is waits for it, alone. */
#ifndef GS_AGENT_LISTER_H
#define GS_AGENT_LISTER_H

#include "runtime/gpu/gpu.h"

typedef struct gs_lister gs_lister_t;

/* Starts the thread (NVML kept started: gs_gpu_hold); NULL when it cannot. */
gs_lister_t *gs_lister_start(void);

/* The latest listing into out when one exists: its age in ms, or -1 (none
 * yet). Asks for a fresh one when it is older than fresh_ms (or none). */
long long gs_lister_get(gs_lister_t *l, gs_gpu_list_t *out, int fresh_ms);

/* How long the listing under way has run, in ms; 0 when none runs (a
 * listing past a second is NVML slow or stuck: jobs are not kept waiting). */
long long gs_lister_busy_ms(gs_lister_t *l);

/* Ends the thread and frees it all: 0; or, when the listing under way has
 * not ended within bound_ms (a hung NVML call), -ETIMEDOUT, the thread left
 * to itself (the process must then end without NVML's exit handlers:
 * _exit). */
int gs_lister_stop(gs_lister_t *l, int bound_ms);

#endif
