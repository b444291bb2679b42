/* A stand-in for libnvidia-ml.so.1, loaded by soname through
 * LD_LIBRARY_PATH, so gsrun's real discovery code runs without a GPU.
 *
 *   FAKE_NVML_GPUS=N       number of GPUs (default 1)
 *   FAKE_NVML_FAIL_INIT=1  nvmlInit_v2 fails as with no driver loaded
 *   FAKE_NVML_NEAR_CPU=C   every GPU is near CPU C only (default: no mask) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_NOT_SUPPORTED 3

static int ngpus(void)
{
    const char *v = getenv("FAKE_NVML_GPUS");
    return v ? atoi(v) : 1;
}

int nvmlInit_v2(void)
{
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
    snprintf(uuid, len, "GPU-fa4e0000-0000-4000-8000-%012lu", (unsigned long)dev - 1);
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(void *dev, char *name, unsigned int len)
{
    snprintf(name, len, "Fake GPU %lu", (unsigned long)dev - 1);
    return NVML_SUCCESS;
}

int nvmlDeviceGetCpuAffinity(void *dev, unsigned int words, unsigned long *mask)
{
    const char *c = getenv("FAKE_NVML_NEAR_CPU");
    (void)dev;
    if (c == NULL) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    memset(mask, 0, words * sizeof(*mask));
    int cpu = atoi(c);
    if ((unsigned)cpu / (8 * sizeof(long)) < words) {
        mask[cpu / (8 * sizeof(long))] |= 1UL << (cpu % (8 * sizeof(long)));
    }
    return NVML_SUCCESS;
}
