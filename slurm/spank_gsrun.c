/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun_spank.so: automatic MPS for Slurm job steps, as a SPANK plugin. A
 * thin adapter over runtime/, like gsrun-shim and the Open MPI component:
 *
 *   init      (srun and slurmstepd): the admin's defaults from plugstack.conf
 *             (mps=, percentage=, control=, timeout=, memory_limit=,
 *             gpu_bind=, verbose=, agent=, rundir=) and the options srun
 *             --mps[=MODE] and --mps-percentage=N;
 *   init_post_opt (slurmstepd, as root, once per step and node): makes the
 *             step's run dir for the job's user in root's base (rundir=,
 *             default /run/gsrun), where no user can take its name first;
 *   task_init (each task's own process, as the job's user, just before it
 *             execs the program): joins the node for the task (the node's
 *             first task starts the node agent, which plans the node and
 *             starts MPS as that user) and puts the client environment into
 *             the task's;
 *   exit      (slurmstepd, after the step's tasks have ended): waits, bounded,
 *             until the agent has shut MPS down, then removes the step's dir.
 * The agent follows each task through a pidfd and slurmstepd through its
 * PID, so a killed task or step still ends MPS. Steps started by gsrun
 * (GSRUN_JOB_DIR in their environment), batch and extern steps are left
 * alone. */
#include "gs_autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "runtime/core/config.h"
#include "runtime/wire/protocol.h"
#include "runtime/batch/endjob.h"
#include "runtime/batch/provision.h"
#include "runtime/files/rundir.h"
#include "runtime/rank/task.h"
#include "runtime/core/limits.h"

#ifndef GS_PKGLIBEXECDIR
#define GS_PKGLIBEXECDIR "/usr/local/libexec/gsrun"
#endif

/* Only the SPANK symbols are exported; the runtime inside stays hidden. */
#pragma GCC visibility push(default)
SPANK_PLUGIN(gsrun, 1);
int slurm_spank_init(spank_t sp, int ac, char **av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av);
int slurm_spank_task_init(spank_t sp, int ac, char **av);
int slurm_spank_exit(spank_t sp, int ac, char **av);
#pragma GCC visibility pop

/* Settings: plugstack.conf's, then the user's options over them. A bad
 * value is kept as a message for the step's stderr: the step runs without
 * MPS, unless MPS was asked for (mps=on), when it fails. */
static gs_config_t cfg;
static char bad[GS_ERROR_LEN];
static int bad_code = GS_EXIT_USAGE; /* a task's status for bad under mps=on */
static char agent_path[GS_PATH_MAX] = GS_PKGLIBEXECDIR "/gsrun-agent";
static char rundir_base[512] = GS_ROOT_RUNDIR;
static char opt_mps[64], opt_pct[64];
static int opt_mps_set, opt_pct_set;
/* This step on this node (slurmstepd's copy, set in user_init). */
static int active;
static char job_dir[512], node_dir[600];

/* The first bad setting; err's text names where the value came from. */
static void note_bad(const gs_error_t *err)
{
    if (bad[0] == '\0') {
        snprintf(bad, sizeof(bad), "%s", err->text);
    }
}

/* plugstack.conf: "optional /path/gsrun_spank.so mps=auto percentage=auto". */
static void admin_defaults(int ac, char **av)
{
    gs_error_t err;

    for (int i = 0; i < ac; i++) {
        const char *eq = strchr(av[i], '=');
        size_t n = eq != NULL ? (size_t)(eq - av[i]) : strlen(av[i]);
        int known = 0;
        if (n == 5 && strncmp(av[i], "agent", 5) == 0 && eq != NULL) {
            snprintf(agent_path, sizeof(agent_path), "%s", eq + 1);
            continue;
        }
        if (n == 6 && strncmp(av[i], "rundir", 6) == 0 && eq != NULL && eq[1] == '/') {
            snprintf(rundir_base, sizeof(rundir_base), "%s", eq + 1);
            continue;
        }
        for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
            if (k->spank != NULL && strlen(k->spank) == n && strncmp(av[i], k->spank, n) == 0 &&
                eq != NULL) {
                known = 1;
                if (gs_config_set(&cfg, k->option, eq + 1, "gsrun_spank.so in plugstack.conf",
                                  &err) != 0) {
                    note_bad(&err);
                    if (strcmp(k->option, "mps") == 0) {
                        cfg.mps = GS_MPS_AUTO; /* meant on in some form: every step says why not */
                    }
                }
            }
        }
        if (!known && bad[0] == '\0') {
            char accepted[256] = "";
            for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
                if (k->spank != NULL) {
                    size_t l = strlen(accepted);
                    snprintf(accepted + l, sizeof(accepted) - l, "%s=, ", k->spank);
                }
            }
            snprintf(bad, sizeof(bad),
                     "gsrun_spank.so in plugstack.conf: unknown argument '%s'; accepted: %sagent=, "
                     "rundir=",
                     av[i], accepted);
        }
    }
}

static int cb_mps(int val, const char *arg, int remote)
{
    /* A bare --mps: srun passes no value, slurmstepd an empty one. */
    snprintf(opt_mps, sizeof(opt_mps), "%s", arg != NULL && *arg != '\0' ? arg : "auto");
    opt_mps_set = 1;
    return 0;
}

static int cb_pct(int val, const char *arg, int remote)
{
    snprintf(opt_pct, sizeof(opt_pct), "%s", arg != NULL ? arg : "");
    opt_pct_set = 1;
    return 0;
}

static struct spank_option spank_opts[] = {
    {"mps", "[auto|on|off]",
     "NVIDIA MPS for this step, set up by gsrun on every node: auto (the default of a "
     "bare --mps) where ranks share a GPU, on always (fail without), off never",
     2, 0, cb_mps},
    {"mps-percentage", "auto|off|N",
     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per task: auto is min(100, 200/n) for n tasks on a "
     "GPU, off leaves it unset, N from 1 to 100 (gsrun)",
     1, 1, cb_pct},
    SPANK_OPTIONS_TABLE_END};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    gs_config_init(&cfg);
    cfg.mps = GS_MPS_OFF; /* untouched unless the admin or the user asks */
    admin_defaults(ac, av);
    for (struct spank_option *o = spank_opts; o->name != NULL; o++) {
        if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
            slurm_error("gsrun: cannot register srun's --%s option", o->name);
        }
    }
    return 0;
}

/* The user's options over the admin's defaults. */
static void apply_options(void)
{
    gs_error_t err;
    if (opt_mps_set && gs_config_set(&cfg, "mps", opt_mps, "srun --mps", &err) != 0) {
        note_bad(&err);
        if (cfg.mps == GS_MPS_OFF) {
            cfg.mps = GS_MPS_AUTO; /* asked for, in some form: say why it is off */
        }
    }
    if (opt_pct_set &&
        gs_config_set(&cfg, "mps-percentage", opt_pct, "srun --mps-percentage", &err) != 0) {
        note_bad(&err);
    }
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    uint32_t job = 0, step = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    char mark[8], name[64];
    gs_error_t err;

    if (!spank_remote(sp)) {
        return 0;
    }
    apply_options();
    gs_config_share_in_step(&cfg); /* a step's tasks: auto is job (doc/tuning.md) */
    if (cfg.mps == GS_MPS_OFF ||
        spank_getenv(sp, "GSRUN_JOB_DIR", mark, sizeof(mark)) != ESPANK_ENV_NOEXIST ||
        spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || step >= SLURM_INTERACTIVE_STEP) {
        return 0;
    }
    active = 1;
    if (bad[0] != '\0') {
        return 0; /* every task says why (task_init) */
    }
    /* Made here, by root, for the job's user: a name built from job and
     * step ids must not be one that a user could have made first. */
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
        snprintf(bad, sizeof(bad), "cannot learn the job's user from Slurm");
        return 0;
    }
    if (gs_task_step_name(job, step, name, sizeof(name)) != 0 ||
        gs_provision_make_dir(rundir_base, name, uid, gid, job_dir, sizeof(job_dir), &err) != 0 ||
        gs_node_dir(job_dir, node_dir, sizeof(node_dir), &err) != 0) {
        note_bad(&err);
        bad_code = GS_EXIT_RUNDIR;
        job_dir[0] = node_dir[0] = '\0';
    }
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    uint32_t ntasks = 0;
    int task = -1, keep_fd = -1, node_wide;
    char node[64], **env = NULL;
    static gs_state_t st;
    gs_clientenv_t ce;
    gs_node_req_t req;
    gs_error_t err;

    if (!active || spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS) {
        return 0;
    }
    gs_rundir_node_name(node, sizeof(node));
    if (bad[0] != '\0') {
        /* The node's first task speaks for the node. */
        if (task == 0) {
            fprintf(stderr, "gsrun: node %s: %s: %s\n", node,
                    cfg.mps == GS_MPS_ON ? "error" : "warning", bad);
            if (cfg.mps != GS_MPS_ON) {
                fprintf(stderr, "gsrun: node %s: the step runs without MPS\n", node);
            }
        }
        if (cfg.mps == GS_MPS_ON) {
            _exit(bad_code);
        }
        return 0;
    }
    spank_get_item(sp, S_JOB_ENV, &env);
    memset(&req, 0, sizeof(req));
    req.cfg = &cfg;
    req.job_dir = job_dir;
    req.agent_path = task == 0 ? agent_path : NULL;
    req.local_rank = task;
    req.local_size = (int)ntasks;
    req.launcher_pid = getppid(); /* slurmstepd */
    req.agent_env = env;          /* the agent sees what the tasks see */
    int code = gs_task_join(&req, &st, &ce, &keep_fd, &node_wide, &err);
    if (code != 0) {
        /* A node-wide failure: the first task says it once; every task
         * ends with the same status, before the program runs. */
        if (!node_wide || task == 0) {
            fprintf(stderr, "gsrun: node %s: %serror: %s\n", node, node_wide ? "" : "task ",
                    err.text);
        }
        _exit(code);
    }
    if (keep_fd >= 0) {
        fprintf(stderr, "gsrun: node %s: task %d: error: srun --mps needs pidfds (Linux 5.3 or "
                        "later)\n", node, task);
        _exit(GS_EXIT_SETUP);
    }
    if (task == 0) {
        gs_node_print_plan(stderr, node, &st, "slurm", cfg.verbose);
    }
    for (int i = 0; i < ce.nunset; i++) {
        spank_unsetenv(sp, ce.unset[i]);
    }
    for (int i = 0; i < ce.nset; i++) {
        char *eq = strchr(ce.set[i], '=');
        *eq = '\0';
        spank_setenv(sp, ce.set[i], eq + 1, 1);
    }
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    if (spank_remote(sp) && active && node_dir[0] != '\0') {
        /* An agent in the error state, or one past its time, needs its dir
         * no more: the step's tasks are gone. */
        uid_t uid;
        gs_task_wait_agent(node_dir, GS_PROTO_QUIT_TIMEOUT_MS + 2000);
        /* slurmstepd is root: it ends what is left of the step's agent,
         * whatever the step's user did to it (runtime/batch/endjob.c). */
        if (geteuid() == 0 && spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS &&
            gs_endjob_kill(NULL, job_dir, uid, GS_WAIT_ENDJOB_MS) > 0) {
            slurm_info("gsrun: the agent of %s did not stop; root ended it", job_dir);
        }
        gs_rundir_remove(job_dir);
    }
    return 0;
}
