/* SPDX-License-Identifier: BSD-3-Clause */
/* mca_rtc_gsrun: automatic MPS for plain `mpirun`, as an Open MPI 4.x (ORTE)
 * run-time control component. A thin adapter over runtime/, like gsrun-shim:
 *
 *   init   (in mpirun, when the framework is selected, long before any
 *           job is known): starts mpirun's node agent early, which finds
 *           the GPUs and starts MPS while mpirun parses and launches, as
 *           gsrun does on its own node;
 *   assign (in mpirun and in every orted, once per job, before its ranks
 *           are forked): makes the job's run dir on this node, starts the
 *           node agent (or, in mpirun, tells the early one the node's rank
 *           count), which plans the node and starts MPS, and waits for its
 *           state;
 *   set    (in each forked rank, just before exec): registers the rank with
 *           the agent (its PID is the program's) and puts the MPS client
 *           environment into the rank's own environment;
 *   finalize (when the daemon closes the framework): waits, bounded, for
 *           this daemon's agents to have cleaned up (and ends an early one
 *           no job took), so that mpirun returns with nothing left behind.
 * The agent watches the daemon's PID, so a killed mpirun or orted still
 * ends that node's ranks and MPS. Jobs started by gsrun (GSRUN_JOB_DIR in
 * their environment) are left to gsrun's own shim. */
#include "orte_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "opal/mca/base/base.h"
#include "opal/util/opal_environ.h"
#include "orte/mca/rtc/rtc.h"
#include "orte/runtime/orte_globals.h"
#include "orte/util/proc_info.h"

#include "runtime/rank/clientenv.h"
#include "runtime/core/config.h"
#include "runtime/rank/node.h"
#include "runtime/core/proc.h"
#include "runtime/wire/protocol.h"
#include "runtime/files/rundir.h"
#include "runtime/files/state.h"
#include "runtime/rank/task.h"
#include "runtime/core/limits.h"

#define GS_RTC_EXPORT __attribute__((visibility("default")))

#ifndef GS_PKGLIBEXECDIR
#define GS_PKGLIBEXECDIR "/usr/local/libexec/gsrun"
#endif

GS_RTC_EXPORT extern orte_rtc_base_component_t mca_rtc_gsrun_component;

/* The MCA parameters, as Open MPI hands them over (NULL: not set). */
static char *param_value[GS_CONFIG_KEYS_MAX]; /* by row of gs_config_keys */
static int param_index[GS_CONFIG_KEYS_MAX];   /* their MCA variables (-1: none) */
static char *param_agent;
static int param_priority = 60;

/* Settings parsed once; a bad one fails every job with its message. */
static gs_config_t rtc_cfg;
static gs_error_t rtc_cfg_err;
static int rtc_cfg_bad;
static char rtc_agent[GS_PATH_MAX];

/* One job this daemon provisions (several with MPI_Comm_spawn). */
typedef struct rtc_job {
    struct rtc_job *next;
    orte_jobid_t jobid;
    int skip;                 /* gsrun's own job, or no local rank */
    int exit_code;            /* a node-wide failure: the code, else 0 */
    char error[GS_ERROR_LEN];
    char job_dir[256];
    char node_dir[300];
    int early_fd; /* the early agent's pipe (it took that agent), or -1 */
} rtc_job_t;
static rtc_job_t *rtc_jobs;

/* mpirun's early agent, until a job takes it (or finalize ends it). */
static struct {
    int pipe_fd; /* held while mpirun runs: its closing tells the agent to go */
    char job_dir[256];
} early = {-1, ""};

static rtc_job_t *find_job(orte_jobid_t id)
{
    for (rtc_job_t *j = rtc_jobs; j != NULL; j = j->next) {
        if (j->jobid == id) {
            return j;
        }
    }
    return NULL;
}

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            return *e + n + 1;
        }
    }
    return NULL;
}

static orte_app_context_t *first_app(orte_job_t *jdata)
{
    return (orte_app_context_t *)opal_pointer_array_get_item(jdata->apps, 0);
}

static void fail_job(rtc_job_t *j, int code, const char *text)
{
    j->exit_code = code;
    snprintf(j->error, sizeof(j->error), "%s", text);
}

/* Open MPI's own variables, which mpirun adds to a job's environment. */
static int ompi_own(const char *e)
{
    return strncmp(e, "OMPI_", 5) == 0 || strncmp(e, "PMIX_", 5) == 0 ||
           strncmp(e, "OPAL_", 5) == 0 || strncmp(e, "ORTE_", 5) == 0;
}

/* The early agent was started with mpirun's environment, and a job's ranks
 * on mpirun's node get that environment with the job's own variables on
 * top (app->env holds those: mpirun -x NAME=VALUE, and Open MPI's own). A
 * job whose own variables change what mpirun has (mpirun -x
 * CUDA_VISIBLE_DEVICES=1, say) gets an agent of its own instead. */
static int env_is_mpiruns(char **env)
{
    for (char **e = env; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        char name[256];
        if (ompi_own(*e)) {
            continue;
        }
        if (eq == NULL || (size_t)(eq - *e) >= sizeof(name)) {
            return 0;
        }
        snprintf(name, sizeof(name), "%.*s", (int)(eq - *e), *e);
        const char *mine = getenv(name);
        if (mine == NULL || strcmp(mine, eq + 1) != 0) {
            return 0;
        }
    }
    return 1;
}

/* A job's run dir in this node's TMPDIR (checked first). */
static int make_job_dir(char *out, size_t len, gs_error_t *err)
{
    int rc = gs_rundir_check_parent(gs_rundir_tmpdir(), err);
    return rc != 0 ? rc : gs_rundir_create_job(gs_rundir_tmpdir(), out, len, err);
}

/* In mpirun, at once: the node agent starts now (it finds the GPUs and
 * starts MPS while mpirun launches) instead of in assign, where the node's
 * ranks wait for it. Not under gsrun or with a fork agent of any other kind
 * (the prefix), whose jobs are not this component's; nor in the orteds,
 * whose environment is not their jobs' (a remote shell's). Failing, it
 * leaves the start to assign. */
static void start_early(void)
{
    gs_node_req_t req;
    gs_error_t err;

    if (!ORTE_PROC_IS_HNP || rtc_cfg_bad || rtc_cfg.mps == GS_MPS_OFF || orte_fork_agent != NULL ||
        getenv("GSRUN_JOB_DIR") != NULL ||
        make_job_dir(early.job_dir, sizeof(early.job_dir), &err) != 0) {
        return;
    }
    memset(&req, 0, sizeof(req));
    req.cfg = &rtc_cfg;
    req.job_dir = early.job_dir;
    req.agent_path = rtc_agent;
    req.launcher_pid = getpid();
    req.in_sequence = 1; /* as for every job here: see rtc_assign */
    int rc = gs_node_start_early(&req, &early.pipe_fd, &err);
    if (rc != 0) {
        gs_rundir_remove(early.job_dir);
        if (rtc_cfg.verbose || rc == -ETIMEDOUT) { /* the job waited: say why */
            fprintf(stderr, "gsrun: note: %s; the job's start starts it instead\n", err.text);
        }
    }
}

/* Ends the early agent no job took, and waits (bounded) until it is gone. */
static void end_early(void)
{
    char node_dir[300];
    gs_error_t ignored;

    if (early.pipe_fd < 0) {
        return;
    }
    close(early.pipe_fd);
    early.pipe_fd = -1;
    if (gs_node_dir(early.job_dir, node_dir, sizeof(node_dir), &ignored) == 0) {
        gs_task_wait_agent(node_dir, GS_PROTO_QUIT_TIMEOUT_MS + 2000);
    }
}

static void rtc_assign(orte_job_t *jdata)
{
    orte_app_context_t *app = first_app(jdata);
    rtc_job_t *j = calloc(1, sizeof(*j));
    gs_node_req_t req;
    gs_state_t st;
    gs_error_t err;
    char node[64];

    if (j == NULL) {
        return;
    }
    j->jobid = jdata->jobid;
    j->early_fd = -1;
    j->next = rtc_jobs;
    rtc_jobs = j;
    if (jdata->num_local_procs == 0 || app == NULL || rtc_cfg.mps == GS_MPS_OFF ||
        env_get(app->env, "GSRUN_JOB_DIR") != NULL) {
        j->skip = 1;
        return;
    }
    if (rtc_cfg_bad) {
        fail_job(j, GS_EXIT_USAGE, rtc_cfg_err.text);
        return;
    }
    /* The first job here takes mpirun's early agent, if its environment is
     * the one the agent started with; another gets one of its own. */
    int use_early = early.pipe_fd >= 0 && env_is_mpiruns(app->env);
    if (!use_early) {
        end_early();
    }
    if (use_early) {
        snprintf(j->job_dir, sizeof(j->job_dir), "%s", early.job_dir);
        j->early_fd = early.pipe_fd;
        early.pipe_fd = -1;
    } else if (make_job_dir(j->job_dir, sizeof(j->job_dir), &err) != 0) {
        fail_job(j, GS_EXIT_RUNDIR, err.text);
        return;
    }
    memset(&req, 0, sizeof(req));
    req.cfg = &rtc_cfg;
    req.job_dir = j->job_dir;
    req.agent_path = rtc_agent;
    req.local_rank = 0;
    req.local_size = (int)jdata->num_local_procs;
    req.launcher_pid = getpid();
    req.agent_env = app->env; /* the agent sees what the ranks see */
    /* ORTE forks the next rank only when this one has exec'd. */
    req.in_sequence = 1;
    req.early_agent = use_early;
    gs_node_dir(j->job_dir, j->node_dir, sizeof(j->node_dir), &err);
    gs_rundir_node_name(node, sizeof(node));
    if (gs_node_start(&req, &st, &err) != 0) {
        fail_job(j, st.exit_code ? st.exit_code : GS_EXIT_SETUP, err.text);
        if (access(j->node_dir, F_OK) != 0 || st.kind != GS_STATE_ERROR) {
            /* No agent owns the dirs (it never started, or died early). */
            gs_rundir_remove(j->job_dir);
        }
        return;
    }
    gs_node_print_plan(stderr, node, &st, "openmpi", rtc_cfg.verbose);
}

/* In the forked rank, before exec. On a node-wide failure the node leader
 * reports it and exits with its code, the other ranks exit 0 without
 * running the program (as with gsrun-shim): mpirun ends the job with the
 * leader's status. */
static void rtc_set(orte_job_t *jdata, orte_proc_t *proc, char ***env, int error_fd)
{
    rtc_job_t *j = find_job(jdata->jobid);
    int rank = proc->local_rank, keep_fd = -1;
    gs_node_req_t req;
    gs_state_t st;
    gs_error_t err;
    gs_clientenv_t ce;
    char node[64];

    if (j == NULL || j->skip) {
        return;
    }
    gs_rundir_node_name(node, sizeof(node));
    if (j->exit_code != 0) {
        if (rank == 0) {
            fprintf(stderr, "gsrun: node %s: error: %s\n", node, j->error);
        }
        _exit(rank == 0 ? j->exit_code : 0);
    }
    memset(&req, 0, sizeof(req));
    req.cfg = &rtc_cfg;
    req.job_dir = j->job_dir;
    req.local_rank = rank;
    req.local_size = (int)jdata->num_local_procs;
    req.launcher_pid = getppid();
    int node_wide, code = gs_task_join(&req, &st, &ce, &keep_fd, &node_wide, &err);
    if (code != 0) {
        fprintf(stderr, "gsrun: node %s: local rank %d: error: %s\n", node, rank, err.text);
        _exit(code);
    }
    if (keep_fd >= 0) {
        /* Open MPI closes every other descriptor before exec: only a pidfd
         * lets the agent follow the rank. */
        fprintf(stderr, "gsrun: node %s: local rank %d: error: the Open MPI component needs "
                        "pidfds (Linux 5.3 or later); use gsrun on this kernel\n", node, rank);
        _exit(GS_EXIT_SETUP);
    }
    for (int i = 0; i < ce.nunset; i++) {
        opal_unsetenv(ce.unset[i], env);
    }
    for (int i = 0; i < ce.nset; i++) {
        char *eq = strchr(ce.set[i], '=');
        *eq = '\0';
        opal_setenv(ce.set[i], eq + 1, true, env);
    }
}

static void rtc_finalize(void)
{
    while (rtc_jobs != NULL) {
        rtc_job_t *j = rtc_jobs;
        rtc_jobs = j->next;
        if (!j->skip && j->exit_code == 0) {
            gs_task_wait_agent(j->node_dir, GS_PROTO_QUIT_TIMEOUT_MS + 2000);
        }
        if (j->early_fd >= 0) {
            close(j->early_fd); /* only now: its closing ends the agent's ranks */
        }
        free(j);
    }
    end_early();
}

static int rtc_init(void)
{
    start_early();
    return ORTE_SUCCESS;
}

static orte_rtc_base_module_t rtc_gsrun_module = {
    .init = rtc_init,
    .finalize = rtc_finalize,
    .assign = rtc_assign,
    .set = rtc_set,
    .get_available_values = NULL,
};

/* The settings the component takes: the table's GS_FRONT_MCA rows, each an
 * MCA parameter rtc_gsrun_<option>. */
static const char *mca_name(const gs_config_key_t *k, char *buf, size_t len)
{
    snprintf(buf, len, "%s", k->option);
    for (char *p = buf; *p != '\0'; p++) {
        *p = *p == '-' ? '_' : *p;
    }
    return buf;
}

static int rtc_register(void)
{
    mca_base_component_t *c = &mca_rtc_gsrun_component.base_version;
    char name[64], help[256];

    for (int i = 0; gs_config_keys[i].option != NULL && i < GS_CONFIG_KEYS_MAX; i++) {
        const gs_config_key_t *k = &gs_config_keys[i];
        param_value[i] = NULL;
        param_index[i] = -1;
        if (!(k->fronts & GS_FRONT_MCA)) {
            continue;
        }
        mca_name(k, name, sizeof(name));
        snprintf(help, sizeof(help), "As gsrun --%s: %s", k->option, k->accepted);
        param_index[i] = mca_base_component_var_register(
            c, name, help, MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_3,
            MCA_BASE_VAR_SCOPE_READONLY, &param_value[i]);
    }
    param_agent = NULL;
    (void)mca_base_component_var_register(c, "agent", "Path of gsrun-agent (default: installed)",
                                          MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_9,
                                          MCA_BASE_VAR_SCOPE_READONLY, &param_agent);
    (void)mca_base_component_var_register(c, "priority", "Priority of the gsrun rtc component",
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_9,
                                          MCA_BASE_VAR_SCOPE_READONLY, &param_priority);

    /* Parsed now: Open MPI frees the strings before finalize. */
    gs_config_init(&rtc_cfg);
    rtc_cfg.names = GS_NAMES_MCA;
    rtc_cfg_bad = 0;
    for (int i = 0; gs_config_keys[i].option != NULL && i < GS_CONFIG_KEYS_MAX && !rtc_cfg_bad;
         i++) {
        char origin[80];
        snprintf(origin, sizeof(origin), "MCA parameter rtc_gsrun_%s",
                 mca_name(&gs_config_keys[i], name, sizeof(name)));
        /* Open MPI keeps an empty string as no value: one set empty (-mca
         * NAME '', OMPI_MCA_NAME=) is refused as --NAME='' is, not taken as
         * the default. */
        mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
        const char *value = param_value[i];
        if (value == NULL && param_index[i] >= 0 &&
            mca_base_var_get_value(param_index[i], NULL, &source, NULL) == OPAL_SUCCESS &&
            source != MCA_BASE_VAR_SOURCE_DEFAULT) {
            value = "";
        }
        if (value != NULL && gs_config_set(&rtc_cfg, gs_config_keys[i].option, value, origin,
                                           &rtc_cfg_err) != 0) {
            rtc_cfg_bad = 1;
        }
    }
    snprintf(rtc_agent, sizeof(rtc_agent), "%s",
             param_agent != NULL && *param_agent != '\0' ? param_agent
                                                         : GS_PKGLIBEXECDIR "/gsrun-agent");
    return ORTE_SUCCESS;
}

static int rtc_query(mca_base_module_t **module, int *priority)
{
    *priority = param_priority;
    *module = (mca_base_module_t *)&rtc_gsrun_module;
    return ORTE_SUCCESS;
}

GS_RTC_EXPORT orte_rtc_base_component_t mca_rtc_gsrun_component = {
    .base_version =
        {
            ORTE_RTC_BASE_VERSION_1_0_0,
            .mca_component_name = "gsrun",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_query_component = rtc_query,
            .mca_register_component_params = rtc_register,
        },
    .base_data = {MCA_BASE_METADATA_PARAM_NONE},
};
