/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/core/proc.h"

/* How often the PIDs still in a cgroup being killed are killed again. */
#define GS_CGROUP_REKILL_MS 100

static int write_file(const char *dir, const char *file, const char *text)
{
    char path[GS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    ssize_t n = write(fd, text, strlen(text));
    int e = n < 0 ? errno : 0;
    close(fd);
    return n < 0 ? -e : 0;
}

/* The start of dir/file into buf (NUL-terminated); its length or -errno. */
static long read_file(const char *dir, const char *file, char *buf, size_t len)
{
    char path[GS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    long n = gs_proc_read_all(fd, buf, len, gs_proc_now_ms() + GS_WAIT_SYSFS_MS);
    close(fd);
    return n;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *out = s;
    for (; *s != '\0'; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

int gs_cgroup_mount(char *out, size_t len)
{
    const char *set = getenv("GSRUN_CGROUP_ROOT");
    char line[GS_LINE_MAX];
    int rc = -ENOENT;

    if (set != NULL && *set != '\0') {
        if (strcmp(set, "none") == 0 || set[0] != '/') {
            return -ENOENT;
        }
        snprintf(out, len, "%s", set);
        return 0;
    }
    FILE *f = fopen("/proc/self/mountinfo", "re");
    while (f != NULL && rc != 0 && fgets(line, sizeof(line), f) != NULL) {
        /* id parent major:minor root mountpoint options [tags] - type ... */
        char point[GS_LINE_MAX];
        const char *dash = strstr(line, " - ");
        if (dash == NULL || strncmp(dash, " - cgroup2 ", 11) != 0 ||
            sscanf(line, "%*s %*s %*s %*s %4199s", point) != 1) {
            continue;
        }
        unescape(point);
        if (access(point, W_OK) == 0) {
            snprintf(out, len, "%s", point);
            rc = 0;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return rc;
}

/* Whether word is one of the space-separated words of list. */
static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) {
            return 1;
        }
    }
    return 0;
}

int gs_cgroup_make(const char *mount, const char *name, char *path, size_t len, gs_error_t *err)
{
    char parent[GS_PATH_MAX], buf[256], text[32];
    struct stat st;

    snprintf(parent, sizeof(parent), "%s/gsrun", mount);
    if (mkdir(parent, 0755) != 0 && errno != EEXIST) {
        return gs_error_set(err, errno, "cannot make the cgroup '%s': %s", parent, strerror(errno));
    }
    if (lstat(parent, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0) {
        return gs_error_set(err, EPERM, "'%s' is not a cgroup of root's", parent);
    }
    /* The jobs' cgroups get the pids controller where root's has it. */
    if (read_file(mount, "cgroup.subtree_control", buf, sizeof(buf)) > 0 && has_word(buf, "pids")) {
        write_file(parent, "cgroup.subtree_control", "+pids");
    }
    for (int i = 0; i < 100; i++) {
        if (i == 0) {
            snprintf(path, len, "%s/%s", parent, name);
        } else {
            snprintf(path, len, "%s/%s.%d", parent, name, i);
        }
        if (mkdir(path, 0755) == 0) {
            snprintf(text, sizeof(text), "%d", GS_CGROUP_PIDS_MAX);
            write_file(path, "pids.max", text); /* none where no pids controller */
            return 0;
        }
        if (errno != EEXIST) {
            return gs_error_set(err, errno, "cannot make the cgroup '%s': %s", path,
                                strerror(errno));
        }
    }
    return gs_error_set(err, EEXIST, "cannot make a cgroup for '%s' in '%s': 100 names taken", name,
                        parent);
}

int gs_cgroup_enter(const char *path, pid_t pid)
{
    char text[32];
    snprintf(text, sizeof(text), "%d", (int)(pid > 0 ? pid : getpid()));
    return write_file(path, "cgroup.procs", text);
}

/* How many processes the cgroup holds (lines of cgroup.procs). With kill,
 * SIGKILLs each of them too. */
static int procs(const char *path, int kill_them)
{
    char file[GS_PATH_MAX], buf[8192], part[32] = "";
    size_t plen = 0;
    int count = 0;
    ssize_t n;
    snprintf(file, sizeof(file), "%s/cgroup.procs", path);
    int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (plen + 1 < sizeof(part)) {
                    part[plen++] = buf[i];
                }
                continue;
            }
            part[plen] = '\0';
            plen = 0;
            count++;
            if (kill_them && atoi(part) > 1) {
                kill((pid_t)atoi(part), SIGKILL);
            }
        }
    }
    close(fd);
    return count;
}

static int populated(const char *path)
{
    char buf[256];
    if (read_file(path, "cgroup.events", buf, sizeof(buf)) <= 0) {
        return procs(path, 0) > 0;
    }
    const char *p = strstr(buf, "populated ");
    return p == NULL || p[10] != '0';
}

int gs_cgroup_kill(const char *path, int timeout_ms, int *left)
{
    long long deadline = gs_proc_now_ms() + timeout_ms;
    int held = procs(path, 0);
    int atomic = write_file(path, "cgroup.kill", "1") == 0, frozen = 0;
    char events[GS_PATH_MAX];

    snprintf(events, sizeof(events), "%s/cgroup.events", path);
    int fd = open(events, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    long long next_kill = atomic ? gs_proc_now_ms() + GS_CGROUP_REKILL_MS : 0;
    for (;;) {
        /* No reaping here: a zombie leaves its cgroup unpopulated, and each
         * waitpid over thousands of children (a subreaper's) held the lock
         * every exit takes; the caller reaps once all are dead. */
        if (!populated(path)) {
            *left = 0;
            break;
        }
        /* What cgroup.kill missed, or a kernel without it (5.13 and older):
         * frozen (5.2 and later), no process forks; each is then killed by
         * its PID, as a whole thread group: cgroup.kill signals the leader
         * alone, and a leader that has exited passes it on to none of the
         * threads it left running (Linux 6.18). A PID of the frozen cgroup's
         * list stays its process's until that process has been reaped.
         * Not at every wake: thousands of killed processes need the CPU to
         * exit, and a pass over all their PIDs each 10 ms (at our raised
         * priority) took it from them for seconds on a loaded 2-core node. */
        if (gs_proc_now_ms() >= next_kill) {
            if (!frozen) {
                frozen = write_file(path, "cgroup.freeze", "1") == 0;
            }
            procs(path, 1);
            next_kill = gs_proc_now_ms() + GS_CGROUP_REKILL_MS;
        }
        long long now = gs_proc_now_ms();
        if (now >= deadline) {
            *left = procs(path, 0);
            break;
        }
        /* The kernel marks cgroup.events when it changes; short waits all
         * the same, for a kernel that does not. */
        struct pollfd p = {fd, POLLPRI, 0};
        poll(&p, fd >= 0 ? 1 : 0, deadline - now < 10 ? (int)(deadline - now) : 10);
    }
    if (fd >= 0) {
        close(fd);
    }
    if (frozen) {
        write_file(path, "cgroup.freeze", "0");
    }
    return held;
}

int gs_cgroup_remove(const char *path)
{
    /* A cgroup is busy a moment after its last process has exited. */
    for (int i = 0; i < 100; i++) {
        if (rmdir(path) == 0 || errno == ENOENT) {
            return 0;
        }
        if (errno != EBUSY) {
            return -errno;
        }
        usleep(1000);
    }
    return -EBUSY;
}
