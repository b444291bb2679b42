/* SPDX-License-Identifier: BSD-3-Clause */
/* Unix stream sockets, the one way the agent and the front ends meet. */
#ifndef GS_UNIXSOCK_H
#define GS_UNIXSOCK_H

#include <stddef.h>

#include <sys/types.h>

#include "runtime/core/gs_error.h"

/* Listens at path (a leftover socket there is replaced), non-blocking,
 * close-on-exec. The fd, or a negative errno with err naming the path. */
int gs_unixsock_listen(const char *path, gs_error_t *err);
/* Connects to path, close-on-exec. The fd, or a negative errno. */
int gs_unixsock_connect(const char *path, gs_error_t *err);
/* The process that listens at the other end of connected socket fd
 * (SO_PEERCRED: the one that called listen()), or 0. */
pid_t gs_unixsock_peer(int fd);
/* One request: connects to path, sends line (MSG_NOSIGNAL: a peer that
 * closes at once must not kill the caller), reads one line of answer into
 * reply until deadline_ms (gs_proc_now_ms). The answer's length, or a
 * negative errno (err set when the connection failed). */
long gs_unixsock_ask(const char *path, const char *line, char *reply, size_t len,
                     long long deadline_ms, gs_error_t *err);
/* Whether path fits a unix socket address. */
int gs_unixsock_path_fits(const char *path);

#endif
