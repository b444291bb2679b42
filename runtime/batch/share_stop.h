/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun stop`: ends the user's shared MPS agent on this node (the node
 * service of --mps-share=node, runtime/service/agent_share.c) through its
 * socket, and prints what it says. */
#ifndef GS_SHARE_STOP_H
#define GS_SHARE_STOP_H

#include <stdio.h>

#include "runtime/core/gs_error.h"

/* now: its servers stop at once (a job that holds them is told they are
 * gone); else it takes no new lease and ends once the jobs that hold its
 * servers have ended (a wait as long as theirs). Its lines go to out,
 * cleaned. 0 once it has ended; 1 when none runs (err says where none
 * was); -errno with err when it could not be told (stopped, not
 * answering). */
int gs_share_stop(int now, FILE *out, gs_error_t *err);

#endif
