/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU enumeration through NVML, loaded at run time by soname.
 *
 * gsrun never links the driver and never calls cuInit: a process that
 * initialises CUDA with CUDA_MPS_PIPE_DIRECTORY set becomes an MPS client,
 * and the programs must run on machines without a GPU. */
#ifndef GS_GPU_H
#define GS_GPU_H

#include <stddef.h>

#include "runtime/core/gs_error.h"
#include "runtime/core/limits.h"

#define GS_GPU_CPUMASK_WORDS 16 /* 1024 CPUs */
/* Compute processes kept per GPU: past any GPU's real count (a client's
 * context holds about 274 MiB under MPS, 518 without, on an H200; a full
 * MPS server and its clients are 49). NVML's listing is read whole. */
#define GS_GPU_PROCS_MAX 1024
/* The longest line gs_gpu_to_line writes: three lists of up to
 * GS_GPU_PROCS_MAX numbers (PIDs, MiB, MPS clients) and the rest. */
#define GS_GPU_LINE_MAX (GS_GPU_PROCS_MAX * 3 * 12 + 1024)
#define GS_GPU_MIB_UNKNOWN 0x7fffffff /* a process's memory NVML cannot tell (INT_MAX) */

/* A device a daemon can serve: a GPU, or one MIG instance of a GPU in MIG
 * mode (then uuid is "MIG-..." and the CPUs are its GPU's). */
typedef struct {
    int index;         /* NVML index of the GPU */
    int cuda_index;    /* the GPU's place in CUDA's order (see gs_gpu_discover) */
    int mig;           /* a MIG instance: its number on the GPU, from 1; 0 for a GPU */
    char uuid[96];     /* "GPU-..." or "MIG-..." */
    char name[96];
    unsigned long long bus; /* PCI domain, bus, device: the sort key */
    unsigned long long speed; /* cores x SM clock (MHz), 0 if NVML cannot tell */
    int exclusive;     /* compute mode lets one process (e.g. an MPS server) hold it */
    unsigned long long mem_mib; /* its memory (a MIG instance's slice), 0 if NVML cannot tell */
    unsigned long long used_mib; /* memory in use when listed (NVML), 0 if it cannot tell */
    int nprocs;        /* processes with a CUDA context on it when listed (NVML), or -1 */
    int procs[GS_GPU_PROCS_MAX]; /* them, up to the max (PIDs as NVML sees them) */
    /* The GPU memory NVML gives each of them, in MiB, or GS_GPU_MIB_UNKNOWN:
     * what tells an MPS server from a program named as one (usage.h). */
    int procs_mib[GS_GPU_PROCS_MAX];
    /* Those of them that are MPS clients (NVML's MPS listing; an MPS server
     * and a plain context are in procs only), or -1 where NVML cannot tell.
     * Measured on an H200, driver 580: a client of a server is listed in
     * both, in a PID namespace of its own by its PID here. */
    int nmps;
    int mps[GS_GPU_PROCS_MAX];
    int have_cpumask;  /* cpumask holds the CPUs near this GPU */
    unsigned long cpumask[GS_GPU_CPUMASK_WORDS];
} gs_gpu_t;

typedef struct {
    int count;
    gs_gpu_t gpu[GS_MAX_GPUS];
    int cuda_version; /* the driver's CUDA version, 1000 * major + 10 * minor; 0: unknown */
    char reason[256]; /* why count is 0 */
    int beyond;       /* GPUs the driver reports past the GS_MAX_GPUS taken */
} gs_gpu_list_t;

/* Lists the devices NVML sees, in the order CUDA enumerates them: by PCI
 * bus id when CUDA_DEVICE_ORDER=PCI_BUS_ID, otherwise CUDA's default
 * FASTEST_FIRST, approximated as cores x SM clock, fastest first, ties by PCI
 * bus id (CUDA's exact heuristic is not published; with one GPU model it is
 * the bus order). A GPU in MIG mode is replaced by its MIG instances. No
 * driver or no GPU is not an error: count is 0 and reason says which. Fails
 * only for a broken driver library. */
int gs_gpu_discover(gs_gpu_list_t *list, gs_error_t *err);

/* For a process that lists the GPUs again and again (the user's node
 * service): NVML stays started after the next gs_gpu_discover, and the
 * listings after it reuse it. */
void gs_gpu_hold(void);

/* One device as one line of text and back (the node service tells a job
 * the GPUs it found: the job's agent then loads no NVML). The line ends
 * without a newline; the name is last and may hold spaces. 0, or -EINVAL
 * (a line that is not one device) / -ENOSPC (len too small). */
int gs_gpu_to_line(const gs_gpu_t *g, char *out, size_t len);
/* Whether NVML's MPS listing of g holds process pid (an MPS client). */
int gs_gpu_is_mps_client(const gs_gpu_t *g, int pid);
int gs_gpu_from_line(const char *line, gs_gpu_t *g);

/* The CPUs near the NVIDIA PCI device domain:bus:device.0 from its
 * local_cpulist under root (/sys/bus/pci/devices) into mask
 * (GS_GPU_CPUMASK_WORDS words): 0, or -1 where there is no such file or
 * the device is not NVIDIA's (vendor 0x10de). */
int gs_gpu_sysfs_near_cpus(const char *root, unsigned int domain, unsigned int bus,
                           unsigned int device, unsigned long *mask);

/* Keeps the devices that CUDA_VISIBLE_DEVICES (value cvd, may be NULL)
 * names, in its order: CUDA indices (a GPU in MIG mode: all its instances),
 * or UUIDs and UUID prefixes ("GPU-8a1b", "MIG-..."). An entry that matches
 * nothing ends the list there, as CUDA does. */
int gs_gpu_filter_visible(gs_gpu_list_t *list, const char *cvd, gs_error_t *err);

/* Sorts a list into CUDA's order and numbers the GPUs (cuda_index); by_bus:
 * CUDA_DEVICE_ORDER=PCI_BUS_ID. Exposed for the tests. */
void gs_gpu_sort(gs_gpu_list_t *list, int by_bus);

#endif
