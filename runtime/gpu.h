/* GPU enumeration through NVML, loaded at run time by soname.
 *
 * gsrun never links the driver and never calls cuInit: a process that
 * initialises CUDA with CUDA_MPS_PIPE_DIRECTORY set becomes an MPS client,
 * and the programs must run on machines without a GPU. */
#ifndef GS_GPU_H
#define GS_GPU_H

#include <stddef.h>

#include "gs_error.h"
#include "policy.h"

#define GS_GPU_CPUMASK_WORDS 16 /* 1024 CPUs */

typedef struct {
    int index;         /* NVML index */
    char uuid[96];     /* "GPU-..." */
    char name[96];
    int have_cpumask;  /* cpumask holds the CPUs near this GPU */
    unsigned long cpumask[GS_GPU_CPUMASK_WORDS];
} gs_gpu_t;

typedef struct {
    int count;
    gs_gpu_t gpu[GS_MAX_GPUS];
    char reason[256]; /* why count is 0 */
} gs_gpu_list_t;

/* Lists the GPUs NVML sees. No driver or no GPU is not an error: count is 0
 * and reason says which. Fails only for a broken driver library. */
int gs_gpu_discover(gs_gpu_list_t *list, gs_error_t *err);

/* Keeps the GPUs that CUDA_VISIBLE_DEVICES (value cvd, may be NULL) names,
 * in its order: indices, or UUIDs and UUID prefixes ("GPU-8a1b"). An entry
 * that matches no GPU ends the list there, as CUDA does. */
int gs_gpu_filter_visible(gs_gpu_list_t *list, const char *cvd, gs_error_t *err);

#endif
