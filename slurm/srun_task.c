/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun-srun-task: srun's task prolog under `gsrun srun ...`.
 *
 * srun has no fork agent, so gsrun names this program as the step's task
 * prolog (srun --task-prolog). slurmstepd runs it in each task, as the
 * job's user, from the task's own process just before that process execs
 * the program: so our parent's PID is the rank's. It joins the node for
 * its parent (the node's first task starts the node agent), prints the
 * client environment as the "export NAME=VALUE" lines slurmstepd applies
 * to the task, and exits 0; a failure exits non-zero, which keeps the task
 * from running (slurmstepd reports the status as the task's). A task
 * prolog of the user's own (SLURM_TASK_PROLOG, taken by gsrun into
 * GSRUN_TASK_PROLOG) runs first, its lines passed on. */
#include "gs_autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmix/discover.h"
#include "runtime/rank/clientenv.h"
#include "runtime/core/config.h"
#include "runtime/files/rundir.h"
#include "runtime/rank/task.h"
#include "runtime/core/limits.h"

static int task_stderr; /* fd 2 is the task's stderr */

/* slurmstepd reads a task prolog's output (stdout and stderr) as the lines
 * it applies, and waits for its end before the task runs: messages go to
 * the task's own stderr (which srun forwards), when this user may open it
 * (root may; an ordinary user may not, until the task has exec'd), else to
 * /dev/null, so that nothing started here (the node agent) holds that pipe.
 * Returns whether the task's stderr is ours. */
static int use_task_stderr(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/2", (int)getppid());
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    } else {
        task_stderr = 1;
    }
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
    return task_stderr;
}

/* A message for the user: on the task's stderr, else as a "print" line,
 * which slurmstepd writes to the task's stdout. */
static void say(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (task_stderr) {
        fprintf(stderr, "%s\n", line);
    } else {
        printf("print %s\n", line);
        fflush(stdout);
    }
}

static pid_t parent_of(pid_t pid)
{
    char path[64], line[256];
    int ppid = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        sscanf(line, "PPid: %d", &ppid);
    }
    fclose(f);
    return (pid_t)ppid;
}

/* The user's own task prolog: its output lines go on to slurmstepd; its
 * failure is the task's. */
static int run_user_prolog(const char *prog)
{
    char line[GS_LINE_MAX];
    FILE *p = popen(prog, "re");
    if (p == NULL) {
        say("gsrun: cannot run the task prolog '%s': %s", prog, strerror(errno));
        return GS_EXIT_NOEXEC;
    }
    while (fgets(line, sizeof(line), p) != NULL) {
        fputs(line, stdout);
    }
    int st = pclose(p);
    if (st != 0) {
        say("gsrun: the task prolog '%s' failed (status %d)", prog,
            WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return WIFEXITED(st) && WEXITSTATUS(st) != 0 ? WEXITSTATUS(st) : 1;
    }
    return 0;
}

int main(void)
{
    gs_config_t cfg;
    gs_error_t err;
    gs_local_t loc;
    static gs_state_t st;
    gs_clientenv_t env;
    char node[64];
    const char *job_dir = getenv("GSRUN_JOB_DIR");
    const char *user = getenv("GSRUN_TASK_PROLOG");
    int keep_fd = -1, node_wide, code;

    use_task_stderr();
    gs_rundir_node_name(node, sizeof(node));
    if (user != NULL && *user != '\0' && (code = run_user_prolog(user)) != 0) {
        return code;
    }
    gs_config_init(&cfg);
    if (gs_config_load_env(&cfg, &err) != 0) {
        say("gsrun: node %s: %s", node, err.text);
        return GS_EXIT_USAGE;
    }
    if (job_dir == NULL || job_dir[0] != '/') {
        say("gsrun-srun-task: GSRUN_JOB_DIR is not set: this is srun's task prolog under "
            "`gsrun srun ...` (check that srun passes the environment on: no --export=NONE)");
        return GS_EXIT_USAGE;
    }
    /* The step's own variables (a PMIx client here would not be a task). */
    if (gs_discover_from_env(&loc, &err) != 0) {
        say("gsrun: node %s: error: %s", node, err.text);
        return GS_EXIT_SETUP;
    }
    int leader = loc.local_rank == 0;
    gs_task_rank_t rank = {.cfg = &cfg,
                           .job_dir = job_dir,
                           .local_rank = loc.local_rank,
                           .local_size = loc.local_size,
                           .launcher_pid = parent_of(getppid()), /* the task's slurmstepd */
                           .for_parent = 1,
                           .report_rank0 = !task_stderr};
    code = gs_task_run_rank(&rank, &st, &env, &keep_fd, &node_wide, &err);
    if (code != 0) {
        /* A node-wide failure: the leader says it once; every task fails
         * with the same status (srun, unlike mpirun, takes that well). */
        if (!node_wide || leader) {
            say("gsrun: node %s: %serror: %s", node, node_wide ? "" : "task ", err.text);
        }
        return code;
    }
    if (leader && task_stderr) {
        gs_node_print_plan(stderr, node, &st, "slurm", cfg.verbose);
    } else if (leader) {
        /* The same lines, as "print" lines for slurmstepd. */
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (m != NULL) {
            gs_node_print_plan(m, node, &st, "slurm", cfg.verbose);
            fclose(m);
            for (char *l = strtok(buf, "\n"); l != NULL; l = strtok(NULL, "\n")) {
                say("%s", l);
            }
            free(buf);
        }
    }
    for (int i = 0; i < env.nunset; i++) {
        printf("unset %s\n", env.unset[i]);
    }
    for (int i = 0; i < env.nset; i++) {
        printf("export %s\n", env.set[i]);
    }
    return fflush(stdout) == 0 ? 0 : GS_EXIT_SETUP;
}
