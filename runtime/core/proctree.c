/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/proctree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"

/* The most processes one pass takes; the passes repeat until none is left. */
#define GS_PROCTREE_MAX 4096

long long gs_proctree_stat_field(pid_t pid, int k)
{
    char buf[1024], *save = NULL, *tok;
    if (gs_proc_stat_fields(NULL, pid, buf, sizeof(buf)) != 0) {
        return -1;
    }
    tok = strtok_r(buf, " ", &save);
    for (int i = GS_STAT_STATE; tok != NULL && i < k; i++) {
        tok = strtok_r(NULL, " ", &save);
    }
    if (tok == NULL) {
        return -1;
    }
    return k == GS_STAT_STATE ? (long long)(unsigned char)tok[0] : strtoll(tok, NULL, 10);
}

static int listed(const pid_t *list, int n, pid_t pid)
{
    for (int i = 0; i < n; i++) {
        if (list[i] == pid) {
            return 1;
        }
    }
    return 0;
}

/* Whether pid's command name is one of names (NULL-terminated). */
static int named(pid_t pid, const char *const *names)
{
    char path[64], comm[32] = "";
    if (names == NULL) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, comm, sizeof(comm) - 1);
        comm[n > 0 ? n : 0] = '\0';
        comm[strcspn(comm, "\n")] = '\0';
        close(fd);
    }
    for (; *names != NULL; names++) {
        if (strcmp(comm, *names) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether pid's environment (its first 256 KiB) holds a "marker..." entry. */
static int marked(pid_t pid, const char *marker)
{
    static char env[256 * 1024];
    char path[64];
    if (marker == NULL) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    long n = gs_proc_read_all(fd, env, sizeof(env) - 1, gs_proc_now_ms() + 100);
    close(fd);
    size_t m = strlen(marker);
    for (long i = 0; i < n; i += (long)strlen(env + i) + 1) {
        env[n] = '\0';
        if (strncmp(env + i, marker, m) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The living descendants of self below no spared process: passes over
 * /proc until the set stops growing (a child may be listed before its
 * parent). */
static int descendants(pid_t self, const char *const *spare, pid_t *out, int max)
{
    int n = 0, grew = 1;
    while (grew && n < max) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        grew = 0;
        if (d == NULL) {
            break;
        }
        while (n < max && (e = readdir(d)) != NULL) {
            pid_t pid = (pid_t)atoi(e->d_name);
            if (pid <= 1 || pid == self || listed(out, n, pid)) {
                continue;
            }
            pid_t ppid = (pid_t)gs_proctree_stat_field(pid, GS_STAT_PPID);
            if ((ppid == self || (ppid > 1 && listed(out, n, ppid))) &&
                gs_proctree_stat_field(pid, GS_STAT_STATE) != 'Z' && !named(pid, spare)) {
                out[n++] = pid;
                grew = 1;
            }
        }
        closedir(d);
    }
    return n;
}

int gs_proctree_kill(const char *const *spare, const char *marker, int timeout_ms)
{
    static pid_t tree[GS_PROCTREE_MAX], signalled[GS_PROCTREE_MAX];
    long long deadline = gs_proc_now_ms() + timeout_ms;
    pid_t self = getpid();
    int ended = 0;

    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        int n = descendants(self, spare, tree, GS_PROCTREE_MAX), left = 0;
        for (int i = 0; i < n; i++) {
            if (!marked(tree[i], marker)) {
                continue; /* not the kind asked for: its children still count */
            }
            left++;
            int fd = gs_proc_pidfd_open(tree[i]);
            int usable = fd >= 0 || errno == ENOSYS; /* no pidfds: by PID */
            /* Checked again once the pidfd holds the process: a PID reused
             * between the scan and the signal is never hit. */
            pid_t ppid = (pid_t)gs_proctree_stat_field(tree[i], GS_STAT_PPID);
            if (usable && (ppid == self || listed(tree, n, ppid)) &&
                gs_proc_signal(tree[i], fd, SIGKILL) == 0 && !listed(signalled, ended, tree[i]) &&
                ended < GS_PROCTREE_MAX) {
                signalled[ended++] = tree[i];
            }
            if (fd >= 0) {
                close(fd);
            }
        }
        if (left == 0 || gs_proc_now_ms() >= deadline) {
            return ended;
        }
        usleep(2000); /* the killed ones' children come back to us */
    }
}

/* Whether a child of ours named in names (NULL-terminated) is left. */
static int named_child_left(void *names)
{
    pid_t self = getpid();
    int left = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && !left && (e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);
        left = pid > 1 && gs_proctree_stat_field(pid, GS_STAT_PPID) == self &&
               named(pid, (const char *const *)names);
    }
    if (d != NULL) {
        closedir(d);
    }
    return left;
}

int gs_proctree_reap(const char *const *names, int timeout_ms)
{
    return gs_proc_reap_while(named_child_left, (void *)names, timeout_ms);
}
