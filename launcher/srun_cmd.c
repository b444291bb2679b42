/* SPDX-License-Identifier: BSD-3-Clause */
/* Slurm's srun under gsrun: gsrun-srun-task as the step's task prolog. */
#include "gs_autoconf.h"

#include "launcher/srun_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/limits.h"

/* Whether the launcher is Slurm's srun (by its name). */
int gs_srun_is(const char *launcher)
{
    const char *base = strrchr(launcher, '/');
    return strcmp(base != NULL ? base + 1 : launcher, "srun") == 0;
}

/* srun --task-prolog=<gsrun-srun-task> <the user's arguments>: srun passes
 * gsrun's environment (GSRUN_*) on to the tasks. A task prolog the user set
 * in SLURM_TASK_PROLOG runs from ours; one given as --task-prolog in the
 * arguments replaces ours (srun takes the last; documented: gsrun does not
 * parse srun's arguments to find it). */
char **gs_srun_command(char *launcher, const char *prolog, char **args, int nargs)
{
    static char opt[GS_PATH_MAX];
    char **cmd = calloc((size_t)nargs + 3, sizeof(*cmd));
    const char *user = getenv("SLURM_TASK_PROLOG");
    int n = 0;

    if (cmd == NULL) {
        return NULL;
    }
    if (user != NULL && *user != '\0') {
        setenv("GSRUN_TASK_PROLOG", user, 1);
    }
    snprintf(opt, sizeof(opt), "--task-prolog=%s", prolog);
    cmd[n++] = launcher;
    cmd[n++] = opt;
    for (int i = 0; i < nargs; i++) {
        cmd[n++] = args[i];
    }
    cmd[n] = NULL;
    return cmd;
}
