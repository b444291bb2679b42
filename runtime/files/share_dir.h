/* SPDX-License-Identifier: BSD-3-Clause */
/* The user's shared MPS on this node (--mps-share=node), as jobs and
 * `gsrun stop` find it: its directory (<user's base>/mps-share/<node>), its
 * socket, and what its lock says of the agent that holds it. The shared
 * agent holds an flock on the directory while it runs; while it ends (its
 * socket gone, its servers stopping) it says so in a file, so that a job
 * then waits a second for it, not --mps-timeout. */
#ifndef GS_SHARE_DIR_H
#define GS_SHARE_DIR_H

#include <stddef.h>
#include <sys/types.h>

#include "runtime/core/gs_error.h"

/* The file in its directory that names an agent that is ending. */
#define GS_SHARE_ENDING_FILE "ending"

/* Its parent dir (dir), its directory (node_dir) and its socket (sock, NULL:
 * not wanted): 0, or -errno with err (a socket too long for its address:
 * -ENAMETOOLONG). The user's base is made when missing only if make (a job
 * that only asks whether one runs leaves nothing in TMPDIR); without it,
 * -ENOENT when the user has no base. taken (NULL: not wanted) gets why the
 * user's base is not <TMPDIR>/gsrun-<uid> ("" when it is; make only). */
int gs_share_dir_find(int make, char *dir, size_t dlen, char *node_dir, size_t nlen, char *sock,
                      size_t slen, char *taken, size_t tlen, gs_error_t *err);

/* Whether an agent holds node_dir's lock now (1), or none does (0). */
int gs_share_dir_held(const char *node_dir);

/* The ending agent's mark, written once its socket is gone: this process. */
void gs_share_dir_mark_ending(const char *node_dir);
void gs_share_dir_unmark(const char *node_dir);

/* The PID of the agent that marked node_dir as ending, if it still runs;
 * else 0. */
pid_t gs_share_dir_ending(const char *node_dir);

#endif
