/* SPDX-License-Identifier: BSD-3-Clause */
/* Unix stream sockets, the one way the agent and the front ends meet. */
#ifndef GS_UNIXSOCK_H
#define GS_UNIXSOCK_H

#include "runtime/core/gs_error.h"

/* Listens at path (a leftover socket there is replaced), non-blocking,
 * close-on-exec. The fd, or a negative errno with err naming the path. */
int gs_unixsock_listen(const char *path, gs_error_t *err);
/* Connects to path, close-on-exec. The fd, or a negative errno. */
int gs_unixsock_connect(const char *path, gs_error_t *err);
/* Whether path fits a unix socket address. */
int gs_unixsock_path_fits(const char *path);

#endif
