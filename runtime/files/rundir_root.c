/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/rundir_root.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/files/rundir.h"

/* One directory of the chain: a real directory of root's that nobody else
 * may write, unless it is sticky (then nobody else can rename what root
 * made in it). The base itself must not be writable by others at all. */
static int check_dir(const char *path, int is_base, gs_error_t *err)
{
    struct stat st;

    if (lstat(path, &st) != 0) {
        return gs_error_set(err, errno, "'%s': %s", path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        return gs_error_set(err, ELOOP,
                            "'%s' is a symbolic link; give gsrun the real directory (only root "
                            "may write to it)",
                            path);
    }
    if (!S_ISDIR(st.st_mode)) {
        return gs_error_set(err, ENOTDIR, "'%s' is not a directory", path);
    }
    if (st.st_uid != 0) {
        return gs_error_set(err, EPERM,
                            "'%s' is owned by uid %u, not root: another user could replace what "
                            "gsrun makes there; use a directory only root can write, such as %s",
                            path, (unsigned)st.st_uid, GS_ROOT_RUNDIR);
    }
    int others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (others_write && (is_base || (st.st_mode & S_ISVTX) == 0)) {
        return gs_error_set(err, EPERM,
                            "'%s' is writable by others (mode %o): any user could take the names "
                            "gsrun makes there; use a directory only root can write, such as %s",
                            path, (unsigned)(st.st_mode & 07777), GS_ROOT_RUNDIR);
    }
    return 0;
}

int gs_rundir_root_check_base(const char *base, int create, gs_error_t *err)
{
    char path[512];
    size_t n = strlen(base);
    int rc;

    if (base[0] != '/' || n >= sizeof(path)) {
        return gs_error_set(err, EINVAL, "run directory base '%s' must be an absolute path", base);
    }
    /* Every directory above the base first: if one of them were a user's,
     * that user could rename the base away and put another in its place. */
    snprintf(path, sizeof(path), "%s", base);
    for (size_t i = 1; i < n; i++) {
        if (path[i] == '/') {
            path[i] = '\0';
            rc = check_dir(path, 0, err);
            path[i] = '/';
            if (rc != 0) {
                return rc;
            }
        }
    }
    if (create && mkdir(base, 0755) != 0 && errno != EEXIST) {
        return gs_error_set(err, errno, "cannot create '%s': %s", base, strerror(errno));
    }
    return check_dir(base, 1, err);
}

int gs_rundir_root_name_ok(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;
    return n > 0 && n <= 64 && name[0] != '.' &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int join(const char *base, const char *name, char *out, size_t len, gs_error_t *err)
{
    if (!gs_rundir_root_name_ok(name)) {
        return gs_error_set(err, EINVAL, "'%s' is not usable as a directory name", name);
    }
    if ((size_t)snprintf(out, len, "%s/%s", base, name) >= len) {
        return gs_error_set(err, ENAMETOOLONG, "run directory base '%s' is too long", base);
    }
    return 0;
}

static int is_private_of(const struct stat *st, uid_t uid)
{
    return S_ISDIR(st->st_mode) && st->st_uid == uid && (st->st_mode & 077) == 0;
}

/* Makes the private dir under a name of its own and renames it into place
 * without replacing anything: others (root's hooks of the same job, at the
 * same moment) see either no dir or the finished one, never a dir of
 * root's that is not yet the user's (they took that for a dead job's and
 * removed it: two prologs of one job both failed, 1 run in 6). */
static int make_private(const char *base, const char *name, const char *out, uid_t uid, gid_t gid,
                        gs_error_t *err)
{
    char tmp[GS_PATH_MAX];
    int fd, e;

    snprintf(tmp, sizeof(tmp), "%s/" GS_RUNDIR_ROOT_NEW "%s.%d", base, name, (int)getpid());
    if (mkdir(tmp, 0700) != 0) {
        return gs_error_set(err, errno, "cannot create '%s': %s", tmp, strerror(errno));
    }
    fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, uid, gid) != 0 || fchmod(fd, 0700) != 0) {
        e = errno;
        if (fd >= 0) {
            close(fd);
        }
        rmdir(tmp);
        return gs_error_set(err, e, "cannot give '%s' to uid %u: %s", tmp, (unsigned)uid,
                            strerror(e));
    }
    close(fd);
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_NOREPLACE) != 0) {
        e = errno;
        rmdir(tmp);
        return e == EEXIST ? -EEXIST
                           : gs_error_set(err, e, "cannot create '%s': %s", out, strerror(e));
    }
    return 0;
}

int gs_rundir_root_make(const char *base, const char *name, uid_t uid, gid_t gid, char *out,
                        size_t len, int *kept, gs_error_t *err)
{
    struct stat st;
    int rc;

    *kept = 0;
    if ((rc = join(base, name, out, len, err)) != 0) {
        return rc;
    }
    if (lstat(out, &st) == 0) {
        if (is_private_of(&st, uid)) {
            *kept = 1;
            return 0;
        }
        /* Only root makes names here, and only finished ones: this is a dead
         * job's, or a job id reused for another user. Nothing in it is
         * followed; another remover at once is no failure. */
        if ((rc = gs_rundir_remove(out)) != 0 && rc != -ENOENT) {
            return gs_error_set(err, -rc, "cannot remove the old '%s': %s", out, strerror(-rc));
        }
    }
    rc = make_private(base, name, out, uid, gid, err);
    if (rc == -EEXIST) {
        /* Another of root's hooks for the same job made it meanwhile. */
        if (lstat(out, &st) == 0 && is_private_of(&st, uid)) {
            *kept = 1;
            return 0;
        }
        return gs_error_set(err, EEXIST,
                            "'%s' appeared meanwhile and is not a private directory of uid %u; "
                            "run the prolog again",
                            out, (unsigned)uid);
    }
    return rc;
}

int gs_rundir_root_find(const char *base, const char *name, uid_t uid, char *out, size_t len,
                        gs_error_t *err)
{
    struct stat st;
    int rc;

    if ((rc = join(base, name, out, len, err)) != 0) {
        return rc;
    }
    if (lstat(out, &st) != 0) {
        return errno == ENOENT ? -ENOENT
                               : gs_error_set(err, errno, "'%s': %s", out, strerror(errno));
    }
    if (!is_private_of(&st, uid)) {
        return gs_error_set(err, EPERM,
                            "'%s' is not a private directory of uid %u (owner %u, mode %o); it "
                            "was not made for this job's user",
                            out, (unsigned)uid, (unsigned)st.st_uid,
                            (unsigned)(st.st_mode & 07777));
    }
    return 0;
}

int gs_rundir_root_set_aside(const char *base, const char *name)
{
    char from[GS_PATH_MAX], to[GS_PATH_MAX];

    snprintf(from, sizeof(from), "%s/%s", base, name);
    snprintf(to, sizeof(to), "%s/" GS_RUNDIR_ROOT_TRASH "%s.%d", base, name, (int)getpid());
    return rename(from, to) == 0 ? 0 : -errno;
}

/* Whether a "<prefix><name>.<pid>" belongs to a process that is gone. */
static int orphaned(const char *entry)
{
    const char *dot = strrchr(entry, '.');
    char *end;
    long pid = dot != NULL ? strtol(dot + 1, &end, 10) : 0;
    return pid > 0 && *end == '\0' && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

void gs_rundir_root_sweep(const char *base)
{
    const size_t ntrash = strlen(GS_RUNDIR_ROOT_TRASH), nnew = strlen(GS_RUNDIR_ROOT_NEW),
                 nkeep = strlen(GS_RUNDIR_ROOT_KEEP);
    DIR *d = opendir(base);
    struct dirent *e;

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        char path[GS_PATH_MAX];
        int ours = strncmp(e->d_name, GS_RUNDIR_ROOT_TRASH, ntrash) == 0 ||
                   ((strncmp(e->d_name, GS_RUNDIR_ROOT_NEW, nnew) == 0 ||
                     strncmp(e->d_name, GS_RUNDIR_ROOT_KEEP, nkeep) == 0) &&
                    orphaned(e->d_name));
        if (ours && (size_t)snprintf(path, sizeof(path), "%s/%s", base, e->d_name) < sizeof(path)) {
            gs_rundir_remove(path);
        }
    }
    closedir(d);
}

int gs_rundir_root_owner(const char *base, const char *name, uid_t *uid, gid_t *gid)
{
    char path[600];
    struct stat st;
    gs_error_t ignored;

    if (join(base, name, path, sizeof(path), &ignored) != 0 || lstat(path, &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
        return -1;
    }
    *uid = st.st_uid;
    *gid = st.st_gid;
    return 0;
}
