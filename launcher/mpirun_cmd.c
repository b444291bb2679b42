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

/* How many values an mpirun option takes, for reading past it to the
 * program: 0 a flag, -1 an option not known here. */
static int values_of(const char *opt)
{
    static const char *const one[] = {
        "-np", "-n", "-c", "--np", "--n", "-x", "--map-by", "-map-by", "--bind-to", "-bind-to",
        "--rank-by", "-rank-by", "-H", "-host", "--host", "-hostfile", "--hostfile",
        "-machinefile", "--machinefile", "-wdir", "--wdir", "-wd", "--prefix", "--npernode",
        "-npernode", "--tmpdir", "--output-filename", "-output-filename", "--cpus-per-proc",
        "--cpus-per-rank", NULL};
    static const char *const two[] = {"--mca", "-mca", "--gmca", "-gmca", NULL};
    static const char *const flags[] = {
        "--oversubscribe", "-oversubscribe", "--report-bindings", "-report-bindings",
        "--allow-run-as-root", "--tag-output", "-tag-output", "--timestamp-output", "-q",
        "--quiet", "-v", "--verbose", "--display-map", "--noprefix", "--merge-stderr-to-stdout",
        "--use-hwthread-cpus", NULL};
    for (const char *const *p = one; *p != NULL; p++) {
        if (strcmp(opt, *p) == 0) {
            return 1;
        }
    }
    for (const char *const *p = two; *p != NULL; p++) {
        if (strcmp(opt, *p) == 0) {
            return 2;
        }
    }
    for (const char *const *p = flags; *p != NULL; p++) {
        if (strcmp(opt, *p) == 0) {
            return 0;
        }
    }
    return -1;
}

int gs_mpirun_count_ranks(char **args, int nargs)
{
    long total = 0, ctx = -1;
    int in_program = 0;
    for (int i = 0; i <= nargs; i++) {
        if (i == nargs || strcmp(args[i], ":") == 0) {
            if (ctx <= 0) {
                return 0; /* a context without its count */
            }
            total += ctx;
            ctx = -1;
            in_program = 0;
            continue;
        }
        if (in_program) {
            continue; /* the program's own arguments */
        }
        if (args[i][0] != '-') {
            in_program = 1;
            continue;
        }
        int v = values_of(args[i]);
        if (v < 0 || i + v >= nargs) {
            return 0;
        }
        if (strcmp(args[i], "-np") == 0 || strcmp(args[i], "-n") == 0 ||
            strcmp(args[i], "-c") == 0 || strcmp(args[i], "--np") == 0 ||
            strcmp(args[i], "--n") == 0) {
            char *end;
            long n = strtol(args[i + 1], &end, 10);
            if (*end != '\0' || n < 1 || n > 1 << 24) {
                return 0;
            }
            ctx = n;
        }
        i += v;
    }
    return total > 1 << 24 ? 0 : (int)total;
}

/* mpirun --mca orte_fork_agent <shim> --mca odls_base_exec_agent <shim>
 * -x ... <the user's arguments>. */
/* The variables every rank gets (-x NAME each) into cmd at n; the new n. */
static int put_exports(char **cmd, int n)
{
    /* Besides the settings for the ranks (the table's GS_FRONT_RANKS rows):
     * the job's own variables. */
    static const char *const job_vars[] = {"GSRUN_JOB_DIR", "GSRUN_PID", "GSRUN_NODE_ID",
                                           "GSRUN_T0", NULL};
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
    return n;
}

char **gs_mpirun_command(char *launcher, char *shim, char **args, int nargs)
{
    /* The launcher, 2 fork agent parameters, and per app context PMIx's
     * variable, the exported ones and the user's fork agent: fewer than 64
     * words a context besides the arguments. */
    int contexts = 1;
    for (int i = 0; i < nargs; i++) {
        contexts += strcmp(args[i], ":") == 0;
    }
    char **cmd = calloc((size_t)nargs + 64 * (size_t)contexts, sizeof(*cmd));
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
    /* -x is each app context's own (mpirun -np 2 a : -np 3 b): every
     * context gets them, or the second's ranks failed in MPI_Init ("getting
     * local rank failed": PMIx's store shared with the shim's client). */
    n = put_exports(cmd, n);
    for (int i = 0; i < nargs; i++) {
        cmd[n++] = args[i];
        if (strcmp(args[i], ":") == 0) {
            n = put_exports(cmd, n);
        }
    }
    cmd[n] = NULL;
    return cmd;
}
