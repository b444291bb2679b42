/* SPDX-License-Identifier: BSD-3-Clause */
/* Open MPI's mpirun under gsrun: the command that puts gsrun-shim in front
 * of every rank (its fork agent parameters), a fork agent of the user's own
 * chained behind it, and the check that an explicitly given launcher is
 * Open MPI's. */
#include "gs_autoconf.h"

#include "launcher/mpirun_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/config.h"
#include "runtime/core/limits.h"
#include "runtime/core/proc.h"

/* The parameter that puts a program in front of every rank: Open MPI 4
 * (ORTE) and Open MPI 5 (PRRTE) each ignore the other's name, so gsrun sets
 * both and never needs the launcher's version. */
static const char *const fork_agent_params[] = {"orte_fork_agent", "odls_base_exec_agent", NULL};

/* Open MPI joins repeated --mca values with commas, so a fork agent of the
 * user's own is taken out of the arguments and chained behind the shim. */
int gs_mpirun_take_fork_agent(char **args, int *nargs, char *agent, size_t len)
{
    static const char *const envs[] = {"OMPI_MCA_orte_fork_agent", "OMPI_MCA_odls_base_exec_agent",
                                       "PRTE_MCA_odls_base_exec_agent", NULL};
    for (int i = 0; i + 2 < *nargs; i++) {
        int is_mca = strcmp(args[i], "--mca") == 0 || strcmp(args[i], "-mca") == 0 ||
                     strcmp(args[i], "--prtemca") == 0;
        for (const char *const *p = fork_agent_params; is_mca && *p != NULL; p++) {
            if (strcmp(args[i + 1], *p) == 0) {
                snprintf(agent, len, "%s", args[i + 2]);
                memmove(&args[i], &args[i + 3], (size_t)(*nargs - i - 3 + 1) * sizeof(*args));
                *nargs -= 3;
                return 1;
            }
        }
    }
    for (const char *const *e = envs; *e != NULL; e++) {
        const char *v = getenv(*e);
        if (v != NULL && *v != '\0') {
            snprintf(agent, len, "%s", v); /* the command line's value wins over it */
            return 1;
        }
    }
    return 0;
}

/* A launcher given explicitly must be Open MPI's mpirun: gsrun relies on its
 * fork agent parameter. Its --version is asked (bounded to 10 s). */
int gs_mpirun_check(const char *launcher, gs_error_t *err)
{
    int p[2];
    char out[512] = "";
    pid_t pid;

    if (pipe2(p, O_CLOEXEC) != 0) {
        return gs_error_set(err, errno, "pipe: %s", strerror(errno));
    }
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        execl(launcher, launcher, "--version", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return gs_error_set(err, errno, "fork: %s", strerror(errno));
    }
    gs_proc_read_all(p[0], out, sizeof(out), gs_proc_now_ms() + GS_WAIT_VERSION_MS);
    close(p[0]);
    if (gs_proc_wait(pid, GS_WAIT_CHILD_EXIT_MS, NULL) != 0) {
        gs_proc_stop_child(pid, 100, NULL);
    }
    if (strstr(out, "Open MPI") == NULL && strstr(out, "OpenRTE") == NULL) {
        char first[120];
        snprintf(first, sizeof(first), "%.*s", (int)strcspn(out, "\n"), out);
        /* MPICH's Hydra, Intel MPI, MVAPICH ...: no fork agent to put the
         * shim in, and gsrun never parses a launcher's arguments. */
        return gs_error_set(err, EINVAL,
                            "'%s' is not Open MPI's mpirun (its --version says '%s'); gsrun "
                            "wraps only Open MPI's mpirun and srun: with this launcher put the "
                            "rank prefix in front of the program instead, '%s <its arguments> "
                            "gsrun exec <program>' (doc/launchers.md)",
                            launcher, first, launcher);
    }
    return 0;
}

/* mpirun --mca orte_fork_agent <shim> --mca odls_base_exec_agent <shim>
 * -x ... <the user's arguments>. */
char **gs_mpirun_command(char *launcher, char *shim, char **args, int nargs)
{
    /* Besides the settings for the ranks (the table's GS_FRONT_RANKS rows):
     * the job's own variables. */
    static const char *const job_vars[] = {"GSRUN_JOB_DIR", "GSRUN_PID", "GSRUN_NODE_ID",
                                           "GSRUN_T0", NULL};
    /* The launcher, 2 fork agent parameters, PMIx, the exported variables
     * and the user's fork agent: fewer than 64 words besides the arguments. */
    char **cmd = calloc((size_t)nargs + 64, sizeof(*cmd));
    int n = 0;

    if (cmd == NULL) {
        return NULL;
    }
    cmd[n++] = launcher;
    for (const char *const *p = fork_agent_params; *p != NULL; p++) {
        cmd[n++] = "--mca";
        cmd[n++] = (char *)*p;
        cmd[n++] = shim;
    }
    /* The shim's PMIx client and the program's must not share PMIx's
     * shared-memory store (seen with PMIx 4.2: MPI_Init then fails). */
    cmd[n++] = "-x";
    cmd[n++] = "PMIX_MCA_gds=hash";
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        if (k->fronts & GS_FRONT_RANKS) {
            cmd[n++] = "-x";
            cmd[n++] = (char *)k->env;
        }
    }
    for (const char *const *e = job_vars; *e != NULL; e++) {
        cmd[n++] = "-x";
        cmd[n++] = (char *)*e;
    }
    if (getenv("GSRUN_FORK_AGENT") != NULL) {
        cmd[n++] = "-x";
        cmd[n++] = "GSRUN_FORK_AGENT";
    }
    for (int i = 0; i < nargs; i++) {
        cmd[n++] = args[i];
    }
    cmd[n] = NULL;
    return cmd;
}
