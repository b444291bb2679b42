/* SPDX-License-Identifier: BSD-3-Clause */
/* A user's private base in a shared directory (/tmp, TMPDIR): the guessable
 * names another user may take first (gsrun-<uid>, .1 to .16), and the one
 * nobody can (gsrun-<uid>.x<random>), found again by its owner. */
#include "gs_autoconf.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/files/rundir.h"

int gs_rundir_user_base(const char *dir, char *out, size_t len, gs_error_t *err)
{
    int rc;
    if (dir == NULL) {
        const char *root = gs_rundir_default_root();
        if ((rc = gs_rundir_check_parent(root, err)) != 0) {
            return rc;
        }
        snprintf(out, len, "%s/gsrun-%u", root, (unsigned)getuid());
    } else {
        char parent[512];
        const char *slash = strrchr(dir, '/');
        if ((size_t)snprintf(out, len, "%s", dir) >= len || slash == NULL ||
            (size_t)(slash - dir) >= sizeof(parent)) {
            return gs_error_set(err, ENAMETOOLONG, "--dir '%s' is not usable", dir);
        }
        snprintf(parent, sizeof(parent), "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
        if ((rc = gs_rundir_check_parent(parent, err)) != 0) {
            return rc;
        }
    }
    /* Made by us, or refused: a directory another user made first under
     * this guessable name is never used. */
    return gs_rundir_ensure(out, err);
}

int gs_rundir_base_name(const char *dir, int k, char *out, size_t len, gs_error_t *err)
{
    if ((size_t)(k == 0 ? snprintf(out, len, "%s", dir) : snprintf(out, len, "%s.%d", dir, k)) >=
        len) {
        return gs_error_set(err, ENAMETOOLONG, "'%s' is too long for a run directory", dir);
    }
    return 0;
}

/* The user's private dirs "<dir>.x" + 6 characters in dir's parent (made
 * by mkdtemp where another user holds all of dir, dir.1 ... dir.N): the
 * first in name order, so that every job of the user meets in the same one
 * whatever names others plant. 0 with it in out, or -ENOENT. */
static int find_unguessed(const char *dir, char *out, size_t len)
{
    char parent[512], prefix[128], best[128] = "", path[1024];
    const char *slash = strrchr(dir, '/');
    if (slash == NULL || (size_t)(slash - dir) >= sizeof(parent) ||
        (size_t)snprintf(prefix, sizeof(prefix), "%s.x", slash + 1) >= sizeof(prefix)) {
        return -ENOENT;
    }
    snprintf(parent, sizeof(parent), "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
    DIR *d = opendir(parent);
    size_t plen = strlen(prefix);
    struct dirent *e;
    if (d == NULL) {
        return -ENOENT;
    }
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) != plen + 6 ||
            (best[0] != '\0' && strcmp(e->d_name, best) >= 0)) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
            (st.st_mode & 077) == 0) {
            snprintf(best, sizeof(best), "%s", e->d_name);
        }
    }
    closedir(d);
    if (best[0] == '\0' || (size_t)snprintf(out, len, "%s/%s", parent, best) >= len) {
        return -ENOENT;
    }
    return 0;
}

int gs_rundir_user_base_find(const char *dir, char *out, size_t len)
{
    char name[512];
    gs_error_t err;
    for (int k = 0; k <= GS_RUNDIR_BASE_TRIES; k++) {
        struct stat st;
        if (gs_rundir_base_name(dir, k, name, sizeof(name), &err) != 0) {
            return -ENAMETOOLONG;
        }
        if (lstat(name, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
            (st.st_mode & 077) == 0) {
            return (size_t)snprintf(out, len, "%s", name) < len ? 0 : -ENAMETOOLONG;
        }
    }
    return find_unguessed(dir, out, len);
}

int gs_rundir_user_base_any(const char *dir, char *out, size_t len, char *taken,
                            size_t taken_len, gs_error_t *err)
{
    char name[512];
    int rc = 0;
    taken[0] = '\0';
    /* A name of ours that exists wins over making one: where another user
     * took dir first, the user's jobs went to dir.k, and the next ones
     * must find them there (their shared MPS, their placement record)
     * even once dir is free again. */
    for (int k = 0; k <= GS_RUNDIR_BASE_TRIES; k++) {
        struct stat st;
        if (gs_rundir_base_name(dir, k, name, sizeof(name), err) != 0) {
            break;
        }
        if (lstat(name, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
            (st.st_mode & 077) == 0 && gs_rundir_user_base(name, out, len, err) == 0) {
            if (k > 0) {
                snprintf(taken, taken_len, "'%s' was taken when the user's first job here ran",
                         dir);
            }
            return 0;
        }
    }
    if (find_unguessed(dir, name, sizeof(name)) == 0 &&
        gs_rundir_user_base(name, out, len, err) == 0) {
        snprintf(taken, taken_len, "'%s' and its %d next names were taken by other users",
                 dir, GS_RUNDIR_BASE_TRIES);
        return 0;
    }
    for (int k = 0; k <= GS_RUNDIR_BASE_TRIES; k++) {
        if ((rc = gs_rundir_base_name(dir, k, name, sizeof(name), err)) != 0) {
            return rc;
        }
        /* A name another user removes between our mkdir (EEXIST) and our
         * look at it (ENOENT) is tried again, a few times. */
        for (int again = 0; again < 4; again++) {
            rc = gs_rundir_user_base(name, out, len, err);
            if (rc != -ENOENT) {
                break;
            }
        }
        if (rc != -EPERM && rc != -ENOTDIR && rc != -ENOENT) {
            return rc; /* ours, or a failure another name would not cure */
        }
        if (k == 0) {
            snprintf(taken, taken_len, "%s", err->text);
        }
    }
    /* Every name another user can guess is taken: one nobody can take
     * first (mkdtemp), found again by its owner. The user's jobs that start
     * at once make it one at a time, under a flock of the directory it is
     * made in (another user who holds that flock costs 1 s; then jobs
     * making one at the same moment each take the first in name order,
     * and the others, empty, are removed). */
    char made[600], parent[512];
    const char *slash = strrchr(dir, '/');
    int lk = -1;
    if (slash != NULL && (size_t)(slash - dir) < sizeof(parent)) {
        snprintf(parent, sizeof(parent), "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
        lk = gs_rundir_lock_wait(parent, 1000);
    }
    int rc2 = find_unguessed(dir, name, sizeof(name)); /* made while we waited */
    if (rc2 != 0 && (size_t)snprintf(made, sizeof(made), "%s.xXXXXXX", dir) < sizeof(made) &&
        mkdtemp(made) != NULL) {
        rc2 = find_unguessed(dir, name, sizeof(name));
        if (rc2 != 0 || strcmp(name, made) != 0) {
            rmdir(made);
        }
    }
    if (lk >= 0) {
        close(lk);
    }
    if (rc2 == 0 && gs_rundir_user_base(name, out, len, err) == 0) {
        snprintf(taken + strlen(taken), taken_len - strlen(taken),
                 ", and so are %s.1 to %s.%d (taken by other users): the user's jobs meet in %s",
                 dir, dir, GS_RUNDIR_BASE_TRIES, out);
        return 0;
    }
    return gs_error_set(err, EPERM,
                        "%s, and so are %s.1 to %s.%d (taken by other users)", taken, dir, dir,
                        GS_RUNDIR_BASE_TRIES);
}
