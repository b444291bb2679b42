/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/batch/keeper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/files/rundir_root.h"

static void keep_path(const char *base, const char *name, pid_t pid, char *out, size_t len)
{
    snprintf(out, len, "%s/" GS_RUNDIR_ROOT_KEEP "%s.%d", base, name, (int)pid);
}

/* The keeper's life once fn's child has ended: reap what comes, until the
 * tree is empty or root says end it. */
static void keep(const char *file)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    for (;;) {
        pid_t r;
        while ((r = waitpid(-1, NULL, WNOHANG)) > 0) {
        }
        if (r < 0 && errno == ECHILD) {
            unlink(file);
            return;
        }
        if (sigwaitinfo(&set, NULL) == SIGTERM) {
            int ended = gs_proctree_kill(NULL, NULL, GS_WAIT_ENDJOB_MS);
            /* The epilog reads the count from the file, then removes it. */
            int fd = open(file, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) {
                dprintf(fd, "ended %d\n", ended);
                close(fd);
            }
            return;
        }
    }
}

static void keeper_main(const char *base, const char *name, int timeout_ms, int (*fn)(void *),
                        void *arg, int report_fd)
{
    char file[GS_PATH_MAX];
    sigset_t set;
    int status = 0;
    unsigned char code;
    char warning[GS_ERROR_LEN] = ""; /* told to the prolog after the code */

    setsid(); /* no signal to the prolog's process group reaches us */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_NAME, "gsrun-keeper");
    signal(SIGCHLD, SIG_DFL); /* not SIG_IGN: children must stay to be reaped */
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    keep_path(base, name, getpid(), file, sizeof(file));
    int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    long long start = gs_proctree_stat_field(getpid(), GS_STAT_STARTTIME);
    if (fd < 0 || dprintf(fd, "%lld\n", start) < 0) {
        snprintf(warning, sizeof(warning),
                 "cannot write the job's keeper file '%s': %s; the epilog ends the job's "
                 "processes by their sessions only",
                 file, strerror(errno));
    }
    if (fd >= 0) {
        close(fd);
    }
    pid_t child = fork();
    if (child == 0) {
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        prctl(PR_SET_CHILD_SUBREAPER, 0);
        close(report_fd);
        fflush(NULL);
        _exit(fn(arg));
    }
    if (child < 0) {
        status = GS_EXIT_SETUP << 8;
    } else if (gs_proc_wait(child, timeout_ms, &status) != 0) {
        gs_proc_stop_child(child, 100, NULL);
        status = GS_EXIT_SETUP << 8;
    }
    code = WIFEXITED(status) ? (unsigned char)WEXITSTATUS(status) : GS_EXIT_SETUP;
    /* Nothing of the prolog's output stays open here: a batch system that
     * reads it until its end must not wait for the job. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    if (write(report_fd, &code, 1) != 1 ||
        (warning[0] != '\0' && write(report_fd, warning, strlen(warning)) < 0)) {
        /* the prolog is gone: keep the tree all the same */
    }
    close(report_fd);
    keep(file);
    _exit(0);
}

int gs_keeper_run(const char *base, const char *name, int timeout_ms, int (*fn)(void *), void *arg,
                  gs_error_t *err, gs_error_t *warn)
{
    int p[2];
    unsigned char code;
    ssize_t r;

    warn->text[0] = '\0';
    if (pipe2(p, O_CLOEXEC) != 0) {
        return gs_error_set(err, errno, "cannot make a pipe for the job's keeper: %s",
                            strerror(errno));
    }
    fflush(NULL);
    pid_t keeper = fork();
    if (keeper < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return gs_error_set(err, e, "cannot start the job's keeper: %s", strerror(e));
    }
    if (keeper == 0) {
        close(p[0]);
        keeper_main(base, name, timeout_ms, fn, arg, p[1]);
    }
    close(p[1]);
    do {
        r = read(p[0], &code, 1);
    } while (r < 0 && errno == EINTR);
    if (r == 1) {
        /* A warning may follow the code; the keeper closes its end then. */
        long n = gs_proc_read_all(p[0], warn->text, sizeof(warn->text),
                                  gs_proc_now_ms() + 2000);
        warn->text[n > 0 ? n : 0] = '\0';
    }
    close(p[0]);
    if (r != 1) {
        return gs_error_set(err, EPIPE,
                            "the job's keeper (pid %d) ended before the prolog's "
                            "work did",
                            (int)keeper);
    }
    return code;
}

/* Whether the keeper (pid, started at start) exits within timeout_ms; an
 * exited one no PID 1 reaps counts as exited. */
static int ended_within(pid_t pid, int pidfd, long long start, int timeout_ms)
{
    if (pidfd >= 0) {
        struct pollfd p = {pidfd, POLLIN, 0};
        return poll(&p, 1, timeout_ms) == 1;
    }
    for (long long deadline = gs_proc_now_ms() + timeout_ms;; usleep(5000)) {
        if (gs_proctree_stat_field(pid, GS_STAT_STARTTIME) != start ||
            gs_proctree_stat_field(pid, GS_STAT_STATE) == 'Z') {
            return 1;
        }
        if (gs_proc_now_ms() >= deadline) {
            return 0;
        }
    }
}

/* One keeper file: its process ended (0, count added), none there any
 * more (0), or one that had to be killed (-ETIMEDOUT). */
static int end_one(const char *path, pid_t pid, int timeout_ms, int *count)
{
    char buf[128];
    struct stat st;
    long long start = -1;
    int rc = 0, ended;

    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0
                    ? read(fd, buf, sizeof(buf) - 1)
                    : -1;
    close(fd);
    if (n > 0) {
        buf[n] = '\0';
        start = strtoll(buf, NULL, 10);
    }
    int pidfd = gs_proc_pidfd_open(pid);
    int usable = pidfd >= 0 || errno == ENOSYS; /* no pidfds: by PID, checked */
    if (n > 0 && usable && gs_proctree_stat_field(pid, GS_STAT_STARTTIME) == start) {
        gs_proc_signal(pid, pidfd, SIGTERM);
        if (!ended_within(pid, pidfd, start, timeout_ms)) {
            gs_proc_signal(pid, pidfd, SIGKILL);
            rc = -ETIMEDOUT;
        }
    }
    if (pidfd >= 0) {
        close(pidfd);
    }
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        const char *line = strstr(buf, "ended ");
        if (line != NULL && sscanf(line, "ended %d", &ended) == 1 && ended > 0) {
            *count += ended;
        }
        close(fd);
    }
    unlink(path);
    return rc;
}

int gs_keeper_end(const char *base, const char *name, int timeout_ms)
{
    char prefix[128], path[GS_PATH_MAX];
    int count = 0, rc = 0;
    DIR *d = opendir(base);
    struct dirent *e;

    if (d == NULL) {
        return 0;
    }
    snprintf(prefix, sizeof(prefix), GS_RUNDIR_ROOT_KEEP "%s.", name);
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) {
            continue;
        }
        long pid = strtol(e->d_name + strlen(prefix), &end, 10);
        if (pid <= 1 || *end != '\0') {
            continue;
        }
        keep_path(base, name, (pid_t)pid, path, sizeof(path));
        if (end_one(path, (pid_t)pid, timeout_ms, &count) != 0) {
            rc = -ETIMEDOUT;
        }
    }
    closedir(d);
    return rc != 0 ? rc : count;
}
