/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/gpu/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/gpu/affinity.h"
#include "runtime/core/proc.h"
#include "runtime/core/limits.h"

/* The few NVML entry points used, declared here so that the build needs no
 * NVML header. Return values are nvmlReturn_t; 0 is NVML_SUCCESS. */
typedef void *gs_nvml_device_t;
typedef struct { /* nvmlPciInfo_t (v3) */
    char bus_id_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} gs_nvml_pci_t;
typedef struct { /* nvmlMemory_t (v1) */
    unsigned long long total, free, used;
} gs_nvml_memory_t;
typedef struct { /* nvmlProcessInfo_t (v2, v3) */
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance, compute_instance;
} gs_nvml_proc_t;
typedef struct {
    int (*init)(void);
    int (*shutdown)(void);
    int (*count)(unsigned int *);
    int (*handle)(unsigned int, gs_nvml_device_t *);
    int (*uuid)(gs_nvml_device_t, char *, unsigned int);
    int (*name)(gs_nvml_device_t, char *, unsigned int);
    int (*cpu_affinity)(gs_nvml_device_t, unsigned int, unsigned long *);
    int (*pci)(gs_nvml_device_t, gs_nvml_pci_t *);
    int (*cores)(gs_nvml_device_t, unsigned int *);
    int (*max_clock)(gs_nvml_device_t, int, unsigned int *);
    int (*mig_mode)(gs_nvml_device_t, unsigned int *, unsigned int *);
    int (*mig_max)(gs_nvml_device_t, unsigned int *);
    int (*mig_handle)(gs_nvml_device_t, unsigned int, gs_nvml_device_t *);
    int (*compute_mode)(gs_nvml_device_t, int *);
    int (*cuda_version)(int *);
    int (*memory)(gs_nvml_device_t, gs_nvml_memory_t *);
    int (*procs)(gs_nvml_device_t, unsigned int *, gs_nvml_proc_t *);
    int (*mps_procs)(gs_nvml_device_t, unsigned int *, gs_nvml_proc_t *);
    const char *(*error_string)(int);
} gs_nvml_t;

#define GS_NVML_CLOCK_SM 1

static const char *nvml_err(const gs_nvml_t *n, int rc)
{
    static char buf[32];
    if (n->error_string != NULL) {
        return n->error_string(rc);
    }
    snprintf(buf, sizeof(buf), "NVML error %d", rc);
    return buf;
}

static void load_symbols(void *lib, gs_nvml_t *n)
{
    *(void **)&n->init = dlsym(lib, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&n->count = dlsym(lib, "nvmlDeviceGetCount_v2");
    *(void **)&n->handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&n->uuid = dlsym(lib, "nvmlDeviceGetUUID");
    *(void **)&n->name = dlsym(lib, "nvmlDeviceGetName");
    *(void **)&n->cpu_affinity = dlsym(lib, "nvmlDeviceGetCpuAffinity");
    *(void **)&n->pci = dlsym(lib, "nvmlDeviceGetPciInfo_v3");
    *(void **)&n->cores = dlsym(lib, "nvmlDeviceGetNumGpuCores");
    *(void **)&n->max_clock = dlsym(lib, "nvmlDeviceGetMaxClockInfo");
    *(void **)&n->mig_mode = dlsym(lib, "nvmlDeviceGetMigMode");
    *(void **)&n->mig_max = dlsym(lib, "nvmlDeviceGetMaxMigDeviceCount");
    *(void **)&n->mig_handle = dlsym(lib, "nvmlDeviceGetMigDeviceHandleByIndex");
    *(void **)&n->compute_mode = dlsym(lib, "nvmlDeviceGetComputeMode");
    *(void **)&n->cuda_version = dlsym(lib, "nvmlSystemGetCudaDriverVersion_v2");
    *(void **)&n->memory = dlsym(lib, "nvmlDeviceGetMemoryInfo");
    *(void **)&n->error_string = dlsym(lib, "nvmlErrorString");
    *(void **)&n->procs = dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (n->procs == NULL) {
        *(void **)&n->procs = dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
    }
    *(void **)&n->mps_procs = dlsym(lib, "nvmlDeviceGetMPSComputeRunningProcesses_v3");
    if (n->mps_procs == NULL) {
        *(void **)&n->mps_procs = dlsym(lib, "nvmlDeviceGetMPSComputeRunningProcesses_v2");
    }
}

/* A sysfs file's one line (NUL-terminated), or -1. */
static int read_sysfs_line(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    long n = gs_proc_read_line(fd, buf, len, gs_proc_now_ms() + GS_WAIT_SYSFS_MS);
    close(fd);
    return n > 0 ? 0 : -1;
}

int gs_gpu_sysfs_near_cpus(const char *root, unsigned int domain, unsigned int bus,
                           unsigned int device, unsigned long *mask)
{
    char dir[300], path[340], text[GS_LINE_MAX];
    cpu_set_t set;

    snprintf(dir, sizeof(dir), "%s/%04x:%02x:%02x.0", root, domain, bus, device);
    snprintf(path, sizeof(path), "%s/vendor", dir);
    if (read_sysfs_line(path, text, sizeof(text)) != 0 || strncmp(text, "0x10de", 6) != 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "%s/local_cpulist", dir);
    if (read_sysfs_line(path, text, sizeof(text)) != 0) {
        return -1;
    }
    text[strcspn(text, "\n")] = '\0';
    if (gs_affinity_cpuset_parse(text, &set) != 0 || CPU_COUNT(&set) == 0) {
        return -1;
    }
    memset(mask, 0, sizeof(unsigned long) * GS_GPU_CPUMASK_WORDS);
    for (int c = 0; c < CPU_SETSIZE && c < GS_GPU_CPUMASK_WORDS * 64; c++) {
        if (CPU_ISSET(c, &set)) {
            mask[c / 64] |= 1UL << (c % 64);
        }
    }
    return 0;
}

/* How often a listing is asked again with the room NVML says it needs
 * (processes come between two asks), and the slack added each time. */
#define LIST_TRIES 4
#define LIST_SLACK 16

/* One of NVML's process listings, whole, into pids (the first
 * GS_GPU_PROCS_MAX of them), and the memory of each into mib when it is
 * not NULL: how many NVML listed, or -1. NVML answers a caller whose room
 * is short with NVML_ERROR_INSUFFICIENT_SIZE and the count it needs, and
 * writes no entry then: the listing is asked again with that room. */
static int list_procs(int (*fn)(gs_nvml_device_t, unsigned int *, gs_nvml_proc_t *),
                      gs_nvml_device_t dev, int *pids, int *mib)
{
    unsigned int room = 64, count = 0;
    gs_nvml_proc_t *info = NULL;
    int rc = -1;
    if (fn == NULL) {
        return -1;
    }
    for (int t = 0; t < LIST_TRIES; t++) {
        gs_nvml_proc_t *more = realloc(info, room * sizeof(*info));
        if (more == NULL) {
            break;
        }
        info = more;
        count = room;
        rc = fn(dev, &count, info);
        if (rc != 7) { /* 7: NVML_ERROR_INSUFFICIENT_SIZE, count says how many */
            break;
        }
        room = count + LIST_SLACK;
    }
    if (rc != 0 || count > room) {
        free(info);
        return -1; /* an error, or still short after the tries: not listed */
    }
    for (unsigned int i = 0; i < count && i < GS_GPU_PROCS_MAX; i++) {
        pids[i] = (int)info[i].pid;
        if (mib != NULL) { /* NVML_VALUE_NOT_AVAILABLE is all ones */
            mib[i] = info[i].used == ~0ULL || (info[i].used >> 20) >= GS_GPU_MIB_UNKNOWN
                         ? GS_GPU_MIB_UNKNOWN
                         : (int)(info[i].used >> 20);
        }
    }
    free(info);
    return (int)count;
}

/* What runs on a device now: its compute processes (MPS servers, their
 * clients, plain contexts), which of them are MPS clients, and the memory
 * in use: for packing a user's jobs over the node (runtime/plan/pack.h)
 * and for telling whether a rank really became an MPS client. */
static void describe_use(const gs_nvml_t *n, gs_nvml_device_t dev, gs_gpu_t *g)
{
    gs_nvml_memory_t mem;

    /* The MPS listing on both sides of the compute one: a client that
     * connects or leaves between two calls is in one of them, never taken
     * for a context without MPS. */
    int *before = malloc(GS_GPU_PROCS_MAX * sizeof(*before));
    int nbefore = before != NULL ? list_procs(n->mps_procs, dev, before, NULL) : -1;
    g->nprocs = list_procs(n->procs, dev, g->procs, g->procs_mib);
    g->nmps = list_procs(n->mps_procs, dev, g->mps, NULL);
    for (int i = 0; i < nbefore && i < GS_GPU_PROCS_MAX && g->nmps >= 0; i++) {
        int k = 0;
        while (k < g->nmps && k < GS_GPU_PROCS_MAX && g->mps[k] != before[i]) {
            k++;
        }
        if (k == g->nmps && g->nmps < GS_GPU_PROCS_MAX) {
            g->mps[g->nmps++] = before[i];
        }
    }
    free(before);
    if (n->memory != NULL && n->memory(dev, &mem) == 0) {
        g->used_mib = mem.used >> 20;
    }
}

/* The GPU's own facts: name, CPUs near it, sort keys. */
static void describe_gpu(const gs_nvml_t *n, gs_nvml_device_t dev, unsigned int i, gs_gpu_t *g)
{
    gs_nvml_pci_t pci;
    unsigned int cores = 0, mhz = 0;

    g->index = (int)i;
    if (n->name == NULL || n->name(dev, g->name, sizeof(g->name)) != 0) {
        snprintf(g->name, sizeof(g->name), "GPU %u", i);
    }
    memset(&pci, 0, sizeof(pci));
    int have_pci = n->pci != NULL && n->pci(dev, &pci) == 0;
    if (have_pci) {
        g->bus = ((unsigned long long)pci.domain << 32) | ((unsigned long long)pci.bus << 8) |
                 pci.device;
    } else {
        g->bus = i; /* NVML's own order is the PCI order */
    }
    /* The kernel's list first: what NVML's CPU affinity reports, without
     * its cost (9-25 ms a GPU measured on an H100, on the way to MPS being
     * ready). */
    if (have_pci && gs_gpu_sysfs_near_cpus("/sys/bus/pci/devices", pci.domain, pci.bus, pci.device,
                                           g->cpumask) == 0) {
        g->have_cpumask = 1;
    } else if (n->cpu_affinity != NULL &&
               n->cpu_affinity(dev, GS_GPU_CPUMASK_WORDS, g->cpumask) == 0) {
        g->have_cpumask = 1;
    }
    gs_nvml_memory_t mem;
    if (n->memory != NULL && n->memory(dev, &mem) == 0) {
        g->mem_mib = mem.total >> 20;
    }
    describe_use(n, dev, g);
    int mode = 0; /* NVML_COMPUTEMODE_EXCLUSIVE_THREAD 1, _EXCLUSIVE_PROCESS 3 */
    if (n->compute_mode != NULL && n->compute_mode(dev, &mode) == 0) {
        g->exclusive = mode == 1 || mode == 3;
    }
    if (n->cores != NULL && n->max_clock != NULL && n->cores(dev, &cores) == 0 &&
        n->max_clock(dev, GS_NVML_CLOCK_SM, &mhz) == 0) {
        g->speed = (unsigned long long)cores * mhz;
    }
}

/* A GPU in MIG mode is replaced by its instances (CUDA sees only those). */
static void add_mig_instances(const gs_nvml_t *n, gs_nvml_device_t dev, const gs_gpu_t *gpu,
                              gs_gpu_list_t *list)
{
    unsigned int max = 0;
    if (n->mig_max == NULL || n->mig_handle == NULL || n->mig_max(dev, &max) != 0) {
        return;
    }
    for (unsigned int m = 0; m < max && list->count < GS_MAX_GPUS; m++) {
        gs_nvml_device_t mdev;
        gs_gpu_t *g = &list->gpu[list->count];
        if (n->mig_handle(dev, m, &mdev) != 0) {
            continue; /* no instance in this slot */
        }
        *g = *gpu;
        if (n->uuid(mdev, g->uuid, sizeof(g->uuid)) != 0) {
            continue;
        }
        if (n->name == NULL || n->name(mdev, g->name, sizeof(g->name)) != 0) {
            snprintf(g->name, sizeof(g->name), "%s MIG %u", gpu->name, m);
        }
        g->mig = (int)m + 1;
        gs_nvml_memory_t mem; /* an instance has a slice of its GPU's memory */
        g->mem_mib = n->memory != NULL && n->memory(mdev, &mem) == 0 ? mem.total >> 20 : 0;
        describe_use(n, mdev, g);
        list->count++;
    }
}

static int is_mig_mode(const gs_nvml_t *n, gs_nvml_device_t dev)
{
    unsigned int current = 0, pending = 0;
    return n->mig_mode != NULL && n->mig_mode(dev, &current, &pending) == 0 && current == 1;
}

static int gpu_cmp(const gs_gpu_t *a, const gs_gpu_t *b, int by_bus)
{
    if (!by_bus && a->speed != b->speed) {
        return a->speed > b->speed ? -1 : 1;
    }
    if (a->bus != b->bus) {
        return a->bus < b->bus ? -1 : 1;
    }
    return a->mig - b->mig;
}

void gs_gpu_sort(gs_gpu_list_t *list, int by_bus)
{
    /* Insertion sort: stable, and lists are short. */
    for (int i = 1; i < list->count; i++) {
        gs_gpu_t t = list->gpu[i];
        int j = i - 1;
        while (j >= 0 && gpu_cmp(&list->gpu[j], &t, by_bus) > 0) {
            list->gpu[j + 1] = list->gpu[j];
            j--;
        }
        list->gpu[j + 1] = t;
    }
    for (int i = 0, k = -1; i < list->count; i++) {
        if (i == 0 || list->gpu[i].index != list->gpu[i - 1].index) {
            k++;
        }
        list->gpu[i].cuda_index = k;
    }
}

/* The NVML a long-lived process keeps started (gs_gpu_hold): its later
 * listings skip NVML's load and start, the most of a listing's cost. */
static struct {
    int wanted, held;
    gs_nvml_t n;
} keep;

void gs_gpu_hold(void)
{
    keep.wanted = 1;
}

int gs_gpu_discover(gs_gpu_list_t *list, gs_error_t *err)
{
    gs_nvml_t n = {0};
    void *lib;
    unsigned int count = 0;
    int rc, ret = 0;

    memset(list, 0, sizeof(*list));
    if (keep.held) {
        n = keep.n;
        goto started;
    }
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(list->reason, sizeof(list->reason),
                 "no NVIDIA driver (libnvidia-ml.so.1 could not be loaded)");
        return 0;
    }
    load_symbols(lib, &n);
    if (!n.init || !n.shutdown || !n.count || !n.handle || !n.uuid) {
        ret = gs_error_set(err, ENOSYS,
                           "libnvidia-ml.so.1 lacks nvmlInit_v2 or other basic entry points; "
                           "the NVIDIA driver installation looks broken");
        goto out;
    }
    rc = n.init();
    if (rc != 0) {
        snprintf(list->reason, sizeof(list->reason), "NVML could not start: %s",
                 nvml_err(&n, rc));
        goto out;
    }
    if (keep.wanted) {
        keep.n = n;
        keep.held = 1;
    }
started:
    /* The driver's CUDA version (13000 for 13.0), which sets how many
     * clients one MPS server takes; NVML tells it without a CUDA context. */
    if (n.cuda_version == NULL || n.cuda_version(&list->cuda_version) != 0) {
        list->cuda_version = 0;
    }
    rc = n.count(&count);
    if (rc != 0) {
        snprintf(list->reason, sizeof(list->reason), "NVML could not count GPUs: %s",
                 nvml_err(&n, rc));
        goto shutdown;
    }
    if (count > GS_MAX_GPUS) {
        list->beyond = (int)count - GS_MAX_GPUS; /* named when they are asked for */
    }
    for (unsigned int i = 0; i < count && list->count < GS_MAX_GPUS; i++) {
        gs_nvml_device_t dev;
        gs_gpu_t *g = &list->gpu[list->count];
        memset(g, 0, sizeof(*g));
        if (n.handle(i, &dev) != 0 || n.uuid(dev, g->uuid, sizeof(g->uuid)) != 0) {
            continue; /* a GPU NVML cannot describe cannot be handed out safely */
        }
        describe_gpu(&n, dev, i, g);
        if (is_mig_mode(&n, dev)) {
            gs_gpu_t gpu = *g;
            add_mig_instances(&n, dev, &gpu, list);
        } else {
            list->count++;
        }
    }
    if (list->count == 0) {
        snprintf(list->reason, sizeof(list->reason),
                 count > 0 ? "the GPUs are in MIG mode with no MIG instance"
                           : "the NVIDIA driver reports no GPU");
    }
    const char *order = getenv("CUDA_DEVICE_ORDER");
    gs_gpu_sort(list, order != NULL && strcmp(order, "PCI_BUS_ID") == 0);
shutdown:
    if (!keep.held) {
        n.shutdown();
    }
out:
    /* NVML is left loaded: unloading a driver library that may have started
     * threads is not safe, and this process execs or exits soon anyway. */
    return ret;
}

/* Marks in hit[] the devices an entry names: a UUID or unique UUID prefix
 * names one; a CUDA index names a GPU, or all instances of a GPU in MIG
 * mode. Returns how many were marked. */
static int match_entry(const gs_gpu_list_t *list, const char *entry, int *hit)
{
    char *end;
    long idx;
    int n = 0;

    memset(hit, 0, sizeof(int) * GS_MAX_GPUS);
    if (strncmp(entry, "GPU-", 4) == 0 || strncmp(entry, "MIG-", 4) == 0) {
        int found = -1;
        for (int i = 0; i < list->count; i++) {
            if (strncmp(list->gpu[i].uuid, entry, strlen(entry)) == 0) {
                if (found >= 0) {
                    return 0; /* an ambiguous prefix matches nothing */
                }
                found = i;
            }
        }
        if (found >= 0) {
            hit[found] = 1;
            n = 1;
        }
        return n;
    }
    errno = 0;
    idx = strtol(entry, &end, 10);
    if (errno != 0 || end == entry || *end != '\0' || idx < 0) {
        return 0;
    }
    for (int i = 0; i < list->count; i++) {
        if (list->gpu[i].cuda_index == idx) {
            hit[i] = 1;
            n++;
        }
    }
    return n;
}

int gs_gpu_filter_visible(gs_gpu_list_t *list, const char *cvd, gs_error_t *err)
{
    char *save = NULL;

    if (cvd == NULL || list->count == 0) {
        return 0;
    }
    /* As long as CUDA takes it (56 MIG UUIDs are over 2 KB); the list on
     * the heap (its processes make it most of a MiB). */
    char *buf = strdup(cvd);
    gs_gpu_list_t *o = calloc(1, sizeof(*o));
    if (buf == NULL || o == NULL) {
        free(buf);
        free(o);
        return gs_error_set(err, ENOMEM, "out of memory for CUDA_VISIBLE_DEVICES");
    }
    o->cuda_version = list->cuda_version;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int hit[GS_MAX_GPUS];
        while (*tok == ' ') {
            tok++;
        }
        if (match_entry(list, tok, hit) == 0) {
            break; /* CUDA stops at the first invalid entry */
        }
        for (int i = 0; i < list->count; i++) {
            for (int j = 0; hit[i] && j < o->count; j++) {
                hit[i] = strcmp(o->gpu[j].uuid, list->gpu[i].uuid) != 0;
            }
            if (hit[i] && o->count < GS_MAX_GPUS) {
                o->gpu[o->count++] = list->gpu[i];
            }
        }
    }
    free(buf);
    if (o->count == 0 && list->beyond > 0) {
        snprintf(o->reason, sizeof(o->reason),
                 "CUDA_VISIBLE_DEVICES='%.80s%s' names none of the node's first %d GPUs, the "
                 "most gsrun handles (%d more are not used)",
                 cvd, strlen(cvd) > 80 ? "..." : "", GS_MAX_GPUS, list->beyond);
    } else if (o->count == 0) {
        snprintf(o->reason, sizeof(o->reason), "CUDA_VISIBLE_DEVICES='%.120s%s' leaves no GPU visible",
                 cvd, strlen(cvd) > 120 ? "..." : "");
    }
    o->beyond = list->beyond;
    *list = *o;
    free(o);
    return 0;
}
