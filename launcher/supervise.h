/* SPDX-License-Identifier: BSD-3-Clause */
/* Running the launcher: as gsrun's child, forwarding the signals sent to
 * gsrun, and exiting as it did. */
#ifndef GS_SUPERVISE_H
#define GS_SUPERVISE_H

#include "runtime/core/gs_error.h"

/* Execs the launcher; returns gsrun's status for the failure (reported). */
int gs_exec_launcher(const char *launcher, char **argv);

/* Runs the launcher as our child (it dies with gsrun: parent-death signal)
 * and waits for it, forwarding the signals sent to gsrun. Returns its wait
 * status, or -errno when it could not be started (err says why). */
int gs_supervise(const char *launcher, char **cmd, gs_error_t *err);

/* Exits as the launcher did: its status, or death by its signal. */
int gs_exit_like(int status);

#endif
