/* SPDX-License-Identifier: BSD-3-Clause */
/* Error reporting for libgsrun.
 *
 * Functions that can fail return 0 or a negative errno and, when given a
 * gs_error_t, describe the failure in one line (what, why, and how to fix it).
 * Library code never prints: the front ends decide where the text goes. */
#ifndef GS_ERROR_H
#define GS_ERROR_H

#include <stddef.h>

#define GS_ERROR_LEN 512

typedef struct {
    char text[GS_ERROR_LEN];
} gs_error_t;

/* Formats the message into err (if not NULL) and returns -abs(code), so a
 * caller can write `return gs_error_set(err, -EINVAL, "...")`. */
int gs_error_set(gs_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Exit codes shared by gsrun, gsrun-shim and gsrun-agent (see gsrun(1)). */
enum {
    GS_EXIT_USAGE = 2,        /* a bad option or GSRUN_* value */
    GS_EXIT_UNAVAILABLE = 69, /* MPS was required but cannot serve this job */
    GS_EXIT_SETUP = 70,       /* MPS or the node agent failed to start */
    GS_EXIT_RUNDIR = 71,      /* the run directory is unsafe or unusable */
    GS_EXIT_FAULT_END = 75,   /* gsrun ended the job: a GPU fault ended a rank's
                               * context and the job still ran past
                               * --mps-fault-grace */
    GS_EXIT_NOEXEC = 126,     /* the launcher or program is not executable */
    GS_EXIT_NOTFOUND = 127,   /* the launcher or program was not found */
};

#endif
