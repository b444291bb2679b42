/* SPDX-License-Identifier: BSD-3-Clause */
/* The launchers gsrun runs, one row each: how each is recognised and
 * checked, which hook goes before every rank, and how its command is
 * built. gsrun.c asks the table and has no branch per launcher. */
#ifndef GS_LAUNCHERS_H
#define GS_LAUNCHERS_H

#include <stddef.h>

#include "runtime/core/gs_error.h"

typedef struct {
    const char *name; /* for messages */
    const char *hook; /* the helper program before each rank (gs_helper_path) */
    /* What may not carry a space in the hook's path, NULL: anything may. */
    const char *hook_no_spaces;
    /* gsrun's own node runs ranks: its agent starts before the launcher
     * (srun's tasks may not run on gsrun's node, a login node). */
    int early_agent;
    int (*is)(const char *launcher); /* NULL: the default (the last row) */
    /* A launcher the user named: is it one this row can drive? NULL: any. */
    int (*check)(const char *launcher, gs_error_t *err);
    /* Takes a user's own hook out of the arguments (it runs behind gsrun's),
     * 1 if there was one; NULL: none. */
    int (*take_user_hook)(char **args, int *nargs, char *hook, size_t len);
    char **(*command)(char *launcher, char *hook, char **args, int nargs);
    /* The job's rank count from the user's arguments, 0 unknown; NULL:
     * never known. */
    int (*count_ranks)(char **args, int nargs);
} gs_launcher_kind_t;

/* The row for the launcher at this path. */
const gs_launcher_kind_t *gs_launcher_kind(const char *launcher);

#endif
