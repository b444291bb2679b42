/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun: runs mpirun (or srun) with a per-rank hook that sets up MPS.
 *
 * gsrun never parses the launcher's arguments. It puts gsrun-shim in front
 * of every rank through Open MPI's fork agent parameter (with srun:
 * gsrun-srun-task as the step's task prolog), forwards what the hook
 * needs as GSRUN_* variables, runs the launcher as its child, forwards the
 * signals sent to it, waits for the node agents to finish tearing MPS down,
 * and exits exactly as the launcher did. */
#include "gs_autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmix/discover.h"
#include "runtime/rank/helper.h"
#include "launcher/commands.h"
#include "launcher/options.h"
#include "launcher/reports.h"
#include "launcher/supervise.h"
#include "runtime/core/config.h"
#include "runtime/rank/node.h"
#include "runtime/files/preflight.h"
#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/core/limits.h"

static void die(int code, const char *msg)
{
    fprintf(stderr, "gsrun: %s\n", msg);
    exit(code);
}

static void print_quoted(FILE *f, const char *s)
{
    if (*s != '\0' && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789-_./=:,+@%") == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s != '\0'; s++) {
        if (*s == '\'') {
            fputs("'\\''", f);
        } else {
            fputc(*s, f);
        }
    }
    fputc('\'', f);
}

/* The parameter that puts a program in front of every rank: Open MPI 4
 * (ORTE) and Open MPI 5 (PRRTE) each ignore the other's name, so gsrun sets
 * both and never needs the launcher's version. */
static const char *const fork_agent_params[] = {"orte_fork_agent", "odls_base_exec_agent", NULL};

/* Open MPI joins repeated --mca values with commas, so a fork agent of the
 * user's own is taken out of the arguments and chained behind the shim. */
static int take_user_fork_agent(char **args, int *nargs, char *agent, size_t len)
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
static int check_open_mpi(const char *launcher, gs_error_t *err)
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

static void print_command(char **cmd)
{
    for (int i = 0; cmd[i] != NULL; i++) {
        print_quoted(stdout, cmd[i]);
        fputc(cmd[i + 1] != NULL ? ' ' : '\n', stdout);
    }
}

/* The job dir on gsrun's node (a mkdtemp name; the other nodes use the same
 * name in their own TMPDIR) and the variables the shims need. */
/* Wall clock at gsrun's start: the origin of the -vv timeline (the agents
 * on this node count from it too, through GSRUN_T0). */
static long long gsrun_t0_ms;

/* The job's run dir on gsrun's node, and the ranks' GSRUN_* variables.
 * Returns 0, or -1 with rd_err saying why there can be no run dir here
 * (the caller decides: under auto the job runs without MPS). */
static int prepare_job(const gs_opts_t *o, char *job_dir, size_t len, gs_error_t *rd_err)
{
    gs_error_t err;
    char msgs[8][256], pidbuf[16], node_id[160], t0buf[24];

    if (o->cfg.dry_run) {
        snprintf(job_dir, len, "%s/gsrun.XXXXXX", gs_rundir_tmpdir());
    } else {
        int n = gs_preflight_warnings(NULL, msgs, 8);
        for (int i = 0; i < n; i++) {
            fprintf(stderr, "gsrun: warning: %s\n", msgs[i]);
        }
        if (gs_rundir_create_job(gs_rundir_tmpdir(), job_dir, len, rd_err) != 0) {
            return -1;
        }
        int rc = gs_rundir_check_usable(job_dir, rd_err);
        if (rc == 0 && (rc = gs_preflight_claim(job_dir)) != 0) {
            gs_error_set(rd_err, -rc, "cannot write in the run directory '%s': %s%s", job_dir,
                         strerror(-rc), rc == -ENOSPC ? "; free space in TMPDIR or set TMPDIR "
                                                        "elsewhere" : "");
        }
        if (rc != 0) {
            gs_rundir_remove(job_dir);
            return -1;
        }
        n = gs_preflight_clean_stale(gs_rundir_tmpdir(), msgs, 8);
        for (int i = 0; i < n && o->cfg.verbose; i++) {
            fprintf(stderr, "gsrun: removed the run directory of a job that crashed: %s\n",
                    msgs[i]);
        }
    }
    snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
    snprintf(t0buf, sizeof(t0buf), "%lld", gsrun_t0_ms);
    gs_node_id(node_id, sizeof(node_id));
    if (gs_config_export_env(&o->cfg, &err) != 0 || setenv("GSRUN_JOB_DIR", job_dir, 1) != 0 ||
        setenv("GSRUN_PID", pidbuf, 1) != 0 || setenv("GSRUN_NODE_ID", node_id, 1) != 0 ||
        setenv("GSRUN_T0", t0buf, 1) != 0) {
        gs_rundir_remove(job_dir);
        die(GS_EXIT_SETUP, "cannot set the environment for the ranks");
    }
    return 0;
}

/* mpirun --mca orte_fork_agent <shim> --mca odls_base_exec_agent <shim>
 * -x ... <the user's arguments>. */
static char **build_command(char *launcher, char *shim, char **args, int nargs)
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
        die(GS_EXIT_SETUP, "out of memory");
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

/* Whether the launcher is Slurm's srun (by its name). */
static int is_srun(const char *launcher)
{
    const char *base = strrchr(launcher, '/');
    return strcmp(base != NULL ? base + 1 : launcher, "srun") == 0;
}

/* srun --task-prolog=<gsrun-srun-task> <the user's arguments>: srun passes
 * gsrun's environment (GSRUN_*) on to the tasks. A task prolog the user set
 * in SLURM_TASK_PROLOG runs from ours; one given as --task-prolog in the
 * arguments replaces ours (srun takes the last; documented: gsrun does not
 * parse srun's arguments to find it). */
static char **build_srun_command(char *launcher, const char *prolog, char **args, int nargs)
{
    static char opt[GS_PATH_MAX];
    char **cmd = calloc((size_t)nargs + 3, sizeof(*cmd));
    const char *user = getenv("SLURM_TASK_PROLOG");
    int n = 0;

    if (cmd == NULL) {
        die(GS_EXIT_SETUP, "out of memory");
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

/* The node agent of gsrun's own node starts now, before mpirun: it finds
 * the GPUs and starts MPS while mpirun launches, instead of while the
 * node's first rank waits. Returns the pipe end gsrun holds while mpirun
 * runs (its closing tells the agent that the launcher is gone), or -1: then
 * the node's first rank starts the agent, as on the other nodes. */
static int start_agent_early(const gs_opts_t *o, const char *agent, const char *job_dir)
{
    gs_node_req_t req;
    gs_error_t err;
    int fd;

    memset(&req, 0, sizeof(req));
    req.cfg = &o->cfg;
    req.job_dir = job_dir;
    req.agent_path = agent;
    req.gsrun_pid = getpid();
    req.t0_ms = gsrun_t0_ms;
    if (gs_node_start_early(&req, &fd, &err) != 0) {
        if (o->cfg.verbose) {
            fprintf(stderr, "gsrun: note: %s; the node's first rank starts it instead\n", err.text);
        }
        return -1;
    }
    setenv("GSRUN_EARLY_AGENT", "1", 1);
    return fd;
}

/* Checks the launcher and the control program named by the user. Returns 0
 * or gsrun's exit status for the failure (reported). */
static int check_programs(gs_opts_t *o, char *launcher, size_t len)
{
    gs_error_t err;
    char path[GS_PATH_MAX];

    int rc = gs_config_find_executable(o->cfg.launcher, NULL, "launcher", launcher, len, &err);
    if (rc != 0) {
        fprintf(stderr, "gsrun: %s: %s\n", o->launcher_origin, err.text);
        return rc == -EACCES ? GS_EXIT_NOEXEC : GS_EXIT_NOTFOUND;
    }
    /* A control path given explicitly must be usable whatever the mode. */
    if (o->control_given && strchr(o->cfg.control, '/') != NULL &&
        gs_config_find_executable(o->cfg.control, NULL, "MPS control program", path,
                                  sizeof(path), &err) != 0) {
        fprintf(stderr, "gsrun: %s: %s\n", o->control_origin, err.text);
        return GS_EXIT_USAGE;
    }
    /* gsrun may run setuid or setgid only by a mistake of the admin; then an
     * override of the program gsrun's daemons run is not honoured. */
    if ((getuid() != geteuid() || getgid() != getegid()) && o->control_given) {
        fprintf(stderr, "gsrun: warning: --mps-control/GSRUN_MPS_CONTROL ignored: gsrun runs "
                        "setuid or setgid\n");
        snprintf(o->cfg.control, sizeof(o->cfg.control), "%s", GS_DEFAULT_CONTROL);
        o->control_given = 0;
    }
    if (o->launcher_given && !is_srun(launcher) && check_open_mpi(launcher, &err) != 0) {
        fprintf(stderr, "gsrun: %s: %s\n", o->launcher_origin, err.text);
        return GS_EXIT_USAGE;
    }
    return 0;
}

/* Runs the launcher as gsrun's child with the node agents around it, waits
 * for the agents, prints their reports and exits as the launcher did. */
static int run_job(const gs_opts_t *o, char *launcher, char **cmd, const char *agent,
                   const char *job_dir, int srun)
{
    gs_error_t err;

    /* Node agents are daemons; on this node they become our children when
     * their first parent exits, so that we can reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* A reader of gsrun's stderr that went away (`gsrun -v ... | head`)
     * must not kill gsrun before it has waited for the job and removed its
     * run dir: a failed write is just lost. */
    signal(SIGPIPE, SIG_IGN);
    /* srun's tasks may not run on gsrun's node (a login node): no early
     * agent there. */
    int launcher_pipe = srun ? -1 : start_agent_early(o, agent, job_dir);
    long long t_launch = gs_proc_wall_ms() - gsrun_t0_ms;
    int status = gs_supervise(launcher, cmd, &err);
    long long t_exited = gs_proc_wall_ms() - gsrun_t0_ms;
    if (launcher_pipe >= 0) {
        close(launcher_pipe); /* mpirun is gone: the early agent may end */
    }
    gs_wait_for_agents(job_dir, GS_AGENT_WAIT_MS);
    long long t_agents = gs_proc_wall_ms() - gsrun_t0_ms;
    if (status < 0) {
        gs_rundir_remove(job_dir);
        die(GS_EXIT_SETUP, err.text);
    }
    gs_print_reports(job_dir, o->cfg.verbose);
    if (o->cfg.verbose >= 2) {
        fprintf(stderr, "gsrun: timeline (ms after gsrun started): mpirun started %lld, mpirun "
                        "exited %lld, node agents done %lld\n",
                t_launch, t_exited, t_agents);
    }
    gs_rundir_remove(job_dir);
    /* The agents, adopted by us as subreaper, release their lock just before
     * they exit: wait for that exit too, or each would stay a zombie where
     * PID 1 does not reap (a container). Bounded: a stuck one is reported
     * by gs_wait_for_agents already. */
    gs_proc_reap_all(GS_REAP_WAIT_MS);
    return gs_exit_like(status);
}

/* The launcher as the user gave it, nothing of gsrun's (--mps=off). */
static int run_plain(const gs_opts_t *o, char *launcher, char **args, int nargs)
{
    memmove(args + 1, args, (size_t)nargs * sizeof(*args));
    args[0] = launcher;
    if (o->cfg.dry_run) {
        print_command(args);
        return 0;
    }
    return gs_exec_launcher(launcher, args);
}

int main(int argc, char **argv)
{
    gs_opts_t o;
    gs_error_t err;
    char launcher[GS_PATH_MAX], shim[GS_PATH_MAX], agent[GS_PATH_MAX];
    char job_dir[GS_PATH_MAX], fork_agent[GS_PATH_MAX];
    char **args, **cmd;
    int nargs, rc;

    gsrun_t0_ms = gs_proc_wall_ms();
    const gs_command_t *sub = argc > 1 ? gs_command_find(argv[1]) : NULL;
    if (sub != NULL) {
        return sub->run(argc - 1, argv + 1);
    }
    if (gs_opts_parse(argc, argv, &o, &err) != 0) {
        die(GS_EXIT_USAGE, err.text);
    }
    if (o.help) {
        fputs(gs_usage_text, stdout);
        return 0;
    }
    if (o.version) {
        printf("gsrun %s\n%s\n", PACKAGE_VERSION, GS_FEATURES);
        return 0;
    }
    if (gs_discover_check_env(&err) != 0) {
        die(GS_EXIT_USAGE, err.text); /* else every rank would fail alike */
    }
    if ((rc = check_programs(&o, launcher, sizeof(launcher))) != 0) {
        return rc;
    }
    nargs = argc - o.first_arg;
    args = calloc((size_t)nargs + 2, sizeof(*args));
    if (args == NULL) {
        die(GS_EXIT_SETUP, "out of memory");
    }
    memcpy(args, argv + o.first_arg, (size_t)nargs * sizeof(*args));

    if (o.cfg.mps == GS_MPS_OFF) {
        return run_plain(&o, launcher, args, nargs);
    }
    int srun = is_srun(launcher);
    if (gs_helper_path(srun ? "gsrun-srun-task" : "gsrun-shim", shim, sizeof(shim), &err) != 0 ||
        gs_helper_path("gsrun-agent", agent, sizeof(agent), &err) != 0) {
        die(GS_EXIT_SETUP, err.text);
    }
    if (!srun && strchr(shim, ' ') != NULL) {
        /* Open MPI splits the fork agent parameter at spaces. */
        fprintf(stderr, "gsrun: the path of gsrun-shim ('%s') contains a space, which Open MPI's "
                        "fork agent parameter cannot carry; install gsrun under a path without "
                        "spaces\n",
                shim);
        return GS_EXIT_SETUP;
    }
    if (prepare_job(&o, job_dir, sizeof(job_dir), &err) != 0) {
        if (o.cfg.mps == GS_MPS_ON) {
            die(GS_EXIT_RUNDIR, err.text);
        }
        /* auto means MPS where it can work: without a run dir here (TMPDIR
         * unsafe, full or too long) the job runs as under plain mpirun. */
        char node[64];
        gs_rundir_node_name(node, sizeof(node));
        fprintf(stderr, "gsrun: node %s: warning: %s; running without MPS\n", node, err.text);
        return run_plain(&o, launcher, args, nargs);
    }
    if (!srun && take_user_fork_agent(args, &nargs, fork_agent, sizeof(fork_agent))) {
        setenv("GSRUN_FORK_AGENT", fork_agent, 1);
    }
    cmd = srun ? build_srun_command(launcher, shim, args, nargs)
               : build_command(launcher, shim, args, nargs);
    if (o.cfg.dry_run) {
        printf("# gsrun %s: mps=%s percentage=%s control=%s timeout=%ds\n", PACKAGE_VERSION,
               gs_config_mps_name(o.cfg.mps), getenv("GSRUN_MPS_PERCENTAGE"), o.cfg.control,
               o.cfg.timeout_s);
        print_command(cmd);
        return 0;
    }

    return run_job(&o, launcher, cmd, agent, job_dir, srun);
}
