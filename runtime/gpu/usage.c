/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/gpu/usage.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The variable every rank gsrun starts has (runtime/rank/clientenv.c). */
#define RANK_MARK "GSRUN_GPU_UUID="

/* Whether pid's environment (as it was exec'd) holds the mark; bounded. */
static int has_mark(const char *proc_root, int pid)
{
    char path[300], buf[16384 + sizeof(RANK_MARK)];
    size_t keep = 0, mlen = strlen(RANK_MARK);
    int found = 0;
    snprintf(path, sizeof(path), "%s/%d/environ", proc_root, pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    for (int chunk = 0; !found && chunk < 64; chunk++) { /* at most 1 MiB */
        ssize_t n = read(fd, buf + keep, sizeof(buf) - keep - 1);
        if (n <= 0) {
            break;
        }
        size_t len = keep + (size_t)n;
        for (size_t i = 0; i + mlen <= len; i++) {
            if ((i == 0 ? chunk == 0 : buf[i - 1] == '\0') && memcmp(buf + i, RANK_MARK, mlen) == 0) {
                found = 1;
                break;
            }
        }
        keep = len < mlen ? len : mlen; /* a mark split over two reads */
        memmove(buf, buf + len - keep, keep);
    }
    close(fd);
    return found;
}

/* 1 if pid is the user's gsrun rank or the user's MPS server. */
static int is_ours(const char *proc_root, int pid, uid_t uid)
{
    char path[300], comm[64] = "";
    struct stat st;
    snprintf(path, sizeof(path), "%s/%d", proc_root, pid);
    if (stat(path, &st) != 0 || st.st_uid != uid) {
        return 0; /* not here (another PID namespace) or another user's */
    }
    snprintf(path, sizeof(path), "%s/%d/comm", proc_root, pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, comm, sizeof(comm) - 1);
        comm[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    /* The kernel keeps 15 bytes of the name: "nvidia-cuda-mps" is a server. */
    if (strncmp(comm, "nvidia-cuda-mps", 15) == 0) {
        return 1;
    }
    return has_mark(proc_root, pid);
}

int gs_usage_foreign(const gs_gpu_t *g, uid_t uid, const char *proc_root)
{
    int foreign = 0, listed = g->nprocs < GS_GPU_PROCS_MAX ? g->nprocs : GS_GPU_PROCS_MAX;
    for (int i = 0; i < listed; i++) {
        foreign += !is_ours(proc_root, g->procs[i], uid);
    }
    foreign += g->nprocs > GS_GPU_PROCS_MAX ? g->nprocs - GS_GPU_PROCS_MAX : 0;
    if (g->nprocs <= 0 && g->used_mib > GS_USAGE_BUSY_MIB) {
        foreign = 1;
    }
    return foreign;
}
