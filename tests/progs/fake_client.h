/* SPDX-License-Identifier: BSD-3-Clause */
/* A CUDA program's part as the fakes play it (tests/fake), shared by the
 * test programs: CUDA starts (the stand-in libcuda.so.1 beside the program's
 * folder is mapped), uses MPS only where $CUDA_MPS_PIPE_DIRECTORY/control is
 * there, connects to the fake daemon as a client, and writes its context
 * for the fake NVML to list. Header-only: each program is one file. */
#ifndef GS_TESTS_FAKE_CLIENT_H
#define GS_TESTS_FAKE_CLIENT_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static inline const char *env(const char *n)
{
    const char *v = getenv(n);
    return v ? v : "-";
}

/* Connects as a client of the fake MPS daemon. Returns the connection (held
 * open: the client's "context"), -1 with why in reply, or -2 (reply
 * "none") when the daemon closed it unanswered: the context runs without
 * MPS. */
static inline int mps_client(char *reply, size_t len)
{
    struct sockaddr_un addr;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control", env("CUDA_MPS_PIPE_DIRECTORY"));
    snprintf(reply, len, "cannot connect to %s", addr.sun_path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        return -1;
    }
    char hello[192];
    int n = snprintf(hello, sizeof(hello), "client %d %.120s\n", (int)getpid(),
                     env("CUDA_VISIBLE_DEVICES"));
    ssize_t r = write(fd, hello, (size_t)n) == n ? read(fd, reply, len - 1) : -1;
    reply[r > 0 ? r : 0] = '\0';
    reply[strcspn(reply, "\n")] = '\0';
    if (r <= 0) {
        /* The daemon closed (or reset) the connection without a word (a
         * wedged one that gsrun ended): the real client then runs its
         * context without MPS (measured on an H200, driver 580). */
        snprintf(reply, len, "none");
        close(fd);
        return -2;
    }
    if (strncmp(reply, "ok", 2) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The GPU memory (MiB) this process's context is listed with; 0: the fake
 * NVML's default. */
static int ctx_mib;

/* The context this process holds, for the fake NVML to list. */
static inline void ctx_file(int gpu, const char *kind)
{
    const char *dir = getenv("FAKE_NVML_CTX_DIR");
    char path[4096];
    if (dir == NULL) {
        return;
    }
    snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        if (ctx_mib > 0) {
            fprintf(f, "%d %s %d\n", gpu, kind, ctx_mib);
        } else {
            fprintf(f, "%d %s\n", gpu, kind);
        }
        fclose(f);
    }
}

/* The GPU a context without MPS goes to: CUDA_VISIBLE_DEVICES's first
 * entry (an index, or the fake NVML's UUID, which ends in the GPU's
 * number), else GPU 0. */
static inline int plain_gpu(void)
{
    const char *v = env("CUDA_VISIBLE_DEVICES"), *dash = strchr(v, ',');
    char first[128];
    snprintf(first, sizeof(first), "%.*s", dash ? (int)(dash - v) : (int)strlen(v), v);
    dash = strrchr(first, '-');
    return strncmp(first, "GPU-", 4) == 0 && dash != NULL ? atoi(dash + 1) : atoi(first);
}

/* CUDA starts in this process: the stand-in libcuda.so.1 (tests/fake/cuda,
 * beside this program's folder) is mapped, as the driver's is. */
static inline void cuda_start(void)
{
    char self[4096], lib[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        return;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL) {
        *slash = '\0';
        snprintf(lib, sizeof(lib), "%s/../fake/cuda/libcuda.so.1", self);
        if (dlopen(lib, RTLD_NOW | RTLD_LOCAL) == NULL) {
            /* not built beside it: the test does not look */
        }
    }
}

/* Whether $CUDA_MPS_PIPE_DIRECTORY/control is there, as CUDA looks. */
static inline int pipe_visible(void)
{
    const char *d = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[4200];
    struct stat st;
    snprintf(path, sizeof(path), "%s/control", d != NULL ? d : "");
    return d != NULL && d[0] != '\0' && stat(path, &st) == 0;
}

#endif
