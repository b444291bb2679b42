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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/cgroup.h"
#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/files/rundir_root.h"

static void keep_path(const char *base, const char *name, pid_t pid, char *out, size_t len)
{
    snprintf(out, len, "%s/" GS_RUNDIR_ROOT_KEEP "%s.%d", base, name, (int)pid);
}

/* The keeper's life once fn's child has ended: reap what comes, until the
 * tree is empty or root says end it. cgroup: the job's cgroup ("": none). */
static void keep(const char *file, const char *cgroup)
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
            if (cgroup[0] != '\0') {
                gs_cgroup_remove(cgroup);
            }
            unlink(file);
            return;
        }
        if (sigwaitinfo(&set, NULL) == SIGTERM) {
            int left = 0, ended;
            /* Ahead of whatever the tree runs (a fork bomb's busy loop). */
            setpriority(PRIO_PROCESS, 0, -10);
            if (cgroup[0] != '\0') {
                ended = gs_cgroup_kill(cgroup, GS_WAIT_ENDJOB_MS, &left);
            } else {
                ended = gs_proctree_kill(NULL, NULL, NULL, GS_WAIT_ENDJOB_MS, &left);
            }
            /* What died last came to us: reaped here, not left to PID 1
             * (a zombie also keeps its cgroup from being removed). */
            if (left == 0) {
                gs_proc_reap_all(GS_WAIT_CHILD_EXIT_MS);
                if (cgroup[0] != '\0') {
                    gs_cgroup_remove(cgroup);
                }
            }
            /* The epilog reads the counts from the file, then removes it. */
            int fd = open(file, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) {
                dprintf(fd, "ended %d left %d\n", ended, left);
                close(fd);
            }
            return;
        }
    }
}

/* A cgroup of root's for the job, into path ("" and warning set where none
 * can be made; "" alone where the site said none). */
static void make_cgroup(const char *name, char *path, size_t len, char *warning, size_t wlen)
{
    char mount[GS_PATH_MAX], cgname[128];
    gs_error_t err;
    path[0] = '\0';
    if (gs_cgroup_mount(mount, sizeof(mount)) != 0) {
        return;
    }
    snprintf(cgname, sizeof(cgname), "%s.%d", name, (int)getpid());
    if (gs_cgroup_make(mount, cgname, path, len, &err) != 0) {
        path[0] = '\0';
        snprintf(warning, wlen,
                 "%s; the job's keeper ends the job's processes by their process tree only",
                 err.text);
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
    char cgroup[GS_PATH_MAX] = "";

    prctl(PR_SET_CHILD_SUBREAPER, 1); /* in a session of its own (gs_proc_spawn_daemon) */
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
    } else {
        make_cgroup(name, cgroup, sizeof(cgroup), warning, sizeof(warning));
    }
    int go[2] = {-1, -1};
    if (cgroup[0] != '\0' && pipe2(go, O_CLOEXEC) != 0) {
        gs_cgroup_remove(cgroup);
        cgroup[0] = '\0';
    }
    pid_t child = fork();
    if (child == 0) {
        char byte;
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        prctl(PR_SET_CHILD_SUBREAPER, 0);
        close(report_fd);
        if (fd >= 0) {
            close(fd); /* root's file: never in the user's part */
        }
        if (go[0] >= 0) {
            close(go[1]);
            /* Nothing runs before the keeper has moved us into the cgroup. */
            if (read(go[0], &byte, 1) != 1) {
                _exit(GS_EXIT_SETUP);
            }
            close(go[0]);
        }
        fflush(NULL);
        _exit(fn(arg));
    }
    if (go[0] >= 0) {
        close(go[0]);
        int rc = child > 0 ? gs_cgroup_enter(cgroup, child) : -ECHILD;
        if (rc != 0) {
            snprintf(warning, sizeof(warning),
                     "cannot move the job's processes into the cgroup '%s': %s; the job's keeper "
                     "ends them by their process tree only",
                     cgroup, strerror(-rc));
            gs_cgroup_remove(cgroup);
            cgroup[0] = '\0';
        }
        if (write(go[1], "g", 1) != 1) {
            /* the child is gone: its status says so below */
        }
        close(go[1]);
    }
    if (fd >= 0) {
        if (cgroup[0] != '\0') {
            dprintf(fd, "cgroup %s\n", cgroup); /* for the epilog, should the keeper not answer */
        }
        close(fd);
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
    keep(file, cgroup);
    _exit(0);
}

typedef struct {
    const char *base, *name;
    int timeout_ms;
    int (*fn)(void *);
    void *arg;
} keeper_start_t;

static void keeper_child(void *ctx, int ready_w)
{
    const keeper_start_t *k = ctx;
    keeper_main(k->base, k->name, k->timeout_ms, k->fn, k->arg, ready_w);
}

int gs_keeper_run(const char *base, const char *name, int timeout_ms, int (*fn)(void *), void *arg,
                  gs_error_t *err, gs_error_t *warn)
{
    keeper_start_t k = {base, name, timeout_ms, fn, arg};
    unsigned char code;
    ssize_t r;
    int rd, rc;

    warn->text[0] = '\0';
    fflush(NULL); /* nothing buffered is written twice */
    /* A daemon of its own session, not the prolog's child: it keeps the
     * job's tree after the prolog has exited. */
    if ((rc = gs_proc_spawn_daemon(keeper_child, &k, &rd, err)) != 0) {
        return gs_error_set(err, -rc, "cannot start the job's keeper: %s", strerror(-rc));
    }
    do {
        r = read(rd, &code, 1);
    } while (r < 0 && errno == EINTR);
    if (r == 1) {
        /* A warning may follow the code; the keeper closes its end then. */
        long n = gs_proc_read_all(rd, warn->text, sizeof(warn->text), gs_proc_now_ms() + 2000);
        warn->text[n > 0 ? n : 0] = '\0';
    }
    close(rd);
    if (r != 1) {
        return gs_error_set(err, EPIPE, "the job's keeper ended before the prolog's work did");
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

/* The keeper file at path, read whole (root's regular file only) into buf:
 * its length, or -1. */
static long read_keep(const char *path, char *buf, size_t len)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    long n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0
                 ? gs_proc_read_all(fd, buf, len, gs_proc_now_ms() + GS_WAIT_OWN_FILE_MS)
                 : -1;
    close(fd);
    return n;
}

/* The job's cgroup named in a keeper file ("cgroup PATH"), into out; 0 or
 * -ENOENT. Only a path of gsrun's cgroups is taken. */
static int keep_cgroup(const char *buf, char *out, size_t len)
{
    const char *line = strstr(buf, "\ncgroup /");
    if (line == NULL) {
        return -ENOENT;
    }
    line += strlen("\ncgroup ");
    snprintf(out, len, "%.*s", (int)strcspn(line, "\n"), line);
    return strstr(out, "/gsrun/") != NULL && strstr(out, "/../") == NULL ? 0 : -ENOENT;
}

/* One keeper file: its process ended (0, counts added), none there any
 * more (0), or one that had to be killed (-ETIMEDOUT); in each case the
 * job's cgroup, if one is left, is ended and removed here. */
static int end_one(const char *path, pid_t pid, int timeout_ms, int *count, int *left)
{
    char buf[2 * GS_PATH_MAX], cgroup[GS_PATH_MAX];
    long long start = -1;
    int rc = 0, ended, still;

    long n = read_keep(path, buf, sizeof(buf));
    if (n < 0) {
        return 0;
    }
    start = strtoll(buf, NULL, 10);
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
    if (read_keep(path, buf, sizeof(buf)) > 0) {
        const char *line = strstr(buf, "ended ");
        if (line != NULL && sscanf(line, "ended %d left %d", &ended, &still) == 2) {
            *count += ended > 0 ? ended : 0;
            *left += still > 0 ? still : 0;
        }
        /* A keeper that did not end its cgroup (killed, or gone): root does. */
        if (keep_cgroup(buf, cgroup, sizeof(cgroup)) == 0 && access(cgroup, F_OK) == 0) {
            ended = gs_cgroup_kill(cgroup, timeout_ms, &still);
            *count += ended;
            *left += still;
            if (still == 0) {
                gs_cgroup_remove(cgroup);
            }
        }
    }
    unlink(path);
    return rc;
}

int gs_keeper_end(const char *base, const char *name, int timeout_ms, int *left)
{
    char prefix[128], path[GS_PATH_MAX];
    int count = 0, rc = 0;
    DIR *d = opendir(base);
    struct dirent *e;

    *left = 0;
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
        if (end_one(path, (pid_t)pid, timeout_ms, &count, left) != 0) {
            rc = -ETIMEDOUT;
        }
    }
    closedir(d);
    return rc != 0 ? rc : count;
}
