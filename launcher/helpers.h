/* Locating gsrun's helper programs (gsrun-shim, gsrun-agent). */
#ifndef GS_HELPERS_H
#define GS_HELPERS_H

#include <stddef.h>

#include "gs_error.h"

/* Finds helper `name` beside the running executable (a build tree, or a
 * relocated install), else in the configured pkglibexecdir. */
int gs_helper_path(const char *name, char *out, size_t len, gs_error_t *err);

#endif
