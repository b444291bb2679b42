/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun-shim: runs in front of every rank (Open MPI's fork agent).
 *
 *   gsrun-shim [--] program [args]
 *
 * Finds the rank's place on its node, joins the node (the node leader starts
 * the node agent), sets the MPS client environment and execs the program
 * with its arguments unchanged, so the rank's PID, stdio and exit status are
 * the program's own. */
#include "gs_autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmix/discover.h"
#include "runtime/batch/provision.h"
#include "runtime/rank/clientenv.h"
#include "runtime/core/config.h"
#include "runtime/rank/node.h"
#include "runtime/rank/program.h"
#include "runtime/files/rundir.h"
#include "runtime/rank/task.h"

/* A failure of the whole node (the agent's state says so, or it could not
 * start): the leader reports it and exits with its status; the other ranks
 * exit 0 without running the program. mpirun then ends the job with the
 * leader's status. Failing every rank at once would be no clearer, and
 * Open MPI 4.1 mpirun can hang when dozens of ranks exit non-zero together
 * before MPI_Init (seen with 32 and more ranks on a 2-core machine). */
static int fail_node(int leader, int code, const char *node, const char *msg)
{
    if (leader) {
        fprintf(stderr, "gsrun: node %s: error: %s\n", node, msg);
        return code;
    }
    return 0;
}

/* A failure of this rank alone. */
static int fail_rank(int rank, int code, const char *node, const char *msg)
{
    fprintf(stderr, "gsrun: node %s: local rank %d: error: %s\n", node, rank, msg);
    return code;
}

/* Open MPI 4's mpirun status for a rank its daemon could not start. */
#define GS_EXIT_ORTE_NOSTART 131

/* Splits a fork agent value at spaces, as Open MPI does. */
static int split_words(char *s, char **out, int max)
{
    int n = 0;
    for (char *save = NULL, *w = strtok_r(s, " ", &save); w != NULL && n < max;
         w = strtok_r(NULL, " ", &save)) {
        out[n++] = w;
    }
    return n;
}

/* Execs the program (through the user's own fork agent, chain, if any)
 * with its arguments unchanged; returns only on failure. */
static int exec_program(char **argv, int argc, int first, char *chain, const char *node)
{
    char **exec_argv = argv + first;
    char *words[64 + 1024];
    if (chain[0] != '\0') {
        /* The user's own fork agent runs between us and the program. */
        int n = split_words(chain, words, 64);
        int m = 0;
        for (int i = first; i < argc && m < 1023; i++) {
            words[n + m++] = argv[i];
        }
        words[n + m] = NULL;
        exec_argv = words;
    }
    int e = gs_program_exec(exec_argv);
    /* Open MPI also runs a bare program name found in the working
     * directory; so must the rank it hands to us. */
    if (e == ENOENT && strchr(exec_argv[0], '/') == NULL && access(exec_argv[0], X_OK) == 0) {
        char local[GS_PATH_MAX];
        snprintf(local, sizeof(local), "./%s", exec_argv[0]);
        execv(local, exec_argv);
        e = errno;
    }
    fprintf(stderr, "gsrun: node %s: cannot run '%s': %s\n", node, exec_argv[0], strerror(e));
    /* Where Open MPI 4's daemon (orted) would have started the rank, the
     * job ends as it ends for a rank orted cannot start (a directory, a
     * file the kernel cannot run): mpirun's 131, as without gsrun. */
    if (getenv("OMPI_MCA_orte_local_daemon_uri") != NULL) {
        return GS_EXIT_ORTE_NOSTART;
    }
    return e == ENOENT ? GS_EXIT_NOTFOUND : GS_EXIT_NOEXEC;
}

int main(int argc, char **argv)
{
    gs_config_t cfg;
    gs_error_t err;
    gs_local_t loc;
    static gs_state_t st;
    gs_clientenv_t env;
    char node[64], chain[GS_PATH_MAX] = "";
    const char *job_dir = getenv("GSRUN_JOB_DIR");
    int first = 1, keep_fd = -1, leader;

    if (argc > 1 && strcmp(argv[1], "--") == 0) {
        first = 2;
    }
    if (first >= argc) {
        fprintf(stderr, "gsrun-shim: no program given; gsrun-shim is started by gsrun\n");
        return GS_EXIT_USAGE;
    }
    gs_rundir_node_name(node, sizeof(node));
    gs_config_init(&cfg);
    if (gs_config_load_env(&cfg, &err) != 0) {
        fprintf(stderr, "gsrun-shim: %s\n", err.text);
        return GS_EXIT_USAGE;
    }
    /* Read before the client environment is applied: that removes every
     * GSRUN_* variable, so that the program does not see them. */
    if (getenv("GSRUN_FORK_AGENT") != NULL) {
        snprintf(chain, sizeof(chain), "%s", getenv("GSRUN_FORK_AGENT"));
    }
    const char *exec_base = getenv("GSRUN_EXEC_BASE"), *exec_job = getenv("GSRUN_EXEC_JOB");
    if ((job_dir == NULL || job_dir[0] != '/') && (exec_base == NULL || exec_job == NULL)) {
        fprintf(stderr, "gsrun-shim: GSRUN_JOB_DIR is not set; gsrun-shim is started by gsrun, "
                        "not on its own\n");
        return GS_EXIT_USAGE;
    }
    int drc = gs_discover(&loc, &err);
    if (drc != 0) {
        fprintf(stderr, "gsrun: node %s: error: %s\n", node, err.text);
        return drc == -EINVAL && gs_discover_check_env(NULL) != 0 ? GS_EXIT_USAGE : GS_EXIT_SETUP;
    }
    leader = loc.local_rank == 0;
    if (job_dir == NULL || job_dir[0] != '/') {
        /* gsrun exec: the node's ranks agree on the job dir. */
        static char agreed[GS_PATH_MAX];
        char taken[GS_ERROR_LEN];
        if (gs_provision_exec_job_dir(exec_base, exec_job, leader, cfg.timeout_s * 1000, agreed,
                                      sizeof(agreed), taken, sizeof(taken), &err) != 0) {
            char why[GS_ERROR_LEN + 96];
            snprintf(why, sizeof(why), "%s; give the job a private TMPDIR (the base is "
                     "$TMPDIR/gsrun-<uid>)", err.text);
            if (cfg.mps == GS_MPS_ON) {
                return fail_node(leader, GS_EXIT_RUNDIR, node, why);
            }
            if (leader) {
                fprintf(stderr, "gsrun exec: warning: %s; running without MPS\n", why);
            }
            unsetenv("GSRUN_EXEC_BASE");
            unsetenv("GSRUN_EXEC_JOB");
            return exec_program(argv, argc, first, chain, node);
        }
        if (taken[0] != '\0' && leader) {
            fprintf(stderr, "gsrun exec: warning: %s; using %.*s instead\n", taken,
                    (int)(strrchr(agreed, '/') - agreed), agreed);
        }
        job_dir = agreed;
    }
    gs_task_rank_t rank = {.cfg = &cfg,
                           .job_dir = job_dir,
                           .local_rank = loc.local_rank,
                           .local_size = loc.local_size,
                           .launcher_pid = getppid(),
                           .program = argv[first]};
    int node_wide, code = gs_task_run_rank(&rank, &st, &env, &keep_fd, &node_wide, &err);
    if (code != 0) {
        return node_wide ? fail_node(leader, code, node, err.text)
                         : fail_rank(loc.local_rank, code, node, err.text);
    }
    if (leader) {
        gs_node_print_plan(stderr, node, &st, loc.source, cfg.verbose);
        if (env.uncoupled && cfg.verbose) {
            fprintf(stderr,
                    "gsrun: node %s: '%s' links no MPI library: each rank's share is 100 %% "
                    "(--mps-percentage sets another)\n",
                    node, argv[first]);
        }
    }
    if (gs_clientenv_apply(&env, &err) != 0) {
        return fail_rank(loc.local_rank, GS_EXIT_SETUP, node, err.text);
    }

    return exec_program(argv, argc, first, chain, node);
}
