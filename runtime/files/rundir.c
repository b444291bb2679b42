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
    struct stat st;
    if (mkdir(dir, 0700) == 0) {
        return 0;
    }
    if (errno != EEXIST) {
        return gs_error_set(err, errno, "cannot create run directory '%s': %s", dir,
                            strerror(errno));
    }
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

static int remove_at(int parentfd, const char *name)
{
    int fd, rc = 0;
    DIR *d;
    struct dirent *e;

    if (unlinkat(parentfd, name, 0) == 0 || errno == ENOENT) {
        return 0;
    }
    if (errno != EISDIR && errno != EPERM) {
        return -errno;
    }
    fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -errno;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        int r = remove_at(dirfd(d), e->d_name);
        if (r != 0) {
            rc = r;
        }
    }
    closedir(d);
    if (unlinkat(parentfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        rc = -errno;
    }
    return rc;
}

int gs_rundir_remove(const char *path)
{
    return remove_at(AT_FDCWD, path);
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

const char *gs_rundir_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    return (t != NULL && t[0] == '/') ? t : "/tmp";
}
