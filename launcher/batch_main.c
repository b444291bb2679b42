/* SPDX-License-Identifier: BSD-3-Clause */
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
 * SLURM_JOB_USER. The job's dir is "job-<id>" in a base no other user can
 * write: as root GS_ROOT_RUNDIR (/run/gsrun), where root makes it for the
 * job's user; as a user /dev/shm/gsrun-<uid> (/tmp where /dev/shm is not
 * usable), the user's own (--dir names another base; the same for all
 * three commands). Root does in the user's
 * dir only what the user could: whatever is inside is handled by a child
 * that has become the user. All logic is in runtime/batch/provision.c. */
#include "gs_autoconf.h"

#include "launcher/batch_main.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmix/discover.h"
#include "runtime/batch/endjob.h"
#include "runtime/rank/helper.h"
#include "runtime/batch/keeper.h"
#include "runtime/core/config.h"
#include "runtime/core/proc.h"
#include "runtime/wire/protocol.h"
#include "runtime/batch/provision.h"
#include "runtime/files/rundir.h"
#include "runtime/files/rundir_root.h"
#include "runtime/core/limits.h"
#include "runtime/core/text.h"

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
    "SLURM_JOB_ID (or PBS_JOBID), --user to SLURM_JOB_USER. --dir is the base of\n"
    "the job's dir: as root one only root can write (default " GS_ROOT_RUNDIR "),\n"
    "as a user a private one of the user's (default /dev/shm/gsrun-<uid>, or\n"
    "/tmp/gsrun-<uid> where /dev/shm is not usable).\n"
    "Exit status: 0 provisioned (or MPS not needed or not possible under auto: the\n"
    "job runs without), 2 bad option, 69 MPS required (--mps=on) but unavailable,\n"
    "70 MPS failed to start, 71 no usable directory (--mps=on); epilog: 0 (as root\n"
    "also when the agent did not stop cleanly: a warning), 70 a user's epilog could\n"
    "not stop the agent. See gsrun(1).\n";

static int parse(int argc, char **argv, batch_opts_t *o, gs_error_t *err)
{
    memset(o, 0, sizeof(*o));
    o->cmd = argv[0];
    o->job = getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : getenv("PBS_JOBID");
    o->user = getenv("SLURM_JOB_USER");
    o->dir = NULL; /* the default base, by who runs it */
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
        char shown[128];
        if (strncmp(a, "--", 2) != 0 || val == NULL) {
            return gs_error_set(err, EINVAL, "%s: unexpected argument '%s' (see gsrun %s --help)",
                                o->cmd, gs_text_printable(a, shown, sizeof(shown)), o->cmd);
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
        for (const gs_config_key_t *k = gs_config_keys; !known && k->option != NULL; k++) {
            if ((k->fronts & GS_FRONT_BATCH) && strlen(k->option) == n &&
                strncmp(name, k->option, n) == 0) {
                char origin[64];
                snprintf(origin, sizeof(origin), "--%s", k->option);
                if (gs_config_set(&o->cfg, k->option, val, origin, err) != 0) {
                    return -EINVAL;
                }
                known = 1;
            }
        }
        if (!known) {
            char opt[128];
            snprintf(opt, sizeof(opt), "%.*s", (int)(n + 2), a);
            return gs_error_set(err, EINVAL, "%s: unknown option '%s' (see gsrun %s --help)",
                                o->cmd, gs_text_printable(opt, shown, sizeof(shown)), o->cmd);
        }
        if (eq == NULL) {
            i++;
        }
    }
    return o->dir != NULL ? gs_provision_dir_ok(o->dir, err) : 0;
}

/* A part of root's work done as the job's user, in a child (root's part in
 * a user's dir is done with the user's rights only: nothing the user put
 * there can make root follow, open or remove anything else). */
typedef struct {
    uid_t uid;
    gid_t gid;
    const char *name; /* for its groups and login basics; NULL: no groups */
    const char *home, *shell;
    int (*fn)(batch_opts_t *, const char *);
    batch_opts_t *o;
    const char *job_dir;
} user_part_t;

/* Runs in the child: becomes the user, then does the part. */
static int run_user_part(void *arg)
{
    const user_part_t *u = arg;
    int ok = u->name != NULL ? initgroups(u->name, u->gid) == 0 : setgroups(0, NULL) == 0;
    if (!ok || setgid(u->gid) != 0 || setuid(u->uid) != 0) {
        fprintf(stderr, "gsrun: %s: cannot become uid %u: %s\n", u->o->cmd, (unsigned)u->uid,
                strerror(errno));
        return GS_EXIT_SETUP;
    }
    if (u->name != NULL) {
        /* The job's agent starts from here: nothing of root's environment
         * but what it needs, and the user's own basics. (Not getpwnam
         * again: u->name may point into its static record, which it
         * rewrites line by line while it searches: it found root.) */
        if (gs_provision_user_env(u->name, u->home, u->shell) != 0) {
            fprintf(stderr, "gsrun: %s: cannot set the job's environment: %s\n", u->o->cmd,
                    strerror(errno));
            return GS_EXIT_SETUP;
        }
    }
    int code = u->fn(u->o, u->job_dir);
    fflush(NULL);
    return code;
}

/* fn(o, job_dir) as uid:gid without supplementary groups, waited for.
 * Returns fn's exit code, or GS_EXIT_SETUP if the child could not run or
 * did not end within timeout_ms. */
static int as_user(uid_t uid, gid_t gid, int (*fn)(batch_opts_t *, const char *), batch_opts_t *o,
                   const char *job_dir, int timeout_ms)
{
    user_part_t u = {uid, gid, NULL, NULL, NULL, fn, o, job_dir};
    int status = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gsrun: %s: cannot fork: %s\n", o->cmd, strerror(errno));
        return GS_EXIT_SETUP;
    }
    if (pid == 0) {
        _exit(run_user_part(&u));
    }
    if (gs_proc_wait(pid, timeout_ms, &status) != 0) {
        fprintf(stderr, "gsrun: %s: job %s: the part run as uid %u did not end within %d s\n",
                o->cmd, o->job, (unsigned)uid, timeout_ms / 1000);
        gs_proc_stop_child(pid, 100, NULL);
        return GS_EXIT_SETUP;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : GS_EXIT_SETUP;
}

/* The job's user, for a prolog run as root. */
static struct passwd *job_user(const char *user)
{
    struct passwd *pw = user != NULL && *user != '\0' ? getpwnam(user) : NULL;
    if (pw == NULL) {
        fprintf(stderr,
                "gsrun: prolog: run as root, it needs the job's user: give --user (Slurm sets "
                "SLURM_JOB_USER); '%s' is not a user here\n",
                user ? user : "");
    }
    return pw;
}

/* The prolog's work, as the job's user: the agent and MPS run as that user. */
static int provision(batch_opts_t *o, const char *job_dir)
{
    static gs_state_t st;
    gs_error_t err;
    char agent[GS_PATH_MAX], node[64];
    int already, code;

    gs_rundir_node_name(node, sizeof(node));
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
        for (int g = 0; g < st.nservers; g++) {
            fprintf(stderr, "gsrun: node %s: job %s: MPS on %s (pipe dir %s)%s\n", node, o->job,
                    st.server[g].uuid, st.server[g].pipe_dir, already ? ", already running" : "");
        }
    }
    return 0;
}

/* A problem with the place for the job's dir: under auto the job runs
 * without MPS (a prolog that fails drains the node), under on it fails. */
static int unusable_dir(batch_opts_t *o, const gs_error_t *err)
{
    char node[64];
    gs_rundir_node_name(node, sizeof(node));
    if (o->cfg.mps == GS_MPS_ON) {
        fprintf(stderr, "gsrun: node %s: job %s: error: %s\n", node, o->job, err->text);
        return GS_EXIT_RUNDIR;
    }
    fprintf(stderr, "gsrun: node %s: job %s: warning: %s; the job runs without MPS\n", node, o->job,
            err->text);
    return 0;
}

static int prolog(batch_opts_t *o, const char *name)
{
    char job_dir[600];
    gs_error_t err;

    if (o->cfg.mps == GS_MPS_OFF) {
        return 0;
    }
    if (geteuid() != 0) {
        /* Our own base: <root>/gsrun-<uid>, or if another user took that name
         * first, the first of .1 to .16 that is ours or can be made (the
         * task prolog and epilog look in the same order). */
        char own[GS_PATH_MAX], stem[64], taken[GS_LINE_MAX];
        const char *base = o->dir;
        if (base == NULL) {
            snprintf(stem, sizeof(stem), "%s/gsrun-%u", gs_rundir_default_root(),
                     (unsigned)getuid());
            if (gs_rundir_user_base_any(stem, own, sizeof(own), taken, sizeof(taken), &err) !=
                0) {
                /* The base is fixed (TMPDIR does not move it): --dir does. */
                size_t n = strlen(err.text);
                snprintf(err.text + n, sizeof(err.text) - n,
                         "; give the prolog, task prolog and epilog --dir DIR, a private "
                         "directory of yours");
                return unusable_dir(o, &err);
            }
            if (taken[0] != '\0') {
                fprintf(stderr, "gsrun: prolog: job %s: %s; using %s instead\n", o->job, taken,
                        own);
            }
            base = own;
        }
        if (gs_provision_make_dir(base, name, getuid(), getgid(), job_dir, sizeof(job_dir),
                                  &err) != 0) {
            return unusable_dir(o, &err);
        }
        return provision(o, job_dir);
    }
    struct passwd *pw = job_user(o->user);
    if (pw == NULL) {
        return GS_EXIT_USAGE;
    }
    const char *base = o->dir != NULL ? o->dir : GS_ROOT_RUNDIR;
    uid_t old_uid;
    gid_t old_gid;
    if (gs_rundir_root_owner(base, name, &old_uid, &old_gid) == 0 && old_uid != pw->pw_uid) {
        /* A dead job's dir under a reused id, for another user: what root
         * started for that job goes with it. */
        int left;
        gs_keeper_end(base, name, GS_WAIT_KEEPER_MS, &left);
    }
    if (gs_provision_make_dir(o->dir, name, pw->pw_uid, pw->pw_gid, job_dir, sizeof(job_dir),
                              &err) != 0) {
        return unusable_dir(o, &err);
    }
    gs_rundir_root_sweep(base);
    /* The user's part runs under a keeper of root's, so that root's epilog
     * can end whatever it starts, whatever the user does to it. */
    char user[256], home[GS_PATH_MAX], shell[GS_PATH_MAX];
    snprintf(user, sizeof(user), "%s", pw->pw_name);
    snprintf(home, sizeof(home), "%s", pw->pw_dir);
    snprintf(shell, sizeof(shell), "%s", pw->pw_shell);
    user_part_t u = {pw->pw_uid, pw->pw_gid, user, home, shell, provision, o, job_dir};
    gs_error_t warn;
    int code =
        gs_keeper_run(base, name, (o->cfg.timeout_s + 30) * 1000, run_user_part, &u, &err, &warn);
    if (code >= 0 && warn.text[0] != '\0') {
        fprintf(stderr, "gsrun: prolog: job %s: warning: %s\n", o->job, warn.text);
    }
    if (code < 0) {
        fprintf(stderr, "gsrun: prolog: job %s: %s\n", o->job, err.text);
        code = GS_EXIT_SETUP;
    }
    if (code != 0) {
        int left;
        gs_keeper_end(base, name, GS_WAIT_KEEPER_MS, &left);
        gs_rundir_remove(job_dir); /* the job will not run here: nothing of it stays */
    }
    return code;
}

/* The job's dir in one base: root's (made by a root prolog; *roots = 1) or
 * the caller's own private one. 1: found; 0: none; negative: a base or dir
 * that must not be used (err says why). */
static int find_in_base(const char *base, const char *name, char *job_dir, size_t len, int *roots,
                        gs_error_t *err)
{
    struct stat st;
    if (lstat(base, &st) != 0) {
        return errno == ENOENT ? 0 : gs_error_set(err, errno, "'%s': %s", base, strerror(errno));
    }
    int rc = st.st_uid == 0 ? gs_rundir_root_check_base(base, 0, err) : gs_rundir_ensure(base, err);
    if (rc == 0) {
        *roots = st.st_uid == 0;
        rc = gs_rundir_root_find(base, name, getuid(), job_dir, len, err);
    }
    return rc == -ENOENT ? 0 : rc == 0 ? 1 : rc;
}

/* The job's dir for a user's task prolog or epilog: made by root for us in
 * its base, or in our own base (--dir names the one base to look in). As
 * find_in_base. */
static int find_job_dir(batch_opts_t *o, const char *name, char *job_dir, size_t len, int *roots,
                        gs_error_t *err)
{
    char bases[3 + GS_RUNDIR_BASE_TRIES][64];
    int n = 0;

    if (o->dir != NULL) {
        return find_in_base(o->dir, name, job_dir, len, roots, err);
    }
    snprintf(bases[n++], sizeof(bases[0]), "%s", GS_ROOT_RUNDIR);
    /* Our own base, or the name the prolog took when another user had made
     * ours first (gs_rundir_user_base_any's order); another user's is
     * passed over, never used. */
    const char *root = gs_rundir_default_root();
    snprintf(bases[n++], sizeof(bases[0]), "%s/gsrun-%u", root, (unsigned)getuid());
    for (int k = 1; k <= GS_RUNDIR_BASE_TRIES; k++) {
        snprintf(bases[n++], sizeof(bases[0]), "%s/gsrun-%u.%d", root, (unsigned)getuid(), k);
    }
    char rb[512]; /* where other users took all of those: the base nobody could take first */
    if (gs_rundir_user_base_find(bases[1], rb, sizeof(rb)) == 0 && strlen(rb) < sizeof(bases[0])) {
        snprintf(bases[n++], sizeof(bases[0]), "%s", rb);
    }
    int first_rc = 0;
    gs_error_t first;
    for (int i = 0; i < n; i++) {
        int rc = find_in_base(bases[i], name, job_dir, len, roots, err);
        if (rc > 0 || (rc < 0 && i == 0)) {
            return rc; /* found; or root's base is unsafe */
        }
        if (rc < 0 && first_rc == 0) {
            first_rc = rc; /* our own name taken: said if nothing is found */
            first = *err;
        }
    }
    if (first_rc != 0) {
        *err = first;
    }
    return first_rc;
}

static int task_prolog(batch_opts_t *o, const char *name)
{
    gs_local_t loc;
    gs_clientenv_t env;
    gs_error_t err;
    char job_dir[600];
    int on, found, roots;

    /* Slurm runs the TaskProlog for the batch script too, which is no task
     * of a step (no SLURM_STEP_ID): its steps' tasks must not inherit MPS
     * settings from it. */
    if (o->cfg.mps == GS_MPS_OFF || (getenv("SLURM_JOB_ID") && !getenv("SLURM_STEP_ID"))) {
        return 0;
    }
    found = find_job_dir(o, name, job_dir, sizeof(job_dir), &roots, &err);
    if (found <= 0) {
        if (found < 0) {
            /* Not ours: never used. */
            fprintf(stderr, "gsrun: task-prolog: %s\n", err.text);
        }
        return found < 0 && o->cfg.mps == GS_MPS_ON ? GS_EXIT_RUNDIR : 0;
    }
    if (gs_discover_from_env(&loc, &err) != 0) {
        fprintf(stderr, "gsrun: task-prolog: %s\n", err.text);
        return GS_EXIT_SETUP;
    }
    if (gs_provision_task_env(&o->cfg, job_dir, loc.local_rank, loc.local_size, &env, &on, &err) !=
        0) {
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

/* The epilog's work in the job's dir, as its owner. */
static int stop_keep(batch_opts_t *o, const char *job_dir)
{
    gs_error_t err;
    if (gs_provision_stop(job_dir, stderr, o->cfg.verbose, 1, &err) != 0) {
        fprintf(stderr, "gsrun: epilog: job %s: %s\n", o->job, err.text);
        return GS_EXIT_SETUP;
    }
    return 0;
}

static int epilog(batch_opts_t *o, const char *name)
{
    char base[512], job_dir[600];
    gs_error_t err;
    uid_t uid;
    gid_t gid;
    int found;

    if (geteuid() != 0) {
        int roots;
        found = find_job_dir(o, name, job_dir, sizeof(job_dir), &roots, &err);
        if (found <= 0) {
            return 0; /* nothing of ours to stop */
        }
        /* A dir root made for us stays for root's epilog to remove. */
        snprintf(base, sizeof(base), "%.*s", (int)(strrchr(job_dir, '/') - job_dir), job_dir);
        if (gs_provision_stop(job_dir, stderr, o->cfg.verbose, roots, &err) != 0) {
            fprintf(stderr, "gsrun: epilog: job %s: %s\n", o->job, err.text);
            return GS_EXIT_SETUP;
        }
        if (o->dir == NULL && !roots) {
            rmdir(base); /* our own base, if nothing else is in it */
        }
        return 0;
    }
    snprintf(base, sizeof(base), "%s", o->dir ? o->dir : GS_ROOT_RUNDIR);
    if (access(base, F_OK) != 0 || gs_rundir_root_owner(base, name, &uid, &gid) != 0) {
        return 0; /* never provisioned here */
    }
    if (gs_rundir_root_check_base(base, 0, &err) != 0) {
        fprintf(stderr, "gsrun: epilog: job %s: %s\n", o->job, err.text);
        return GS_EXIT_RUNDIR;
    }
    snprintf(job_dir, sizeof(job_dir), "%s/%s", base, name);
    int code =
        uid == 0 ? stop_keep(o, job_dir)
                 : as_user(uid, gid, stop_keep, o, job_dir, GS_PROTO_QUIT_TIMEOUT_MS + 5000);
    /* The agent has stopped, or its time is up (a stuck agent, or whatever
     * the job's user put in the dir): root removes the dir, following no
     * link inside it, and the epilog succeeds. A failing epilog would
     * drain the node for what is at most that user's own leftover; the
     * batch system ends the job's processes itself. */
    if (code != 0) {
        fprintf(stderr,
                "gsrun: epilog: job %s: warning: the node agent did not stop cleanly; "
                "its directory is removed anyway\n",
                o->job);
    }
    /* Root ends what root started, found from root's side: the keeper's
     * whole tree (the agent, its daemons, whatever escaped their sessions),
     * then, for a prolog that ran without a keeper, every process of the
     * agent's sessions. */
    int left = 0;
    int kept = gs_keeper_end(base, name, GS_WAIT_KEEPER_MS, &left);
    int ended = gs_endjob_kill(NULL, job_dir, uid, GS_WAIT_ENDJOB_MS);
    if (kept > 0 || ended > 0) {
        int n = (kept > 0 ? kept : 0) + (ended > 0 ? ended : 0);
        fprintf(stderr, "gsrun: epilog: job %s: %d process%s of the job's agent ended by root\n",
                o->job, n, n == 1 ? "" : "es");
    }
    if (left > 0 || kept < 0 || ended < 0) {
        fprintf(stderr,
                "gsrun: epilog: job %s: warning: %d process%s of the job's agent still running "
                "after %d ms; see doc/security.md\n",
                o->job, left, left == 1 ? "" : "es", GS_WAIT_ENDJOB_MS);
    }
    int rc = gs_rundir_remove(job_dir);
    if (rc != 0) {
        /* Whatever the user left that cannot go now must not drain the node:
         * it leaves the job's name, and the next prolog here removes it. */
        int moved = gs_rundir_root_set_aside(base, name) == 0;
        fprintf(stderr, "gsrun: epilog: job %s: warning: cannot remove %s: %s; %s\n", o->job,
                job_dir, strerror(-rc),
                moved ? "moved aside for the next prolog to remove" : "left in place");
    }
    return 0;
}

int gs_batch_main(int argc, char **argv)
{
    batch_opts_t o;
    gs_error_t err;
    char name[80];

    if (parse(argc, argv, &o, &err) != 0) {
        fprintf(stderr, "gsrun: %s\n", err.text);
        return GS_EXIT_USAGE;
    }
    if (gs_provision_job_name(o.job, name, sizeof(name), &err) != 0) {
        fprintf(stderr, "gsrun: %s: %s\n", o.cmd, err.text);
        return GS_EXIT_USAGE;
    }
    if (strcmp(o.cmd, "prolog") == 0) {
        return prolog(&o, name);
    }
    if (strcmp(o.cmd, "task-prolog") == 0) {
        return task_prolog(&o, name);
    }
    return epilog(&o, name);
}
