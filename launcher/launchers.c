/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "launcher/launchers.h"

#include "launcher/mpirun_cmd.h"
#include "launcher/srun_cmd.h"

static char **srun_command(char *launcher, char *hook, char **args, int nargs)
{
    return gs_srun_command(launcher, hook, args, nargs);
}

static const gs_launcher_kind_t kinds[] = {
    {"srun", "gsrun-srun-task", NULL, 0, gs_srun_is, NULL, NULL, srun_command, NULL},
    /* Open MPI's mpirun: the default. Its fork agent parameter splits at
     * spaces; a user's own fork agent is chained behind the shim. */
    {"mpirun", "gsrun-shim", "Open MPI's fork agent parameter", 1, NULL, gs_mpirun_check,
     gs_mpirun_take_fork_agent, gs_mpirun_command, gs_mpirun_count_ranks},
};

const gs_launcher_kind_t *gs_launcher_kind(const char *launcher)
{
    size_t n = sizeof(kinds) / sizeof(kinds[0]);
    for (size_t i = 0; i + 1 < n; i++) {
        if (kinds[i].is(launcher)) {
            return &kinds[i];
        }
    }
    return &kinds[n - 1];
}
