/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for libnvidia-ml.so.1, loaded by soname through
 * LD_LIBRARY_PATH, so gsrun's real discovery code runs without a GPU.
 *
 *   FAKE_NVML_GPUS=N         number of GPUs (default 1)
 *   FAKE_NVML_FAIL_INIT=1    nvmlInit_v2 fails as with no driver loaded
 *   FAKE_NVML_NEAR_CPU=C     every GPU is near CPU C only (default: no mask)
 *   FAKE_NVML_NEAR_CPUS=L;L  per GPU, the CPUs near it ("0-3;0-3;4-7;4-7")
 *   FAKE_NVML_BUS=B,B        per GPU, its PCI bus number (default its index)
 *   FAKE_NVML_CORES=C,C      per GPU, its CUDA cores (default: not supported)
 *   FAKE_NVML_MIG=G:N,G:N    GPU G is in MIG mode with N instances
 *   FAKE_NVML_COMPUTE_MODE=M every GPU's compute mode (0 Default, 3 Exclusive_Process)
 *   FAKE_NVML_CUDA_VERSION=V the driver's CUDA version (default 13000, CUDA 13.0;
 *                            "none": the driver lacks the call)
 *   FAKE_NVML_MEMORY_MB=M    every device's memory (default 81559, an H100's;
 *                            a MIG instance: an eighth of it)
 *   FAKE_NVML_PROCS=G:P,G:P  process P runs a CUDA context on GPU G (compute processes);
 *                            G:P:M gives its memory M MiB (default: 66 for a process
 *                            named nvidia-cuda-mps*, as a real MPS server holds on
 *                            an H200, else 520; M "na": NVML_VALUE_NOT_AVAILABLE)
 *   FAKE_NVML_NO_MPS_LISTING=1 the MPS listing answers NOT_SUPPORTED, as a driver
 *                            older than Volta's MPS listing
 *   FAKE_NVML_USED_MB=M,M    per GPU, its memory in use (default 0)
 *   FAKE_NVML_EXIT_DELAY_MS=N a process that loaded the library takes N ms to exit
 *                            (after its last own step), as on a loaded machine
 *   FAKE_NVML_INIT_MS=N      nvmlInit_v2 takes N ms (a real driver's start: 25-90
 *                            ms alone on the lent GPUs, over a second under load)
 *   FAKE_NVML_INIT_LOG=F     each nvmlInit_v2 appends "<pid> <program>" to F
 *   FAKE_NVML_PROCS_MS=N     listing a device's processes takes N ms (the driver
 *                            busy with other contexts' creation)
 *   FAKE_NVML_PROCS_LOG=F    each compute listing appends "<pid> <count>" to F (the
 *                            caller's PID, how many processes it found): a test
 *                            waits for a listing made after what it set up
 *   FAKE_NVML_PROCS_HANG=F   in the user's shared agent (gsrun-share) only, listing
 *                            a device's processes waits while file F exists (an
 *                            NVML call that hangs)
 *   FAKE_NVML_CTX_DIR=D      the contexts test programs hold now: a file D/<pid>
 *                            that says "<GPU> mps" (an MPS client: in both the
 *                            compute and the MPS listing, as on driver 580) or
 *                            "<GPU> plain" (a context without MPS: compute
 *                            listing only), listed while process <pid> lives;
 *                            a third word gives its memory in MiB ("na":
 *                            NVML_VALUE_NOT_AVAILABLE)
 *                            (tests/progs/rank_report --mps-client writes it; a
 *                            test may write one for a process of another user)
 *
 * Both process listings keep NVML's contract: an array too small for them
 * all gets none of them (NVML_ERROR_INSUFFICIENT_SIZE, *count the number
 * needed), as the real library answers.
 *
 * A MIG instance's handle is 0x10000 + 0x100 * GPU + instance. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_DRIVER_NOT_LOADED 9

#define MIG_BASE 0x10000UL

typedef struct {
    char bus_id_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} pci_info_t;

/* Runs at exit, after everything the program did itself. */
__attribute__((destructor)) static void slow_exit(void)
{
    const char *v = getenv("FAKE_NVML_EXIT_DELAY_MS");
    long ms = v ? atol(v) : 0;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    if (ms > 0) {
        nanosleep(&ts, NULL);
    }
}

static int ngpus(void)
{
    const char *v = getenv("FAKE_NVML_GPUS");
    return v ? atoi(v) : 1;
}

/* The idx-th field of a list separated by sep, or NULL. */
static const char *field(const char *var, char sep, int idx, char *buf, size_t len)
{
    const char *v = getenv(var);
    for (int i = 0; v != NULL && i < idx; i++) {
        v = strchr(v, sep);
        v = v ? v + 1 : NULL;
    }
    if (v == NULL) {
        return NULL;
    }
    size_t n = strcspn(v, (char[]){sep, '\0'});
    if (n == 0 || n >= len) {
        return NULL;
    }
    memcpy(buf, v, n);
    buf[n] = '\0';
    return buf;
}

static int mig_count(int gpu)
{
    char buf[32];
    for (int i = 0; field("FAKE_NVML_MIG", ',', i, buf, sizeof(buf)) != NULL; i++) {
        if (atoi(buf) == gpu && strchr(buf, ':')) {
            return atoi(strchr(buf, ':') + 1);
        }
    }
    return 0;
}

static int is_mig(void *dev)
{
    return (unsigned long)dev >= MIG_BASE;
}

static int gpu_of(void *dev)
{
    unsigned long d = (unsigned long)dev;
    return is_mig(dev) ? (int)((d - MIG_BASE) >> 8) : (int)d - 1;
}

int nvmlInit_v2(void)
{
    const char *log = getenv("FAKE_NVML_INIT_LOG"), *ms = getenv("FAKE_NVML_INIT_MS");
    if (log != NULL) {
        char comm[64] = "?";
        FILE *c = fopen("/proc/self/comm", "r");
        if (c != NULL) {
            if (fgets(comm, sizeof(comm), c) != NULL) {
                comm[strcspn(comm, "\n")] = '\0';
            }
            fclose(c);
        }
        FILE *f = fopen(log, "a");
        if (f != NULL) {
            fprintf(f, "%d %s\n", (int)getpid(), comm);
            fclose(f);
        }
    }
    if (ms != NULL && atoi(ms) > 0) {
        struct timespec t = {atoi(ms) / 1000, (long)(atoi(ms) % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    return getenv("FAKE_NVML_FAIL_INIT") ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
}

int nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

const char *nvmlErrorString(int rc)
{
    return rc == NVML_ERROR_DRIVER_NOT_LOADED ? "Driver Not Loaded" : "Fake NVML error";
}

int nvmlDeviceGetCount_v2(unsigned int *count)
{
    *count = (unsigned int)ngpus();
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **dev)
{
    if ((int)index >= ngpus()) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *dev = (void *)(unsigned long)(index + 1);
    return NVML_SUCCESS;
}

int nvmlDeviceGetUUID(void *dev, char *uuid, unsigned int len)
{
    if (is_mig(dev)) {
        snprintf(uuid, len, "MIG-fa4e0000-0000-4000-8000-%06d%06lu", gpu_of(dev),
                 ((unsigned long)dev & 0xff));
    } else {
        snprintf(uuid, len, "GPU-fa4e0000-0000-4000-8000-%012d", gpu_of(dev));
    }
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(void *dev, char *name, unsigned int len)
{
    if (is_mig(dev)) {
        snprintf(name, len, "Fake GPU %d MIG 1g.10gb", gpu_of(dev));
    } else {
        snprintf(name, len, "Fake GPU %d", gpu_of(dev));
    }
    return NVML_SUCCESS;
}

static void set_cpus(unsigned long *mask, unsigned int words, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int lo = atoi(t), hi = strchr(t, '-') ? atoi(strchr(t, '-') + 1) : lo;
        for (int c = lo; c <= hi; c++) {
            if ((unsigned)c / (8 * sizeof(long)) < words) {
                mask[c / (8 * sizeof(long))] |= 1UL << (c % (8 * sizeof(long)));
            }
        }
    }
}

int nvmlDeviceGetCpuAffinity(void *dev, unsigned int words, unsigned long *mask)
{
    char buf[256];
    const char *c = getenv("FAKE_NVML_NEAR_CPU");
    const char *per = field("FAKE_NVML_NEAR_CPUS", ';', gpu_of(dev), buf, sizeof(buf));
    if (is_mig(dev)) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (per == NULL && c == NULL) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    memset(mask, 0, words * sizeof(*mask));
    set_cpus(mask, words, per ? per : c);
    return NVML_SUCCESS;
}

int nvmlDeviceGetPciInfo_v3(void *dev, pci_info_t *pci)
{
    char buf[32];
    int g = gpu_of(dev);
    memset(pci, 0, sizeof(*pci));
    pci->bus = field("FAKE_NVML_BUS", ',', g, buf, sizeof(buf)) ? (unsigned)atoi(buf)
                                                                 : (unsigned)g;
    snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}

int nvmlDeviceGetNumGpuCores(void *dev, unsigned int *cores)
{
    char buf[32];
    if (field("FAKE_NVML_CORES", ',', gpu_of(dev), buf, sizeof(buf)) == NULL) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    *cores = (unsigned)atoi(buf);
    return NVML_SUCCESS;
}

int nvmlDeviceGetMaxClockInfo(void *dev, int type, unsigned int *mhz)
{
    (void)dev;
    (void)type;
    *mhz = 1980;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMigMode(void *dev, unsigned int *current, unsigned int *pending)
{
    int on = mig_count(gpu_of(dev)) > 0;
    *current = *pending = (unsigned)on;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMaxMigDeviceCount(void *dev, unsigned int *count)
{
    *count = mig_count(gpu_of(dev)) > 0 ? 7 : 0;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void *dev, unsigned int index, void **mig)
{
    /* Instances fill the first slots; the rest are empty, as on a real GPU
     * with fewer instances than its maximum. */
    if ((int)index >= mig_count(gpu_of(dev))) {
        return NVML_ERROR_NOT_FOUND;
    }
    *mig = (void *)(MIG_BASE + 0x100UL * (unsigned long)gpu_of(dev) + index);
    return NVML_SUCCESS;
}

int nvmlDeviceGetComputeMode(void *dev, int *mode)
{
    const char *m = getenv("FAKE_NVML_COMPUTE_MODE");
    (void)dev;
    *mode = m ? atoi(m) : 0;
    return NVML_SUCCESS;
}

/* Not exported when FAKE_NVML_CUDA_VERSION=none would need a second library;
 * the call failing stands for a driver that cannot tell. */
int nvmlSystemGetCudaDriverVersion_v2(int *version)
{
    const char *v = getenv("FAKE_NVML_CUDA_VERSION");
    if (v != NULL && strcmp(v, "none") == 0) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    *version = v != NULL && *v != '\0' ? atoi(v) : 13000;
    return NVML_SUCCESS;
}

typedef struct {
    unsigned long long total, free, used;
} memory_t;

int nvmlDeviceGetMemoryInfo(void *dev, memory_t *mem)
{
    const char *v = getenv("FAKE_NVML_MEMORY_MB");
    unsigned long long mb = v != NULL && *v != '\0' ? strtoull(v, NULL, 10) : 81559;
    if ((unsigned long)dev >= MIG_BASE) {
        mb /= 8;
    }
    char buf[32];
    unsigned long long used = 0;
    if ((unsigned long)dev < MIG_BASE && field("FAKE_NVML_USED_MB", ',', gpu_of(dev), buf,
                                               sizeof(buf)) != NULL) {
        used = strtoull(buf, NULL, 10);
    }
    mem->total = mb << 20;
    mem->used = (used < mb ? used : mb) << 20;
    mem->free = mem->total - mem->used;
    return NVML_SUCCESS;
}

typedef struct { /* nvmlProcessInfo_t */
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance, compute_instance;
} proc_info_t;

/* pid's name as /proc has it (with its newline), "" when it is gone. */
static const char *comm_of(unsigned int pid, char *comm, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%u/comm", pid);
    FILE *f = fopen(path, "re");
    comm[0] = '\0';
    if (f != NULL) {
        if (fgets(comm, (int)len, f) == NULL) {
            comm[0] = '\0';
        }
        fclose(f);
    }
    return comm;
}

/* The memory a real driver gives pid when the test names none: what an MPS
 * server holds on an H200 for a process of that name, else a context's. */
static unsigned long long default_mib(unsigned int pid)
{
    char comm[32];
    return strncmp(comm_of(pid, comm, sizeof(comm)), "nvidia-cuda-mps", 15) == 0 ? 66 : 520;
}

/* The processes a listing found, gathered before any is handed out: NVML
 * writes no entry when they do not fit (see list_out). */
typedef struct {
    proc_info_t *p;
    unsigned int n, room;
} found_t;

/* mib: ~0ULL for "not available" (NVML's all ones). */
static void put_proc(found_t *f, unsigned int pid, unsigned long long mib)
{
    if (f->n == f->room) {
        unsigned int room = f->room ? 2 * f->room : 64;
        proc_info_t *p = realloc(f->p, room * sizeof(*p));
        if (p == NULL) {
            return;
        }
        f->p = p;
        f->room = room;
    }
    memset(&f->p[f->n], 0, sizeof(f->p[f->n]));
    f->p[f->n].pid = pid;
    f->p[f->n].used = mib == ~0ULL ? ~0ULL : mib << 20;
    f->n++;
}

/* NVML's contract, as the real library keeps it (driver 580): *count in,
 * the room; out, how many there are. When they do not fit: *count says how
 * many are needed, NVML_ERROR_INSUFFICIENT_SIZE (7), and no entry is
 * written (the caller's array is left as it was). */
static int list_out(found_t *f, unsigned int *count, proc_info_t *info)
{
    unsigned int room = *count;
    int rc = NVML_SUCCESS;
    *count = f->n;
    if (f->n > room) {
        rc = 7;
    } else if (f->n > 0 && info != NULL) {
        memcpy(info, f->p, f->n * sizeof(*info));
    }
    free(f->p);
    return rc;
}

/* A live process (not a zombie). */
static int lives(unsigned int pid)
{
    char path[64], st[256];
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t k = fread(st, 1, sizeof(st) - 1, f);
    fclose(f);
    st[k] = '\0';
    const char *e = strrchr(st, ')');
    return e != NULL && e[1] == ' ' && e[2] != 'Z';
}

/* The contexts in FAKE_NVML_CTX_DIR on gpu; MPS clients only when mps_only. */
static void ctx_dir(int gpu, int mps_only, found_t *found)
{
    const char *d = getenv("FAKE_NVML_CTX_DIR");
    DIR *dir = d != NULL ? opendir(d) : NULL;
    struct dirent *e;
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        char path[4096], kind[16] = "", mib[24] = "";
        unsigned int pid = (unsigned int)strtoul(e->d_name, NULL, 10);
        int g = -1;
        snprintf(path, sizeof(path), "%s/%s", d, e->d_name);
        FILE *f = pid > 0 ? fopen(path, "r") : NULL;
        if (f == NULL) {
            continue;
        }
        int ok = fscanf(f, "%d %15s %23s", &g, kind, mib) >= 2;
        fclose(f);
        if (ok && g == gpu && (!mps_only || strcmp(kind, "mps") == 0) && lives(pid)) {
            put_proc(found, pid,
                     mib[0] == '\0'              ? default_mib(pid)
                     : strcmp(mib, "na") == 0 ? ~0ULL
                                              : strtoull(mib, NULL, 10));
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
}

/* Whether this is the user's shared agent (its main thread's name). */
static int in_shared_agent(void)
{
    char comm[32];
    return strcmp(comm_of((unsigned int)getpid(), comm, sizeof(comm)), "gsrun-share\n") == 0;
}

/* NVML's contract: list_out. */
int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, proc_info_t *info)
{
    char buf[32];
    found_t found = {NULL, 0, 0};
    const char *ms = getenv("FAKE_NVML_PROCS_MS"), *hang = getenv("FAKE_NVML_PROCS_HANG");
    if (ms != NULL && atoi(ms) > 0) {
        struct timespec t = {atoi(ms) / 1000, (long)(atoi(ms) % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    if (hang != NULL && in_shared_agent()) {
        while (access(hang, F_OK) == 0) {
            usleep(10000);
        }
    }
    for (int i = 0; field("FAKE_NVML_PROCS", ',', i, buf, sizeof(buf)) != NULL; i++) {
        int g = -1, at = 0;
        unsigned int pid = 0;
        if (sscanf(buf, "%d:%u%n", &g, &pid, &at) != 2 || (unsigned long)dev >= MIG_BASE ||
            g != gpu_of(dev)) {
            continue;
        }
        unsigned long long mib = default_mib(pid);
        if (buf[at] == ':') {
            mib = strcmp(buf + at + 1, "na") == 0 ? ~0ULL : strtoull(buf + at + 1, NULL, 10);
        }
        put_proc(&found, pid, mib);
    }
    if ((unsigned long)dev < MIG_BASE) {
        ctx_dir(gpu_of(dev), 0, &found);
    }
    const char *log = getenv("FAKE_NVML_PROCS_LOG");
    FILE *f = log != NULL ? fopen(log, "a") : NULL;
    if (f != NULL) {
        fprintf(f, "%d %u\n", (int)getpid(), found.n);
        fclose(f);
    }
    return list_out(&found, count, info);
}

int nvmlDeviceGetMPSComputeRunningProcesses_v3(void *dev, unsigned int *count, proc_info_t *info)
{
    found_t found = {NULL, 0, 0};
    const char *none = getenv("FAKE_NVML_NO_MPS_LISTING");
    if (none != NULL && strcmp(none, "1") == 0) {
        return NVML_ERROR_NOT_SUPPORTED; /* a driver without it */
    }
    if ((unsigned long)dev < MIG_BASE) {
        ctx_dir(gpu_of(dev), 1, &found);
    }
    return list_out(&found, count, info);
}
