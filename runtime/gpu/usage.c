/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/gpu/usage.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/proc.h"

/* The variable every rank gsrun starts has (runtime/rank/clientenv.c), and
 * where its MPS server is, under MPS: in the run dirs of its job. */
#define RANK_MARK "GSRUN_GPU_UUID="
#define RANK_JOB_DIR "CUDA_MPS_PIPE_DIRECTORY="
/* What is read of a process's environment or command line, at most. */
#define READ_MAX (1 << 20)

/* path's file, up to READ_MAX bytes, NUL-terminated, in a buffer to free;
 * NULL when it cannot be read (another user's, gone, non-dumpable). */
static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = fd >= 0 ? malloc(READ_MAX + 1) : NULL;
    size_t n = 0;
    ssize_t r;
    while (buf != NULL && n < READ_MAX && (r = read(fd, buf + n, READ_MAX - n)) > 0) {
        n += (size_t)r;
    }
    if (fd >= 0) {
        close(fd);
    }
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

/* Whether path is in dir ("dir/..."). */
static int under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') {
        n--;
    }
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* pid's environment (as it was exec'd) holds the rank mark: 1, with its
 * MPS pipe dir (in its job's run dirs) in job ("" without MPS); 0 otherwise. */
static int rank_of_gsrun(const char *proc_root, int pid, char *job, size_t jlen)
{
    char path[300];
    size_t len = 0;
    int found = 0;
    snprintf(path, sizeof(path), "%s/%d/environ", proc_root, pid);
    char *env = slurp(path, &len);
    job[0] = '\0';
    for (size_t i = 0; env != NULL && i < len; i += strlen(env + i) + 1) {
        if (strncmp(env + i, RANK_MARK, strlen(RANK_MARK)) == 0) {
            found = 1;
        } else if (strncmp(env + i, RANK_JOB_DIR, strlen(RANK_JOB_DIR)) == 0) {
            snprintf(job, jlen, "%s", env + i + strlen(RANK_JOB_DIR));
        }
    }
    free(env);
    return found;
}

/* pid's parent, from its stat line ("pid (comm) S ppid ..."), or 0. */
static int parent_of(const char *proc_root, int pid)
{
    char path[300], buf[1024];
    snprintf(path, sizeof(path), "%s/%d/stat", proc_root, pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC), ppid = 0;
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    buf[n > 0 ? n : 0] = '\0';
    const char *p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %*c %d", &ppid) != 1) {
        return 0;
    }
    return ppid;
}

/* The job dir of the gsrun agent that started an MPS server (its control
 * daemon's parent, a few hops up): 1 with its --job-dir in job, else 0 (a
 * server of the user's outside gsrun). A command line is readable whoever
 * runs the process, and the agent is no CUDA program. */
static int agent_of_server(const char *proc_root, int pid, char *job, size_t jlen)
{
    char path[300];
    for (int hop = 0; hop < 3 && (pid = parent_of(proc_root, pid)) > 1; hop++) {
        size_t len = 0;
        snprintf(path, sizeof(path), "%s/%d/cmdline", proc_root, pid);
        char *cmd = slurp(path, &len);
        const char *prog = cmd != NULL ? strrchr(cmd, '/') : NULL;
        prog = prog != NULL ? prog + 1 : cmd;
        int agent = prog != NULL && strcmp(prog, "gsrun-agent") == 0;
        for (size_t i = 0; agent && i < len; i += strlen(cmd + i) + 1) {
            if (strcmp(cmd + i, "--job-dir") == 0 && i + strlen(cmd + i) + 1 < len) {
                snprintf(job, jlen, "%s", cmd + i + strlen(cmd + i) + 1);
            }
        }
        free(cmd);
        if (agent) {
            return 1;
        }
    }
    return 0;
}

/* Whether pid is named as an MPS server (any user's): the kernel keeps 15
 * bytes of the name, "nvidia-cuda-mps". Its comm is readable whoever runs
 * it, and anyone can set it for a process of theirs (a copy of a program
 * under that name, prctl(PR_SET_NAME)): the name alone proves nothing. */
static int named_server(const char *proc_root, int pid)
{
    char comm[64];
    gs_proc_comm(proc_root, pid, comm, sizeof(comm));
    return strncmp(comm, "nvidia-cuda-mps", 15) == 0;
}

/* 1 if pid (an MPS server when server is 1) is the user's gsrun rank or
 * MPS server of a job the placement record counts: its run dirs in tmpdir
 * (NULL: any). A job of the user's with another TMPDIR (PBS and some sites
 * give each job its own) has a record of its own, so its ranks and servers
 * count here as load. */
static int is_ours(const char *proc_root, int pid, int server, uid_t uid, const char *tmpdir)
{
    char path[300], job[GS_USAGE_JOB_MAX];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%d", proc_root, pid);
    if (stat(path, &st) != 0 || st.st_uid != uid) {
        return 0; /* not here (another PID namespace) or another user's */
    }
    if (server) {
        return !agent_of_server(proc_root, pid, job, sizeof(job)) || tmpdir == NULL ||
               job[0] == '\0' || under(job, tmpdir);
    }
    return rank_of_gsrun(proc_root, pid, job, sizeof(job)) &&
           (tmpdir == NULL || job[0] == '\0' || under(job, tmpdir));
}

int gs_usage_foreign(const gs_gpu_t *g, uid_t uid, const char *proc_root, const char *tmpdir)
{
    int foreign = 0, listed = g->nprocs < GS_GPU_PROCS_MAX ? g->nprocs : GS_GPU_PROCS_MAX;
    for (int i = 0; i < listed; i++) {
        /* In the Default compute mode an MPS server is no load by itself
         * (an idle one holds 66 MiB of an H200 and no SM): NVML lists each
         * of its clients on its own, and they count as what they are. So
         * another user's servers lingering idle do not push this user's
         * ranks off their GPUs. A process only named as one holds a CUDA
         * context of its own, which NVML shows: it counts (usage.h). In
         * an exclusive mode a server holds the GPU: it counts. */
        int server = named_server(proc_root, g->procs[i]);
        if (server && !g->exclusive && g->procs_mib[i] <= GS_USAGE_SERVER_MIB) {
            continue;
        }
        foreign += !is_ours(proc_root, g->procs[i], server, uid, tmpdir);
    }
    foreign += g->nprocs > GS_GPU_PROCS_MAX ? g->nprocs - GS_GPU_PROCS_MAX : 0;
    if (g->nprocs <= 0 && g->used_mib > GS_USAGE_BUSY_MIB) {
        foreign = 1;
    }
    return foreign;
}
