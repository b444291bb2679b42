/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/batch/endjob.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/core/proc.h"

#define GS_ENDJOB_MAX_SESSIONS 16

/* The real uid, session and state of /proc/<pid>; 0, or -1 if gone. */
static int proc_facts(const char *proc_root, pid_t pid, uid_t *uid, pid_t *sid, char *state)
{
    char path[128], buf[1024];
    snprintf(path, sizeof(path), "%s/%d/status", proc_root, (int)pid);
    FILE *f = fopen(path, "re");
    int got_uid = 0;
    if (f == NULL) {
        return -1;
    }
    while (fgets(buf, sizeof(buf), f) != NULL) {
        unsigned long u;
        if (sscanf(buf, "Uid: %lu", &u) == 1) {
            *uid = (uid_t)u;
            got_uid = 1;
        }
    }
    fclose(f);
    if (!got_uid || gs_proc_stat_fields(proc_root, pid, buf, sizeof(buf)) != 0) {
        return -1;
    }
    /* From GS_STAT_STATE on: state, ppid, pgrp, session. */
    int ppid, pgrp, session;
    if (sscanf(buf, "%c %d %d %d", state, &ppid, &pgrp, &session) != 4) {
        return -1;
    }
    *sid = (pid_t)session;
    return 0;
}

/* Whether /proc/<pid> is gsrun-agent's command line for job_dir: argv[0]
 * ending in "/gsrun-agent" (or that name) and "--job-dir" job_dir. */
static int is_agent_of(const char *proc_root, pid_t pid, const char *job_dir)
{
    char path[128], buf[GS_LINE_MAX];
    snprintf(path, sizeof(path), "%s/%d/cmdline", proc_root, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    const char *arg0 = buf, *slash = strrchr(arg0, '/');
    if (strcmp(slash != NULL ? slash + 1 : arg0, "gsrun-agent") != 0) {
        return 0;
    }
    for (const char *a = buf; a < buf + n; a += strlen(a) + 1) {
        const char *next = a + strlen(a) + 1;
        if (strcmp(a, "--job-dir") == 0 && next < buf + n && strcmp(next, job_dir) == 0) {
            return 1;
        }
    }
    return 0;
}

/* One pass: the sessions of job_dir's agents (added to sids), then SIGKILL
 * to every live process of uid in them. Returns how many were signalled. */
static int kill_pass(const char *proc_root, const char *job_dir, uid_t uid, pid_t *sids, int *nsids)
{
    DIR *d = opendir(proc_root);
    struct dirent *e;
    int killed = 0;
    if (d == NULL) {
        return 0;
    }
    for (int round = 0; round < 2; round++) {
        rewinddir(d);
        while ((e = readdir(d)) != NULL) {
            char *end, state = '?';
            long v = strtol(e->d_name, &end, 10);
            uid_t pu;
            pid_t sid;
            if (*end != '\0' || v <= 1 || (pid_t)v == getpid()) {
                continue;
            }
            pid_t pid = (pid_t)v;
            /* The pidfd first: what is checked below is then the process
             * the signal reaches. */
            int pfd = gs_proc_pidfd_open(pid);
            if (proc_facts(proc_root, pid, &pu, &sid, &state) != 0 || pu != uid ||
                (state == 'Z' && gs_proc_threads(proc_root, pid) <= 1)) {
                if (pfd >= 0) {
                    close(pfd);
                }
                continue;
            }
            if (round == 0) {
                if (is_agent_of(proc_root, pid, job_dir) && *nsids < GS_ENDJOB_MAX_SESSIONS) {
                    int known = 0;
                    for (int i = 0; i < *nsids; i++) {
                        known |= sids[i] == sid;
                    }
                    if (!known) {
                        sids[(*nsids)++] = sid;
                    }
                }
            } else {
                for (int i = 0; i < *nsids; i++) {
                    if (sid == sids[i] && gs_proc_signal(pid, pfd, SIGKILL) == 0) {
                        killed++;
                        break;
                    }
                }
            }
            if (pfd >= 0) {
                close(pfd);
            }
        }
    }
    closedir(d);
    return killed;
}

int gs_endjob_kill(const char *proc_root, const char *job_dir, uid_t uid, int timeout_ms)
{
    pid_t sids[GS_ENDJOB_MAX_SESSIONS];
    int nsids = 0, total = 0;
    long long deadline = gs_proc_now_ms() + timeout_ms;
    const char *root = proc_root != NULL ? proc_root : "/proc";

    if (uid == 0) {
        return 0; /* root's own job: nothing here is another user's to end */
    }
    for (;;) {
        int n = kill_pass(root, job_dir, uid, sids, &nsids);
        total += n;
        if (n == 0) {
            return total;
        }
        if (gs_proc_now_ms() >= deadline) {
            return -ETIMEDOUT;
        }
        usleep(20 * 1000); /* a process forked meanwhile is found on the next pass */
    }
}
