/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/preflight.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "runtime/files/rundir.h"
#include "runtime/core/limits.h"

int gs_preflight_warnings(const char *shm_dir, char (*out)[256], int max)
{
    struct rlimit rl;
    struct statvfs sv;
    int n = 0;
    const char *shm = shm_dir ? shm_dir : "/dev/shm";

    if (n < max && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < GS_PREFLIGHT_MIN_NOFILE) {
        /* Advise only what ulimit can do: up to the hard limit. */
        unsigned long long cur = rl.rlim_cur, want = GS_PREFLIGHT_MIN_NOFILE * 4;
        int capped = rl.rlim_max != RLIM_INFINITY && (unsigned long long)rl.rlim_max < want;
        if (capped && rl.rlim_max <= rl.rlim_cur) {
            snprintf(out[n++], 256,
                     "the open-file limit is %llu, and so is its hard limit; mpirun and MPS need "
                     "several descriptors per rank: ask the admin to raise it",
                     cur);
        } else {
            snprintf(out[n++], 256,
                     "the open-file limit is %llu; mpirun and MPS need several descriptors per "
                     "rank: raise it with 'ulimit -n %llu'%s",
                     cur, capped ? (unsigned long long)rl.rlim_max : want,
                     capped ? " (its hard limit)" : "");
        }
    }
    if (n < max && statvfs(shm, &sv) == 0) {
        unsigned long long free_mb = (unsigned long long)sv.f_bavail * sv.f_frsize >> 20;
        if (free_mb < GS_PREFLIGHT_MIN_SHM_MB) {
            snprintf(out[n++], 256,
                     "%s has %llu MiB free; MPI's shared-memory transport may fail: enlarge it "
                     "(e.g. docker --shm-size=1g, or remount with size=1G)",
                     shm, free_mb);
        }
    }
    return n;
}

int gs_preflight_claim(const char *job_dir)
{
    char path[GS_PATH_MAX];
    int fd;
    snprintf(path, sizeof(path), "%s/%s", job_dir, GS_OWNER_FILE);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return -errno;
    }
    /* Also a probe: a full TMPDIR shows here, before any agent needs it. */
    int ok = dprintf(fd, "%d\n", (int)getpid()) > 0;
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlink(path);
        return -e;
    }
    return 0;
}

/* Whether a node agent still holds a node dir of this job dir. */
static int agent_running(const char *job_dir)
{
    int fds[64], busy = 0;
    int n = gs_rundir_open_nodes(job_dir, fds, NULL, 64);
    for (int i = 0; i < n; i++) {
        busy |= flock(fds[i], LOCK_EX | LOCK_NB) != 0;
        close(fds[i]);
    }
    return busy;
}

int gs_preflight_clean_stale(const char *tmpdir, char (*out)[256], int max)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        char path[GS_PATH_MAX], owner[4300], buf[32] = "";
        struct stat st;
        if (strncmp(e->d_name, "gsrun.", 6) != 0 || strlen(e->d_name) != 12) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
            continue;
        }
        snprintf(owner, sizeof(owner), "%s/%s", path, GS_OWNER_FILE);
        int fd = open(owner, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            continue; /* being created right now, or not ours to judge */
        }
        ssize_t r = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        long pid = r > 0 ? strtol(buf, NULL, 10) : 0;
        if (pid <= 1 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
            continue; /* its gsrun may still run */
        }
        if (agent_running(path)) {
            continue;
        }
        if (gs_rundir_remove(path) == 0 && n < max) {
            snprintf(out[n], 256, "%s", path);
            n++;
        }
    }
    closedir(d);
    return n;
}
