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
#include "runtime/wire/agentcmd.h"
#include "runtime/rank/helper.h"
#include "launcher/commands.h"
#include "launcher/dryrun.h"
#include "launcher/launchers.h"
#include "launcher/options.h"
#include "launcher/reports.h"
#include "launcher/supervise.h"
#include "runtime/core/config.h"
#include "runtime/rank/node.h"
#include "runtime/files/preflight.h"
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
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

/* The run dirs crashed jobs left in TMPDIR are removed beside the job, not
 * before it: the pass reads the whole of TMPDIR (200,000 files: 100 ms on a
 * loaded machine, every job's). A process of its own (gsrun forks mpirun:
 * no thread), waited for at the job's end; inline if it cannot fork. */
static pid_t sweeper = -1;

static void sweep(int verbose)
{
    char msgs[8][256];
    int n = gs_preflight_clean_stale(gs_rundir_tmpdir(), msgs, 8);
    for (int i = 0; i < n && verbose; i++) {
        fprintf(stderr, "gsrun: removed the run directory of a job that crashed: %s\n", msgs[i]);
    }
}

static pid_t sweep_beside(int verbose)
{
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid == 0) {
        sweep(verbose);
        _exit(0);
    }
    if (pid < 0) {
        sweep(verbose);
    }
    return pid;
}

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
        sweeper = sweep_beside(o->cfg.verbose);
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

/* The node agent of gsrun's own node starts now, before mpirun: it finds
 * the GPUs and starts MPS while mpirun launches, instead of while the
 * node's first rank waits. Returns the pipe end gsrun holds while mpirun
 * runs (its closing tells the agent that the launcher is gone), or -1: then
 * the node's first rank starts the agent, as on the other nodes. */
static int start_agent_early(const gs_opts_t *o, const char *agent, const char *job_dir,
                             int ranks_at_most)
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
    req.ranks_at_most = ranks_at_most;
    int rc = gs_node_start_early(&req, &fd, &err);
    if (rc != 0) {
        if (o->cfg.verbose || rc == -ETIMEDOUT) { /* the job waited: say why */
            fprintf(stderr, "gsrun: note: %s; the node's first rank starts it instead\n", err.text);
        }
        return -1;
    }
    setenv("GSRUN_EARLY_AGENT", "1", 1);
    return fd;
}

/* Checks the launcher and the control program named by the user. Returns 0
 * or gsrun's exit status for the failure (reported). */
static int check_programs(gs_opts_t *o, char *launcher, size_t len,
                          const gs_launcher_kind_t **kind)
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
    *kind = gs_launcher_kind(launcher);
    if (o->launcher_given && (*kind)->check != NULL && (*kind)->check(launcher, &err) != 0) {
        fprintf(stderr, "gsrun: %s: %s\n", o->launcher_origin, err.text);
        return GS_EXIT_USAGE;
    }
    return 0;
}

/* Runs the launcher as gsrun's child with the node agents around it, waits
 * for the agents, prints their reports and exits as the launcher did. */
static int run_job(const gs_opts_t *o, char *launcher, char **cmd, const char *agent,
                   const char *job_dir, const gs_launcher_kind_t *kind, int ranks_at_most)
{
    gs_error_t err;

    /* Node agents are daemons; on this node they become our children when
     * their first parent exits, so that we can reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* A reader of gsrun's stderr that went away (`gsrun -v ... | head`)
     * must not kill gsrun before it has waited for the job and removed its
     * run dir: a failed write is just lost. */
    signal(SIGPIPE, SIG_IGN);
    int launcher_pipe =
        kind->early_agent ? start_agent_early(o, agent, job_dir, ranks_at_most) : -1;
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
    int fault_end = 0;
    gs_print_reports(job_dir, o->cfg.verbose,
                     WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), &fault_end);
    if (o->cfg.verbose >= 2) {
        fprintf(stderr, "gsrun: timeline (ms after gsrun started): mpirun started %lld, mpirun "
                        "exited %lld, node agents done %lld\n",
                t_launch, t_exited, t_agents);
    }
    gs_rundir_remove(job_dir);
    if (sweeper > 0) {
        gs_proc_wait(sweeper, GS_REAP_WAIT_MS, NULL); /* bounded: its lines come before ours */
    }
    /* What the ranks left running (a child in a session of its own) came
     * to us as subreaper: it ends with the job, now, not after a wait. It
     * carries a rank's variable; the launcher's own helpers (which may come
     * to us too, and end by themselves) do not. */
    static const char *const agents[] = {"gsrun-agent", "gsrun-guard", NULL};
    /* The user's shared MPS (--mps-share=node) outlives the job: never
     * ended or waited for here. Known by name and by the agent program it
     * runs (guards and shared agents are the agent's forks and execs): a
     * name alone is any program's to take. */
    static const char *const spare[] = {"gsrun-agent", "gsrun-guard", GS_AGENT_SHARED_COMM,
                                        NULL};
    int running;
    int ended =
        gs_proctree_kill(spare, agent, "GSRUN_LOCAL_RANK=", GS_LEFTOVER_KILL_MS, &running);
    if (ended > 0) {
        fprintf(stderr, "gsrun: ended %d process%s the job's ranks left running\n", ended,
                ended == 1 ? "" : "es");
    }
    if (running > 0) {
        fprintf(stderr, "gsrun: warning: %d process%s the job's ranks left still running after "
                        "%d ms\n",
                running, running == 1 ? "" : "es", GS_LEFTOVER_KILL_MS);
    }
    /* The agents release their lock just before they exit: wait for that
     * exit too, or each would stay a zombie where PID 1 does not reap (a
     * container). Bounded: a stuck one is reported by gs_wait_for_agents
     * already. */
    gs_proctree_reap(agents, GS_REAP_WAIT_MS);
    if (fault_end && status != 0) {
        /* The agent ended the ranks: the launcher's status (their signal)
         * would not say why; the agent's last line did. */
        fprintf(stderr, "gsrun: exit status %d: the job was ended after a GPU fault "
                        "(--mps-fault-grace)\n", GS_EXIT_FAULT_END);
        return GS_EXIT_FAULT_END;
    }
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
    char job_dir[GS_PATH_MAX], user_hook[GS_PATH_MAX];
    const gs_launcher_kind_t *kind = NULL;
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
        gs_usage_print(stdout);
        return 0;
    }
    if (o.version) {
        printf("gsrun %s\n%s\n", PACKAGE_VERSION, GS_FEATURES);
        return 0;
    }
    if (gs_discover_check_env(&err) != 0) {
        die(GS_EXIT_USAGE, err.text); /* else every rank would fail alike */
    }
    if ((rc = check_programs(&o, launcher, sizeof(launcher), &kind)) != 0) {
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
    /* Before the early agent and the launcher start (both inherit it);
     * --mps=off runs the launcher as it is. */
    if (gs_config_launcher_hwloc() < 0) {
        die(GS_EXIT_SETUP, "cannot set HWLOC_COMPONENTS for the launcher");
    }
    if (gs_helper_path(kind->hook, shim, sizeof(shim), &err) != 0 ||
        gs_helper_path("gsrun-agent", agent, sizeof(agent), &err) != 0) {
        die(GS_EXIT_SETUP, err.text);
    }
    if (kind->hook_no_spaces != NULL && strchr(shim, ' ') != NULL) {
        fprintf(stderr, "gsrun: the path of %s ('%s') contains a space, which %s cannot carry; "
                        "install gsrun under a path without spaces\n",
                kind->hook, shim, kind->hook_no_spaces);
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
    if (kind->take_user_hook != NULL &&
        kind->take_user_hook(args, &nargs, user_hook, sizeof(user_hook))) {
        setenv("GSRUN_FORK_AGENT", user_hook, 1);
    }
    /* Read before the command is built around them: the user's arguments. */
    int ranks_at_most = kind->count_ranks != NULL ? kind->count_ranks(args, nargs) : 0;
    cmd = kind->command(launcher, shim, args, nargs);
    if (cmd == NULL) {
        die(GS_EXIT_SETUP, "out of memory");
    }
    if (o.cfg.dry_run) {
        gs_dryrun_print(stdout, &o.cfg, ranks_at_most);
        print_command(cmd);
        return 0;
    }

    return run_job(&o, launcher, cmd, agent, job_dir, kind, ranks_at_most);
}
