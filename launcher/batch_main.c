/* gsrun prolog | epilog | task-prolog: MPS for a whole batch job, for sites
 * that provision nodes in the batch system's prolog (doc/slurm.md).
 *
 *   gsrun prolog [--job ID] [--user USER] [--dir DIR] [options]
 *       as root (a Slurm Prolog) or as the job's user: starts the job's node
 *       agent as that user, MPS on every GPU the job may use; idempotent.
 *   gsrun epilog [--job ID] [--dir DIR] [-v]
 *       stops it and removes its dirs; nothing to stop is success.
 *   gsrun task-prolog [--job ID] [--dir DIR] [options]
 *       in each task (a Slurm TaskProlog): prints the task's "export" lines.
 * The job id defaults to SLURM_JOB_ID (PBS_JOBID elsewhere), the user to
 * SLURM_JOB_USER, the dir to /tmp (the same for all three: TMPDIR differs
 * between a prolog and the job). All logic is in runtime/provision.c. */
#include "gs_autoconf.h"

#include "batch_main.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "discover.h"
#include "helpers.h"
#include "provision.h"
#include "rundir.h"

typedef struct {
    const char *cmd;
    const char *job;
    const char *user;
    const char *dir;
    gs_config_t cfg;
} batch_opts_t;

static const char usage[] =
    "Usage: gsrun prolog [--job ID] [--user USER] [--dir DIR] [gsrun options]\n"
    "       gsrun epilog [--job ID] [--dir DIR] [-v]\n"
    "       gsrun task-prolog [--job ID] [--dir DIR] [gsrun options]\n"
    "MPS for a whole batch job: the prolog starts it on this node, each task's\n"
    "task prolog prints its environment, the epilog stops it. --job defaults to\n"
    "SLURM_JOB_ID (or PBS_JOBID), --user to SLURM_JOB_USER, --dir to /tmp.\n"
    "Exit status: 0 provisioned (or MPS not needed: the job runs without), 2 bad\n"
    "option, 69 MPS required (--mps=on) but unavailable, 70 MPS failed to start,\n"
    "71 unsafe directory; epilog: 0 clean, 70 could not stop the agent. See gsrun(1).\n";

int gs_batch_is_command(const char *word)
{
    return strcmp(word, "prolog") == 0 || strcmp(word, "epilog") == 0 ||
           strcmp(word, "task-prolog") == 0;
}

static int parse(int argc, char **argv, batch_opts_t *o, gs_error_t *err)
{
    static const char *const cfg_opts[] = {"mps", "mps-percentage", "mps-control", "mps-timeout",
                                            "mps-memory-limit", NULL};
    memset(o, 0, sizeof(*o));
    o->cmd = argv[0];
    o->job = getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : getenv("PBS_JOBID");
    o->user = getenv("SLURM_JOB_USER");
    o->dir = "/tmp";
    gs_config_init(&o->cfg);
    if (gs_config_load_env(&o->cfg, err) != 0) {
        return -EINVAL;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        int known = 0;
        if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->cfg.verbose++;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0 || val == NULL) {
            return gs_error_set(err, EINVAL, "%s: unexpected argument '%s' (see gsrun %s --help)",
                                o->cmd, a, o->cmd);
        }
        const char *name = a + 2;
        n -= 2;
        if (n == 3 && strncmp(name, "job", 3) == 0) {
            o->job = val, known = 1;
        } else if (n == 4 && strncmp(name, "user", 4) == 0) {
            o->user = val, known = 1;
        } else if (n == 3 && strncmp(name, "dir", 3) == 0) {
            o->dir = val, known = 1;
        }
        for (const char *const *c = cfg_opts; !known && *c != NULL; c++) {
            if (strlen(*c) == n && strncmp(name, *c, n) == 0) {
                char origin[64];
                snprintf(origin, sizeof(origin), "--%s", *c);
                if (gs_config_set(&o->cfg, *c, val, origin, err) != 0) {
                    return -EINVAL;
                }
                known = 1;
            }
        }
        if (!known) {
            return gs_error_set(err, EINVAL, "%s: unknown option '%.*s' (see gsrun %s --help)",
                                o->cmd, (int)(n + 2), a, o->cmd);
        }
        if (eq == NULL) {
            i++;
        }
    }
    if (o->dir[0] != '/') {
        return gs_error_set(err, EINVAL, "--dir must be an absolute path, not '%s'", o->dir);
    }
    return 0;
}

/* A prolog runs as root: the agent and MPS run as the job's user. */
static int become_user(const char *user, gs_error_t *err)
{
    if (geteuid() != 0) {
        return 0;
    }
    struct passwd *pw = user != NULL && *user != '\0' ? getpwnam(user) : NULL;
    if (pw == NULL) {
        return gs_error_set(err, EINVAL,
                            "prolog: run as root, it needs the job's user: give --user (Slurm "
                            "sets SLURM_JOB_USER); '%s' is not a user here",
                            user ? user : "");
    }
    if (initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 ||
        setuid(pw->pw_uid) != 0) {
        return gs_error_set(err, errno, "prolog: cannot become user %s: %s", pw->pw_name,
                            strerror(errno));
    }
    setenv("HOME", pw->pw_dir, 1);
    return 0;
}

static int prolog(batch_opts_t *o, const char *job_dir)
{
    static gs_state_t st;
    gs_error_t err;
    char agent[4096], node[64];
    int already, code;

    gs_rundir_node_name(node, sizeof(node));
    if (o->cfg.mps == GS_MPS_OFF) {
        return 0;
    }
    if (become_user(o->user, &err) != 0) {
        fprintf(stderr, "gsrun: %s\n", err.text);
        return GS_EXIT_USAGE;
    }
    if (gs_helper_path("gsrun-agent", agent, sizeof(agent), &err) != 0) {
        fprintf(stderr, "gsrun: %s\n", err.text);
        return GS_EXIT_SETUP;
    }
    code = gs_provision_start(&o->cfg, job_dir, agent, &st, &already, &err);
    if (code != 0) {
        fprintf(stderr, "gsrun: node %s: job %s: error: %s\n", node, o->job, err.text);
        return code;
    }
    if (st.kind == GS_STATE_OFF) {
        fprintf(stderr, "gsrun: node %s: job %s: %s\n", node, o->job, st.message);
    } else if (o->cfg.verbose) {
        for (int g = 0; g < st.ngpus; g++) {
            fprintf(stderr, "gsrun: node %s: job %s: MPS on %s (pipe dir %s)%s\n", node, o->job,
                    st.gpu[g].uuid, st.gpu[g].pipe_dir, already ? ", already running" : "");
        }
    }
    return 0;
}

static int task_prolog(batch_opts_t *o, const char *job_dir)
{
    gs_local_t loc;
    gs_clientenv_t env;
    gs_error_t err;
    int on;

    /* Slurm runs the TaskProlog for the batch script too, which is no task
     * of a step (no SLURM_STEP_ID): its steps' tasks must not inherit MPS
     * settings from it. */
    if (o->cfg.mps == GS_MPS_OFF || (getenv("SLURM_JOB_ID") && !getenv("SLURM_STEP_ID"))) {
        return 0;
    }
    if (gs_discover_from_env(&loc, &err) != 0) {
        fprintf(stderr, "gsrun: task-prolog: %s\n", err.text);
        return GS_EXIT_SETUP;
    }
    if (gs_provision_task_env(&o->cfg, job_dir, loc.local_rank, loc.local_size, &env, &on,
                              &err) != 0) {
        fprintf(stderr, "gsrun: task-prolog: %s\n", err.text);
        return o->cfg.mps == GS_MPS_ON ? GS_EXIT_UNAVAILABLE : 0;
    }
    for (int i = 0; on && i < env.nunset; i++) {
        printf("unset %s\n", env.unset[i]);
    }
    for (int i = 0; on && i < env.nset; i++) {
        printf("export %s\n", env.set[i]);
    }
    return fflush(stdout) == 0 ? 0 : GS_EXIT_SETUP;
}

int gs_batch_main(int argc, char **argv)
{
    batch_opts_t o;
    gs_error_t err;
    char job_dir[512];

    if (parse(argc, argv, &o, &err) != 0) {
        fprintf(stderr, "gsrun: %s\n", err.text);
        return GS_EXIT_USAGE;
    }
    if (gs_provision_job_dir(o.dir, o.job, job_dir, sizeof(job_dir), &err) != 0) {
        fprintf(stderr, "gsrun: %s: %s\n", o.cmd, err.text);
        return GS_EXIT_USAGE;
    }
    if (strcmp(o.cmd, "prolog") == 0) {
        return prolog(&o, job_dir);
    }
    if (strcmp(o.cmd, "task-prolog") == 0) {
        return task_prolog(&o, job_dir);
    }
    if (gs_provision_stop(job_dir, stderr, o.cfg.verbose, &err) != 0) {
        fprintf(stderr, "gsrun: epilog: job %s: %s\n", o.job, err.text);
        return GS_EXIT_SETUP;
    }
    return 0;
}
