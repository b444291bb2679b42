/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

long long gs_proc_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long gs_proc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int gs_proc_pidfd_open(pid_t pid)
{
    if (pid <= 0) {
        errno = EINVAL;
        return -1;
    }
    if (getenv("GSRUN_TEST_NO_PIDFD") != NULL) {
        errno = ENOSYS; /* the tests' stand-in for a kernel older than 5.3 */
        return -1;
    }
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int gs_proc_wait(pid_t pid, int timeout_ms, int *status)
{
    long long deadline = gs_proc_now_ms() + timeout_ms;
    int st = 0, pfd;

    if (pid <= 0) {
        return -EINVAL;
    }
    pfd = gs_proc_pidfd_open(pid);
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) {
            if (pfd >= 0) {
                close(pfd);
            }
            if (status != NULL) {
                *status = r == pid ? st : 0;
            }
            return 0;
        }
        long long left = deadline - gs_proc_now_ms();
        if (left <= 0) {
            break;
        }
        if (pfd >= 0) {
            struct pollfd p = {pfd, POLLIN, 0};
            poll(&p, 1, (int)left);
        } else {
            /* No pidfd on this kernel: a short bounded poll. */
            sleep_ms(left < 5 ? (int)left : 5);
        }
    }
    if (pfd >= 0) {
        close(pfd);
    }
    return -ETIMEDOUT;
}

int gs_proc_reap_while(int (*waiting)(void *ctx), void *ctx, int timeout_ms)
{
    long long deadline = gs_proc_now_ms() + timeout_ms;
    sigset_t chld, old;
    int rc = 0;

    /* Blocked, a child's SIGCHLD stays pending between the check and the
     * wait, so no exit is missed and nothing sleeps a fixed time. */
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    for (;;) {
        pid_t r = waitpid(-1, NULL, WNOHANG);
        if (r > 0) {
            continue;
        }
        if (r < 0 || (waiting != NULL && !waiting(ctx))) {
            break; /* ECHILD: none left; or none of those waited for */
        }
        long long left = deadline - gs_proc_now_ms();
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000L};
        sigtimedwait(&chld, NULL, &ts);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int gs_proc_reap_all(int timeout_ms)
{
    return gs_proc_reap_while(NULL, NULL, timeout_ms);
}

int gs_proc_stop_child(pid_t pid, int term_wait_ms, int *status)
{
    if (pid <= 1) {
        return -EINVAL;
    }
    if (gs_proc_wait(pid, 0, status) == 0) {
        return 0;
    }
    kill(pid, SIGTERM);
    if (gs_proc_wait(pid, term_wait_ms, status) == 0) {
        return 0;
    }
    kill(pid, SIGKILL);
    return gs_proc_wait(pid, 5000, status);
}

int gs_proc_signal(pid_t pid, int pidfd, int sig)
{
    if (pid <= 1) {
        return -EINVAL;
    }
    if (pidfd >= 0) {
        if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0) {
            return 0;
        }
        return -errno;
    }
    return kill(pid, sig) == 0 ? 0 : -errno;
}

int gs_proc_stat_fields(const char *proc_root, pid_t pid, char *buf, size_t len)
{
    char path[128], raw[1024];
    snprintf(path, sizeof(path), "%s/%d/stat", proc_root != NULL ? proc_root : "/proc", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    ssize_t n = read(fd, raw, sizeof(raw) - 1);
    close(fd);
    raw[n > 0 ? n : 0] = '\0';
    const char *p = strrchr(raw, ')');
    if (p == NULL || p[1] != ' ') {
        return -1;
    }
    snprintf(buf, len, "%s", p + 2);
    return 0;
}

int gs_proc_threads(const char *proc_root, pid_t pid)
{
    char path[128];
    int tasks = 0;
    snprintf(path, sizeof(path), "%s/%d/task", proc_root != NULL ? proc_root : "/proc", (int)pid);
    DIR *d = opendir(path);
    struct dirent *t;
    while (d != NULL && (t = readdir(d)) != NULL) {
        tasks += t->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return tasks;
}

int gs_proc_uids(const char *proc_root, pid_t pid, long *uid, long *euid)
{
    char path[300], line[256];
    int rc = -1;
    snprintf(path, sizeof(path), "%s/%d/status", proc_root != NULL ? proc_root : "/proc", (int)pid);
    FILE *f = fopen(path, "re");
    while (f != NULL && rc != 0 && fgets(line, sizeof(line), f) != NULL) {
        long u, e;
        if (sscanf(line, "Uid: %ld %ld", &u, &e) == 2) {
            *uid = u;
            *euid = e;
            rc = 0;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return rc;
}

/* One fork (and a second in the child where grandchild), the child in a
 * session of its own running child(ctx, ready_w). */
static int spawn(void (*child)(void *ctx, int ready_w), void *ctx, int grandchild, int *ready_rd,
                 pid_t *pid, gs_error_t *err)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        return gs_error_set(err, errno, "pipe: %s", strerror(errno));
    }
    *pid = fork();
    if (*pid < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return gs_error_set(err, e, "fork: %s", strerror(e));
    }
    if (*pid == 0) {
        setsid();
        if (grandchild && fork() != 0) {
            _exit(0);
        }
        close(pfd[0]);
        child(ctx, pfd[1]);
        _exit(127);
    }
    close(pfd[1]);
    *ready_rd = pfd[0];
    return 0;
}

int gs_proc_spawn_daemon(void (*child)(void *ctx, int ready_w), void *ctx, int *ready_rd,
                         gs_error_t *err)
{
    pid_t pid;
    int st, rc = spawn(child, ctx, 1, ready_rd, &pid, err);
    while (rc == 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return rc;
}

int gs_proc_spawn_child(void (*child)(void *ctx, int ready_w), void *ctx, int *ready_rd,
                        pid_t *pid, gs_error_t *err)
{
    return spawn(child, ctx, 0, ready_rd, pid, err);
}

int gs_proc_comm(const char *proc_root, pid_t pid, char *buf, size_t len)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/%d/comm", proc_root != NULL ? proc_root : "/proc", (int)pid);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return n > 0 ? 0 : -1;
}

int gs_proc_alive(pid_t pid, int pidfd)
{
    if (pidfd >= 0) {
        struct pollfd p = {pidfd, POLLIN, 0};
        return poll(&p, 1, 0) == 0;
    }
    if (pid <= 0) {
        return 0;
    }
    return kill(pid, 0) == 0 || errno == EPERM;
}

static int name_matches(const char *entry, const char *const *list)
{
    for (; list != NULL && *list != NULL; list++) {
        const char *eq = strchr(*list, '=');
        size_t n = eq ? (size_t)(eq - *list) + 1 : strlen(*list);
        if (strncmp(entry, *list, n) == 0) {
            return 1;
        }
    }
    return 0;
}

char **gs_proc_env_build(const char *const *strip, const char *const *set)
{
    size_t n = 0, k = 0, m = 0;
    char **env;

    for (char **e = environ; *e != NULL; e++) {
        n++;
    }
    for (const char *const *s = set; s != NULL && *s != NULL; s++) {
        m++;
    }
    env = calloc(n + m + 1, sizeof(*env));
    if (env == NULL) {
        return NULL;
    }
    for (char **e = environ; *e != NULL; e++) {
        if (name_matches(*e, strip) || name_matches(*e, set)) {
            continue;
        }
        if ((env[k++] = strdup(*e)) == NULL) {
            goto fail;
        }
    }
    for (const char *const *s = set; s != NULL && *s != NULL; s++) {
        if ((env[k++] = strdup(*s)) == NULL) {
            goto fail;
        }
    }
    return env;
fail:
    gs_proc_env_free(env);
    return NULL;
}

void gs_proc_env_free(char **env)
{
    if (env == NULL) {
        return;
    }
    for (char **e = env; *e != NULL; e++) {
        free(*e);
    }
    free(env);
}

/* Reads into buf until end of file, the deadline, or (one_line) a '\n'.
 * Whole-input reads drain what does not fit, so that the writer is never
 * blocked; line reads take one byte at a time, so nothing past the line is
 * consumed. */
static long read_until(int fd, char *buf, size_t len, long long deadline_ms, int one_line)
{
    size_t used = 0;
    while (!(one_line && (used + 1 >= len || (used > 0 && buf[used - 1] == '\n')))) {
        long long left = deadline_ms - gs_proc_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0) {
            buf[used] = '\0';
            return -ETIMEDOUT;
        }
        if (poll(&p, 1, (int)left) <= 0) {
            continue; /* EINTR, or the deadline: checked above */
        }
        char tmp[512];
        int room = used + 1 < len;
        ssize_t r = read(fd, room ? buf + used : tmp,
                         one_line ? 1 : (room ? len - 1 - used : sizeof(tmp)));
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        if (room) {
            used += (size_t)r;
        }
    }
    buf[used] = '\0';
    return (long)used;
}

int gs_proc_write_all(int fd, const char *buf, size_t len, long long deadline_ms)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w > 0) {
            buf += w;
            len -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EINTR && errno != EAGAIN) {
            return -errno;
        }
        long long left = deadline_ms - gs_proc_now_ms();
        struct pollfd p = {fd, POLLOUT, 0};
        if (left <= 0) {
            return -ETIMEDOUT;
        }
        poll(&p, 1, (int)left);
    }
    return 0;
}

long gs_proc_read_line(int fd, char *buf, size_t len, long long deadline_ms)
{
    return read_until(fd, buf, len, deadline_ms, 1);
}

long gs_proc_read_all(int fd, char *buf, size_t len, long long deadline_ms)
{
    return read_until(fd, buf, len, deadline_ms, 0);
}
