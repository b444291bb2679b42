/* SPDX-License-Identifier: BSD-3-Clause */
/* Whose processes run on a GPU: what counts as load when a job packs its
 * ranks over the node (runtime/plan/pack.h). The user's own gsrun ranks and
 * MPS servers are counted by the user's placement record instead; anything
 * else (another user's, a program of the user's outside gsrun, a process
 * NVML names but this PID namespace cannot see) counts one each. */
#ifndef GS_GPU_USAGE_H
#define GS_GPU_USAGE_H

#include <sys/types.h>

#include "runtime/gpu/gpu.h"

/* A GPU with no process listed but more memory than this in use is busy
 * with something NVML does not show here (another container's processes):
 * it counts as one foreign process. An idle H100 or H200 shows well under
 * it (driver 580). */
#define GS_USAGE_BUSY_MIB 2048

/* Foreign load of g as its listing (gs_gpu_discover) saw it, for the user
 * uid; proc_root is "/proc" (tests give another). */
int gs_usage_foreign(const gs_gpu_t *g, uid_t uid, const char *proc_root);

#endif
