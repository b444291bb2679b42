#include "gs_autoconf.h"

#include "gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few NVML entry points used, declared here so that the build needs no
 * NVML header. Return values are nvmlReturn_t; 0 is NVML_SUCCESS. */
typedef void *gs_nvml_device_t;
typedef struct {
    int (*init)(void);
    int (*shutdown)(void);
    int (*count)(unsigned int *);
    int (*handle)(unsigned int, gs_nvml_device_t *);
    int (*uuid)(gs_nvml_device_t, char *, unsigned int);
    int (*name)(gs_nvml_device_t, char *, unsigned int);
    int (*cpu_affinity)(gs_nvml_device_t, unsigned int, unsigned long *);
    const char *(*error_string)(int);
} gs_nvml_t;


static const char *nvml_err(const gs_nvml_t *n, int rc)
{
    static char buf[32];
    if (n->error_string != NULL) {
        return n->error_string(rc);
    }
    snprintf(buf, sizeof(buf), "NVML error %d", rc);
    return buf;
}

int gs_gpu_discover(gs_gpu_list_t *list, gs_error_t *err)
{
    gs_nvml_t n = {0};
    void *lib;
    unsigned int count = 0;
    int rc, ret = 0;

    memset(list, 0, sizeof(*list));
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(list->reason, sizeof(list->reason),
                 "no NVIDIA driver (libnvidia-ml.so.1 could not be loaded)");
        return 0;
    }
    *(void **)&n.init = dlsym(lib, "nvmlInit_v2");
    *(void **)&n.shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&n.count = dlsym(lib, "nvmlDeviceGetCount_v2");
    *(void **)&n.handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&n.uuid = dlsym(lib, "nvmlDeviceGetUUID");
    *(void **)&n.name = dlsym(lib, "nvmlDeviceGetName");
    *(void **)&n.cpu_affinity = dlsym(lib, "nvmlDeviceGetCpuAffinity");
    *(void **)&n.error_string = dlsym(lib, "nvmlErrorString");
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
    rc = n.count(&count);
    if (rc != 0) {
        snprintf(list->reason, sizeof(list->reason), "NVML could not count GPUs: %s",
                 nvml_err(&n, rc));
        goto shutdown;
    }
    for (unsigned int i = 0; i < count && list->count < GS_MAX_GPUS; i++) {
        gs_nvml_device_t dev;
        gs_gpu_t *g = &list->gpu[list->count];
        if (n.handle(i, &dev) != 0 || n.uuid(dev, g->uuid, sizeof(g->uuid)) != 0) {
            continue; /* a GPU NVML cannot describe cannot be handed out safely */
        }
        g->index = (int)i;
        if (n.name == NULL || n.name(dev, g->name, sizeof(g->name)) != 0) {
            snprintf(g->name, sizeof(g->name), "GPU %u", i);
        }
        if (n.cpu_affinity != NULL &&
            n.cpu_affinity(dev, GS_GPU_CPUMASK_WORDS, g->cpumask) == 0) {
            g->have_cpumask = 1;
        }
        list->count++;
    }
    if (list->count == 0) {
        snprintf(list->reason, sizeof(list->reason), "the NVIDIA driver reports no GPU");
    }
shutdown:
    n.shutdown();
out:
    /* NVML is left loaded: unloading a driver library that may have started
     * threads is not safe, and this process execs or exits soon anyway. */
    return ret;
}

static int match_entry(const gs_gpu_list_t *list, const char *entry)
{
    char *end;
    long idx;

    if (strncmp(entry, "GPU-", 4) == 0) {
        int found = -1;
        for (int i = 0; i < list->count; i++) {
            if (strncmp(list->gpu[i].uuid, entry, strlen(entry)) == 0) {
                if (found >= 0) {
                    return -1; /* an ambiguous prefix matches nothing */
                }
                found = i;
            }
        }
        return found;
    }
    errno = 0;
    idx = strtol(entry, &end, 10);
    if (errno != 0 || end == entry || *end != '\0' || idx < 0) {
        return -1;
    }
    for (int i = 0; i < list->count; i++) {
        if (list->gpu[i].index == idx) {
            return i;
        }
    }
    return -1;
}

int gs_gpu_filter_visible(gs_gpu_list_t *list, const char *cvd, gs_error_t *err)
{
    gs_gpu_list_t out;
    char buf[1024];
    char *save = NULL;

    if (cvd == NULL || list->count == 0) {
        return 0;
    }
    if (strlen(cvd) >= sizeof(buf)) {
        return gs_error_set(err, EINVAL, "CUDA_VISIBLE_DEVICES is too long");
    }
    memset(&out, 0, sizeof(out));
    snprintf(buf, sizeof(buf), "%s", cvd);
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int i;
        while (*tok == ' ') {
            tok++;
        }
        i = match_entry(list, tok);
        if (i < 0) {
            break; /* CUDA stops at the first invalid entry */
        }
        for (int j = 0; j < out.count; j++) {
            if (strcmp(out.gpu[j].uuid, list->gpu[i].uuid) == 0) {
                i = -1;
            }
        }
        if (i >= 0 && out.count < GS_MAX_GPUS) {
            out.gpu[out.count++] = list->gpu[i];
        }
    }
    if (out.count == 0) {
        snprintf(out.reason, sizeof(out.reason),
                 "CUDA_VISIBLE_DEVICES='%s' leaves no GPU visible", cvd);
    }
    *list = out;
    return 0;
}
