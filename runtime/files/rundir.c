/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "runtime/core/proc.h"

int gs_rundir_check_parent(const char *dir, gs_error_t *err)
{
    struct stat st;
    if (lstat(dir, &st) != 0) {
        return gs_error_set(err, errno,
                            "run directory parent '%s': %s; set TMPDIR to an existing directory",
                            dir, strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        return gs_error_set(err, ELOOP,
                            "run directory parent '%s' is a symbolic link; gsrun refuses it so "
                            "that nobody can redirect the MPS sockets; set TMPDIR to the real "
                            "directory",
                            dir);
    }
    if (!S_ISDIR(st.st_mode)) {
        return gs_error_set(err, ENOTDIR, "run directory parent '%s' is not a directory", dir);
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        return gs_error_set(err, EPERM,
                            "run directory parent '%s' is owned by uid %u, not by you or root; set "
                            "TMPDIR to a directory of your own",
                            dir, (unsigned)st.st_uid);
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
        return gs_error_set(err, EPERM,
                            "run directory parent '%s' is writable by others and not sticky; set "
                            "TMPDIR to a private directory",
                            dir);
    }
    return 0;
}

int gs_rundir_create_job(const char *tmpdir, char *out, size_t outlen, gs_error_t *err)
{
    int rc = gs_rundir_check_parent(tmpdir, err);
    if (rc != 0) {
        return rc;
    }
    if ((size_t)snprintf(out, outlen, "%s/gsrun.XXXXXX", tmpdir) >= outlen) {
        return gs_error_set(err, ENAMETOOLONG, "TMPDIR '%s' is too long", tmpdir);
    }
    if (mkdtemp(out) == NULL) {
        int e = errno;
        return gs_error_set(err, e, "cannot create a run directory in '%s': %s", tmpdir,
                            strerror(e));
    }
    return 0;
}

int gs_rundir_ensure(const char *dir, gs_error_t *err)
{
    if (mkdir(dir, 0700) == 0) {
        return 0;
    }
    if (errno != EEXIST) {
        return gs_error_set(err, errno, "cannot create run directory '%s': %s", dir,
                            strerror(errno));
    }
    return gs_rundir_check_own(dir, err);
}

int gs_rundir_check_own(const char *dir, gs_error_t *err)
{
    struct stat st;
    if (lstat(dir, &st) != 0) {
        return gs_error_set(err, errno, "run directory '%s': %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        return gs_error_set(err, ENOTDIR,
                            "run directory '%s' exists and is not a directory (a symbolic link "
                            "or file put there by someone else?); remove it",
                            dir);
    }
    if (st.st_uid != geteuid()) {
        return gs_error_set(err, EPERM, "run directory '%s' is owned by uid %u, not by you", dir,
                            (unsigned)st.st_uid);
    }
    if ((st.st_mode & 077) != 0) {
        return gs_error_set(err, EPERM,
                            "run directory '%s' is accessible to others (mode %o); remove it", dir,
                            (unsigned)(st.st_mode & 0777));
    }
    return 0;
}

int gs_rundir_lock_wait(const char *dir, int timeout_ms)
{
    long long deadline = gs_proc_now_ms() + timeout_ms;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return -errno;
    }
    /* Polled, not a blocking flock under an alarm: a launcher's daemon
     * (slurmstepd) calls this and must not get signals of ours. */
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (gs_proc_now_ms() >= deadline) {
            close(fd);
            return -ETIMEDOUT;
        }
        usleep(5000);
    }
    return fd;
}

int gs_rundir_open_regular(const char *path)
{
    struct stat st;
    /* O_NONBLOCK: opening a FIFO put in place of the file returns at once
     * instead of waiting for a writer that never comes. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        return -errno;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    return fd;
}

int gs_rundir_check_usable(const char *job_dir, gs_error_t *err)
{
    char node[64], longest[600];
    for (const unsigned char *p = (const unsigned char *)job_dir; *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            char shown[512];
            snprintf(shown, sizeof(shown), "%s", job_dir);
            for (char *q = shown; *q != '\0'; q++) {
                *q = ((unsigned char)*q < 0x20 || *q == 0x7f) ? '?' : *q;
            }
            return gs_error_set(err, EINVAL,
                                "the run directory '%s' has a control character (a newline?) "
                                "that gsrun's state file cannot carry; set TMPDIR to a plain "
                                "path",
                                shown);
        }
    }
    /* The deepest socket: MPS's in the pipe dir of the 64th GPU. */
    gs_rundir_node_name(node, sizeof(node));
    snprintf(longest, sizeof(longest), "%s/%s/g63", job_dir, node);
    if (!gs_rundir_socket_fits(longest)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "the run directory '%s' is too long for MPS's unix sockets (%d bytes "
                            "with their names); set TMPDIR to a shorter directory",
                            job_dir, GS_SUN_PATH_MAX);
    }
    return 0;
}

int gs_rundir_socket_fits(const char *dir)
{
    return strlen(dir) + 1 + GS_RUNDIR_SOCKET_ROOM < GS_SUN_PATH_MAX;
}

/* Removing a tree that its owner (a job's user) may have shaped to defeat
 * it: any depth, any width, links anywhere. Recursion would hold one
 * descriptor and one DIR buffer per level (25,000 nested directories ran
 * root's epilog out of descriptors, EMFILE, and with a higher limit grow
 * its stack). Instead two directories are open at a time: the top one, and
 * one of its subdirectories whose entries are removed, or, for directories,
 * moved up into the top one under fresh names; so every level is undone
 * one at a time with bounded descriptors, memory and stack, and a link is
 * only ever unlinked, never followed. */

/* Moves sub's non-empty directories into top under a name nothing there
 * has; removes everything else in sub. Returns how many entries went, or
 * a negative errno when none could. */
static long hoist(int sub, int top, unsigned long *serial)
{
    int fd = dup(sub);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    long done = 0;
    int err = 0;

    if (d == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        return -errno;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (unlinkat(sub, e->d_name, 0) == 0 || errno == ENOENT ||
            ((errno == EISDIR || errno == EPERM) &&
             (unlinkat(sub, e->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT))) {
            done++;
            continue;
        }
        if (errno != ENOTEMPTY && errno != EEXIST) {
            err = errno;
            continue;
        }
        for (int tries = 0; tries < 1000; tries++) {
            char fresh[32];
            snprintf(fresh, sizeof(fresh), ".gs-rm-%lu", (*serial)++);
            if (renameat2(sub, e->d_name, top, fresh, RENAME_NOREPLACE) == 0 || errno == ENOENT) {
                done++; /* moved, or removed meanwhile by another remover */
                break;
            }
            if (errno == EINVAL || errno == ENOSYS) {
                /* No RENAME_NOREPLACE here: a name taken meanwhile can only
                 * be an empty directory of the same tree, which this
                 * replaces. */
                if (faccessat(top, fresh, F_OK, AT_SYMLINK_NOFOLLOW) != 0 &&
                    renameat(sub, e->d_name, top, fresh) == 0) {
                    done++;
                    break;
                }
            }
            if (errno != EEXIST && errno != ENOTEMPTY) {
                err = errno;
                break;
            }
        }
    }
    closedir(d);
    return done > 0 || err == 0 ? done : -err;
}

/* Empties the directory open as top. 0, or a negative errno when a pass
 * over it could remove nothing more. */
static int empty_dir(int top)
{
    unsigned long serial = 0;
    for (;;) {
        int fd = dup(top), seen = 0, progress = 0, err = 0;
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *e;
        if (d == NULL) {
            if (fd >= 0) {
                close(fd);
            }
            return -errno;
        }
        rewinddir(d);
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                continue;
            }
            seen++;
            if (unlinkat(top, e->d_name, 0) == 0 || errno == ENOENT ||
                ((errno == EISDIR || errno == EPERM) &&
                 (unlinkat(top, e->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT))) {
                progress = 1;
                continue;
            }
            if (errno != ENOTEMPTY && errno != EEXIST) {
                err = errno;
                continue;
            }
            int sub = openat(top, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                /* Gone meanwhile (the agent and its guard may remove the
                 * same tree at once): as good as removed. */
                progress |= errno == ENOENT;
                err = errno == ENOENT ? err : errno;
                continue;
            }
            long r = hoist(sub, top, &serial);
            close(sub);
            if (r > 0) {
                progress = 1; /* the directory itself goes on a later pass */
            } else if (r < 0) {
                err = (int)-r;
            }
        }
        closedir(d);
        if (seen == 0) {
            return 0;
        }
        if (!progress) {
            return -(err != 0 ? err : ENOTEMPTY);
        }
    }
}

int gs_rundir_remove(const char *path)
{
    if (unlinkat(AT_FDCWD, path, 0) == 0 || errno == ENOENT) {
        return 0;
    }
    if (errno != EISDIR && errno != EPERM) {
        return -errno;
    }
    int top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    /* An entry made after the last pass (a dying rank or MPS daemon still
     * writing its log) makes the rmdir fail with ENOTEMPTY: empty it again,
     * a few times, rather than leave the tree behind. */
    int rc = 0;
    for (int round = 0; round < 5; round++) {
        rc = empty_dir(top);
        if (rmdir(path) == 0 || errno == ENOENT) {
            close(top);
            return 0;
        }
        if (errno != ENOTEMPTY && errno != EEXIST) {
            rc = rc != 0 ? rc : -errno;
            break;
        }
        rc = rc != 0 ? rc : -errno;
    }
    close(top);
    return rc;
}

int gs_rundir_open_nodes(const char *job_dir, int *fds, char (*names)[64], int max)
{
    DIR *d = opendir(job_dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return 0;
    }
    while (n < max && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= 64) {
            continue;
        }
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            continue; /* a file, or removed meanwhile by its agent */
        }
        if (names != NULL) {
            snprintf(names[n], 64, "%s", e->d_name);
        }
        fds[n++] = fd;
    }
    closedir(d);
    return n;
}

void gs_rundir_node_name(char *buf, size_t len)
{
    char host[256] = "";
    size_t n = 0;
    if (gethostname(host, sizeof(host) - 1) != 0) {
        host[0] = '\0';
    }
    for (const char *p = host; *p != '\0' && *p != '.' && n + 1 < len && n < 32; p++) {
        char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_') {
            buf[n++] = c;
        }
    }
    if (n == 0 && len > 5) {
        snprintf(buf, len, "node");
        return;
    }
    buf[n] = '\0';
}

int gs_rundir_root_usable(const char *dir)
{
    struct statvfs sv;
    gs_error_t err;
    return gs_rundir_check_parent(dir, &err) == 0 && access(dir, W_OK | X_OK) == 0 &&
           statvfs(dir, &sv) == 0 &&
           (unsigned long long)sv.f_bavail * sv.f_frsize >= GS_RUNDIR_SHM_MIN;
}

const char *gs_rundir_default_root(void)
{
    /* Decided once: every dir a process names must come from one root. */
    static const char *root;
    if (root == NULL) {
        root = gs_rundir_root_usable(GS_RUNDIR_SHM) ? GS_RUNDIR_SHM : "/tmp";
    }
    return root;
}

const char *gs_rundir_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    if (t == NULL || t[0] != '/') {
        return gs_rundir_default_root();
    }
    /* /tmp itself is the system's default, not a choice: Slurm sets it for
     * every task whose TMPDIR is unset (its TmpFS). */
    size_t n = strlen(t);
    while (n > 1 && t[n - 1] == '/') {
        n--;
    }
    return n == 4 && strncmp(t, "/tmp", 4) == 0 ? gs_rundir_default_root() : t;
}

const char *gs_rundir_job_name(const char *job_dir)
{
    const char *slash = strrchr(job_dir, '/');
    return slash != NULL ? slash + 1 : job_dir;
}
