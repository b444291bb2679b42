/* SPDX-License-Identifier: BSD-3-Clause */
/* Whose processes run on a GPU: what counts as load when a job packs its
 * ranks over the node (runtime/plan/pack.h). The user's own gsrun ranks and
 * MPS servers of jobs in the same TMPDIR are counted by the user's placement
 * record instead; an MPS server on a GPU in the Default compute mode is no
 * load (its clients are listed and count) when NVML's memory of it proves it
 * one (GS_USAGE_SERVER_MIB); anything else (another user's, a
 * program of the user's outside gsrun, a gsrun job of the user's with
 * another TMPDIR and so another record, a process NVML names but this PID
 * namespace cannot see, a server on an exclusive GPU) counts one each. */
#ifndef GS_GPU_USAGE_H
#define GS_GPU_USAGE_H

#include <sys/types.h>

#include "runtime/gpu/gpu.h"

/* A GPU with no process listed but more memory than this in use is busy
 * with something NVML does not show here (another container's processes):
 * it counts as one foreign process. An idle H100 or H200 shows well under
 * it (driver 580). */
#define GS_USAGE_BUSY_MIB 2048

/* An MPS server is told from a program that only takes its name by the
 * GPU memory NVML gives the process: measured on an H200 (driver 580,
 * tests/gpu/load_name.sh), a server holds 66 MiB, idle or with four
 * clients (each client is listed with its own 520 MiB), while a CUDA
 * program renamed nvidia-cuda-mps-server holds 646 MiB once its context is
 * made. A process named as a server with more than this, or whose memory
 * NVML cannot tell, counts as load. */
#define GS_USAGE_SERVER_MIB 256

/* The longest job dir compared. */
#define GS_USAGE_JOB_MAX 1024

/* Foreign load of g as its listing (gs_gpu_discover) saw it, for the user
 * uid whose placement record is in tmpdir (NULL: the user's gsrun jobs are
 * all counted there); proc_root is "/proc" (tests give another). */
int gs_usage_foreign(const gs_gpu_t *g, uid_t uid, const char *proc_root, const char *tmpdir);

#endif
