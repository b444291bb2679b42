/* SPDX-License-Identifier: BSD-3-Clause */
/* Where gsrun's helper programs are (gsrun-shim, gsrun-agent,
 * gsrun-srun-task): each program finds the others through this. */
#ifndef GS_HELPER_H
#define GS_HELPER_H

#include <stddef.h>

#include "runtime/core/gs_error.h"

/* Finds helper `name` beside the running executable (a build tree, or a
 * relocated install), else in the configured pkglibexecdir. */
int gs_helper_path(const char *name, char *out, size_t len, gs_error_t *err);

#endif
