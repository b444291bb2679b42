/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/unixsock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/core/proc.h"

int gs_unixsock_path_fits(const char *path)
{
    struct sockaddr_un addr;
    return strlen(path) < sizeof(addr.sun_path);
}

static int address(const char *path, struct sockaddr_un *addr, gs_error_t *err)
{
    if (!gs_unixsock_path_fits(path)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "socket path '%s' is too long for a unix socket (108 bytes); set "
                            "TMPDIR to a shorter directory",
                            path);
    }
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    snprintf(addr->sun_path, sizeof(addr->sun_path), "%s", path);
    return 0;
}

int gs_unixsock_listen(const char *path, gs_error_t *err)
{
    struct sockaddr_un addr;
    int rc = address(path, &addr, err), fd;
    if (rc != 0) {
        return rc;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return gs_error_set(err, errno, "socket: %s", strerror(errno));
    }
    unlink(path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return gs_error_set(err, e, "cannot listen on '%s': %s", path, strerror(e));
    }
    return fd;
}

int gs_unixsock_connect(const char *path, gs_error_t *err)
{
    struct sockaddr_un addr;
    int rc = address(path, &addr, err), fd;
    if (rc != 0) {
        return rc;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return gs_error_set(err, errno, "socket: %s", strerror(errno));
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        int e = errno;
        close(fd);
        return gs_error_set(err, e, "cannot connect to '%s': %s", path, strerror(e));
    }
    return fd;
}

pid_t gs_unixsock_peer(int fd)
{
    struct ucred cr;
    socklen_t n = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) == 0 ? cr.pid : 0;
}

long gs_unixsock_ask(const char *path, const char *line, char *reply, size_t len,
                     long long deadline_ms, gs_error_t *err)
{
    int fd = gs_unixsock_connect(path, err);
    if (fd < 0) {
        return fd;
    }
    size_t n = strlen(line);
    long got = send(fd, line, n, MSG_NOSIGNAL) == (ssize_t)n
                   ? gs_proc_read_line(fd, reply, len, deadline_ms)
                   : -EPIPE;
    close(fd);
    return got;
}
