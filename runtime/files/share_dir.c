/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/share_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/wire/protocol.h"

int gs_share_dir_find(int make, char *dir, size_t dlen, char *node_dir, size_t nlen, char *sock,
                      size_t slen, char *taken, size_t tlen, gs_error_t *err)
{
    char stem[300], base[512], node[64], unused[512];
    if (taken == NULL) {
        taken = unused, tlen = sizeof(unused);
    }
    taken[0] = '\0';
    snprintf(stem, sizeof(stem), "%s/gsrun-%u", gs_rundir_tmpdir(), (unsigned)getuid());
    if (make) {
        int rc = gs_rundir_user_base_any(stem, base, sizeof(base), taken, tlen, err);
        if (rc != 0) {
            return rc;
        }
    } else if (gs_rundir_user_base_find(stem, base, sizeof(base)) != 0) {
        return gs_error_set(err, ENOENT, "no base of the user's at %s", stem);
    }
    gs_rundir_node_name(node, sizeof(node));
    if ((size_t)snprintf(dir, dlen, "%s/%s", base, GS_PROTO_SHARE_DIR) >= dlen ||
        (size_t)snprintf(node_dir, nlen, "%s/%s", dir, node) >= nlen) {
        return gs_error_set(err, ENAMETOOLONG, "'%s' is too long for the shared MPS's dir", base);
    }
    if (sock != NULL) {
        int n = snprintf(sock, slen, "%s/%s", node_dir, GS_PROTO_SOCKET);
        if (n < 0 || (size_t)n >= slen || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
            return gs_error_set(err, ENAMETOOLONG, "'%s/%s' is too long for a socket; set "
                                "TMPDIR to a shorter directory", node_dir, GS_PROTO_SOCKET);
        }
    }
    return 0;
}

int gs_share_dir_held(const char *node_dir)
{
    int fd = open(node_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return 0; /* no dir: nobody holds it */
    }
    /* Taken and let go at once: an agent that starts in this instant fails
     * on its lock as if another ran, and its job tries again. */
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* lets go of it, if taken */
    return held;
}

void gs_share_dir_mark_ending(const char *node_dir)
{
    char path[GS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/" GS_SHARE_ENDING_FILE, node_dir);
    FILE *f = fopen(path, "we");
    if (f != NULL) {
        fprintf(f, "%d\n", (int)getpid()); /* only a job's wait is lost without it */
        fclose(f);
    }
}

void gs_share_dir_unmark(const char *node_dir)
{
    char path[GS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/" GS_SHARE_ENDING_FILE, node_dir);
    unlink(path);
}

pid_t gs_share_dir_ending(const char *node_dir)
{
    char path[GS_PATH_MAX];
    int pid = 0;
    snprintf(path, sizeof(path), "%s/" GS_SHARE_ENDING_FILE, node_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return 0;
    }
    char buf[24];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    pid = atoi(buf);
    /* A mark an agent killed while ending left: its PID is gone. */
    return pid > 1 && gs_proc_alive(pid, -1) ? (pid_t)pid : 0;
}
