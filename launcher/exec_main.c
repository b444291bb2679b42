/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun exec [options] [--] program [args]: the rank prefix.
 *
 * Put in front of the program under any launcher (mpiexec -n 16 gsrun exec
 * ./app, srun gsrun exec ./app, mpirun ... ): each rank works out its job's
 * key on its node (runtime/rank/jobkey.c), makes or finds the job's directory in
 * the user's private base, and becomes gsrun-shim, which joins the node
 * (local rank 0 starts the node agent and MPS), sets the client
 * environment and execs the program with its PID, stdio and exit status.
 * The agent ends MPS when the node's last rank exits or the launcher's
 * process on the node dies, and removes the job's directory. */
#include "gs_autoconf.h"

#include "launcher/exec_main.h"
#include "launcher/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmix/discover.h"
#include "runtime/rank/helper.h"
#include "runtime/core/config.h"
#include "runtime/core/gs_error.h"
#include "runtime/rank/jobkey.h"
#include "runtime/rank/program.h"
#include "runtime/batch/provision.h"
#include "runtime/files/rundir.h"
#include "runtime/core/limits.h"

static const char usage_head[] =
    "usage: gsrun exec [options] [--] program [args]\n"
    "\n"
    "The rank prefix: put it in front of the program under a launcher that gsrun\n"
    "does not start, e.g.  mpiexec -n 16 gsrun exec ./app  or  srun gsrun exec ./app.\n"
    "Each node's first rank starts the node agent and one MPS server per GPU; the\n"
    "other ranks wait for it. Under --mps-share=node (the default outside a Slurm\n"
    "job step) the servers are the user's, shared with the user's other jobs on the\n"
    "node, and stay up --mps-linger seconds (60) after the last of them (gsrun stop\n"
    "ends them); under --mps-share=job they are the job's own and quit when the\n"
    "node's last rank exits (or the launcher does).\n"
    "\n"
    "Options (each also as its variable; the option wins):\n";

static const char usage_tail[] =
    "  -h, --help                 show this help and exit\n"
    "  --                         end of the options\n"
    "\n"
    "Each rank's place on its node comes from PMIx or the launcher's variables\n"
    "(Open MPI, Slurm, Hydra/Intel MPI, MVAPICH, Cray PALS, IBM jsrun; Flux's\n"
    "local rank with GSRUN_LOCAL_SIZE), or from GSRUN_LOCAL_RANK and\n"
    "GSRUN_LOCAL_SIZE set for each rank; GSRUN_JOB_KEY may name the job when\n"
    "its ranks on a node have no common parent process. Run outside a launcher,\n"
    "without them, it exits 2. See doc/launchers.md and gsrun(1).\n";

/* Local rank 0 (or an unknown rank) says what concerns the whole node. */
static int speaks_for_node(void)
{
    gs_local_t loc;
    return gs_discover_from_env(&loc, NULL) != 0 || loc.local_rank == 0;
}

static int run_plain(char **prog)
{
    int e = gs_program_exec(prog);
    fprintf(stderr, "gsrun exec: cannot run '%s': %s\n", prog[0], strerror(e));
    return e == ENOENT ? GS_EXIT_NOTFOUND : GS_EXIT_NOEXEC;
}

static int parse(int argc, char **argv, gs_config_t *cfg, int *first, gs_error_t *err)
{
    int i = 1;
    while (i < argc) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_head, stdout);
            gs_usage_exec_options(stdout);
            fputs(usage_tail, stdout);
            exit(0);
        }
        if (strcmp(a, "--verbose") == 0) {
            cfg->verbose += cfg->verbose < 9;
            i++;
            continue;
        }
        if (a[0] == '-' && a[1] == 'v' && strspn(a + 1, "v") == strlen(a + 1)) {
            cfg->verbose += (int)strlen(a + 1);
            cfg->verbose = cfg->verbose > 9 ? 9 : cfg->verbose;
            i++;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            break; /* the program */
        }
        char name[64];
        const char *eq = strchr(a + 2, '=');
        size_t n = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), a + 2);
        /* gsrun's valued settings, but the launcher: there is none here. */
        const gs_config_key_t *k = gs_config_key(name);
        if (k == NULL || n >= sizeof(name) || !(k->fronts & GS_FRONT_GSRUN) || !k->valued ||
            strcmp(name, "launcher") == 0) {
            return gs_error_set(err, EINVAL,
                                "unknown option '%s' (see gsrun exec --help)",
                                a);
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        char origin[80];
        snprintf(origin, sizeof(origin), "--%s", name);
        if (value == NULL) {
            return gs_error_set(err, EINVAL, "--%s: missing value (see gsrun exec --help)", name);
        }
        if (gs_config_set(cfg, name, value, origin, err) != 0) {
            return -EINVAL;
        }
        i++;
    }
    *first = i;
    if (i >= argc) {
        return gs_error_set(err, EINVAL, "no program given (see gsrun exec --help)");
    }
    return 0;
}

int gs_exec_main(int argc, char **argv)
{
    gs_config_t cfg;
    gs_error_t err;
    char key[512], name[160], shim[GS_PATH_MAX];
    const char *source = NULL;
    int first = 0;

    gs_config_init(&cfg);
    if (gs_config_load_env(&cfg, &err) != 0 || parse(argc, argv, &cfg, &first, &err) != 0) {
        fprintf(stderr, "gsrun exec: %s\n", err.text);
        return GS_EXIT_USAGE;
    }
    char **prog = argv + first;
    /* Already a rank of a gsrun job (its shim ran): nothing to add. */
    if (getenv("GSRUN_MPS_ACTIVE") != NULL) {
        return run_plain(prog);
    }
    if (cfg.mps == GS_MPS_OFF) {
        return run_plain(prog);
    }
    /* Outside any launcher (no launcher variable, no PMIx server) there is
     * no node to join: a usage error, said before anything starts, not an
     * MPS that failed to start. */
    gs_local_t loc;
    if (gs_discover_from_env(&loc, &err) != 0 && getenv("PMIX_NAMESPACE") == NULL &&
        getenv("PMIX_SERVER_URI41") == NULL && getenv("PMIX_SERVER_URI4") == NULL &&
        getenv("PMIX_SERVER_URI3") == NULL && getenv("PMIX_SERVER_URI2") == NULL) {
        fprintf(stderr, "gsrun exec: %s (gsrun exec goes in front of the program under a "
                        "launcher: see gsrun exec --help)\n",
                err.text);
        return GS_EXIT_USAGE;
    }
    /* The user's private base in this node's TMPDIR (as gsrun's own job
     * dirs): the shim's node leader chooses it (another user may have
     * taken the name), the other ranks find it (gs_provision_exec_job_dir). */
    char want[300];
    snprintf(want, sizeof(want), "%s/gsrun-%u", gs_rundir_tmpdir(), (unsigned)getuid());
    if (gs_jobkey_get(key, sizeof(key), &source) != 0) {
        snprintf(err.text, sizeof(err.text),
                 "cannot name this job: no launcher variable "
                 "names it and /proc/<parent>/stat cannot be read; set GSRUN_JOB_KEY");
        if (cfg.mps == GS_MPS_ON) {
            fprintf(stderr, "gsrun exec: error: %s\n", err.text);
            return GS_EXIT_RUNDIR;
        }
        if (speaks_for_node()) {
            fprintf(stderr, "gsrun exec: warning: %s; running without MPS\n", err.text);
        }
        return run_plain(prog);
    }
    gs_jobkey_dir_name(key, name, sizeof(name));
    if (cfg.verbose && speaks_for_node()) {
        fprintf(stderr, "gsrun exec: job key %s (from %s), run dir %s/%s or a private base beside "
                        "it\n",
                key, source, want, name);
    }
    /* The shim reads its settings and the job dir from the environment, as
     * under gsrun; nothing of an outer gsrun's may leak in. */
    if (gs_config_export_env(&cfg, &err) != 0 || setenv("GSRUN_EXEC_BASE", want, 1) != 0 ||
        setenv("GSRUN_EXEC_JOB", name, 1) != 0 || unsetenv("GSRUN_JOB_DIR") != 0 ||
        gs_helper_path("gsrun-shim", shim, sizeof(shim), &err) != 0) {
        fprintf(stderr, "gsrun exec: error: %s\n", err.text);
        return GS_EXIT_SETUP;
    }
    /* The shim's PMIx client and the program's must not share PMIx's
     * shared-memory store (MPI_Init then fails: seen with srun --mpi=pmix,
     * as gsrun's own -x PMIX_MCA_gds=hash avoids under mpirun). */
    setenv("PMIX_MCA_gds", "hash", 0);
    unsetenv("GSRUN_NODE_ID");
    unsetenv("GSRUN_PID");
    unsetenv("GSRUN_EARLY_AGENT");
    unsetenv("GSRUN_T0");
    unsetenv("GSRUN_FORK_AGENT");
    char **args = calloc((size_t)(argc - first) + 3, sizeof(*args));
    if (args == NULL) {
        fprintf(stderr, "gsrun exec: out of memory\n");
        return GS_EXIT_SETUP;
    }
    args[0] = shim;
    args[1] = "--";
    for (int i = first; i < argc; i++) {
        args[2 + i - first] = argv[i];
    }
    execv(shim, args);
    fprintf(stderr, "gsrun exec: cannot run %s: %s\n", shim, strerror(errno));
    return GS_EXIT_SETUP;
}
