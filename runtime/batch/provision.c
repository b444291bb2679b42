/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/batch/provision.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/core/text.h"
#include "runtime/core/unixsock.h"
#include "runtime/files/rundir.h"
#include "runtime/files/rundir_root.h"
#include "runtime/files/status.h"
#include "runtime/plan/policy.h"
#include "runtime/rank/node.h"
#include "runtime/rank/task.h"
#include "runtime/wire/protocol.h"

int gs_provision_job_name(const char *job, char *out, size_t len, gs_error_t *err)
{
    if (job == NULL || strlen(job) + 4 > 64 || !gs_rundir_root_name_ok(job)) {
        char shown[80];
        return gs_error_set(err, EINVAL,
                            "job id '%s' is not usable: give --job with letters, digits, '.', "
                            "'_' or '-' (Slurm sets SLURM_JOB_ID)",
                            gs_text_printable(job ? job : "", shown, sizeof(shown)));
    }
    snprintf(out, len, "job-%s", job);
    return 0;
}

int gs_provision_dir_ok(const char *dir, gs_error_t *err)
{
    char shown[128];
    /* Root may make it: a name no shell or log line shows as it is (a
     * newline, an escape) is refused before anything. */
    if (dir[0] != '/' || gs_text_has_control(dir)) {
        return gs_error_set(err, EINVAL,
                            "--dir '%s' is not usable: give an absolute path without control "
                            "characters",
                            gs_text_printable(dir, shown, sizeof(shown)));
    }
    return 0;
}

/* Whether path is a directory of ours that no one else can enter. */
static int ours(const char *path)
{
    gs_error_t ignored;
    return gs_rundir_check_own(path, &ignored) == 0;
}

/* A rank that is not the node's first: the job dir the first one made, in
 * the first of the candidate bases that holds it (no other user can make a
 * directory that is ours), or, where every guessable name is another
 * user's, in the base nobody could take first. -EAGAIN while none does. */
static int find_job_dir(const char *dir, const char *job, char *out, size_t len, gs_error_t *err)
{
    char name[512];
    int others = 0, rc;
    for (int k = 0; k <= GS_RUNDIR_BASE_TRIES; k++) {
        struct stat st;
        if ((rc = gs_rundir_base_name(dir, k, name, sizeof(name), err)) != 0) {
            return rc;
        }
        if (ours(name)) {
            if ((size_t)snprintf(out, len, "%s/%s", name, job) >= len) {
                return gs_error_set(err, ENAMETOOLONG, "'%s/%s' is too long", name, job);
            }
            if (ours(out)) {
                return 0;
            }
        } else if (lstat(name, &st) == 0) {
            others++;
        }
    }
    if (others > GS_RUNDIR_BASE_TRIES) {
        /* Every guessable name another user's: the first rank went to the
         * base no one could take first (gs_rundir_user_base_any). */
        if (gs_rundir_user_base_find(dir, name, sizeof(name)) == 0 &&
            (size_t)snprintf(out, len, "%s/%s", name, job) < len && ours(out)) {
            return 0;
        }
        return -EAGAIN;
    }
    return -EAGAIN;
}

int gs_provision_exec_job_dir(const char *dir, const char *job, int first, int timeout_ms,
                              char *out, size_t len, char *taken, size_t taken_len,
                              gs_error_t *err)
{
    char base[512];
    int rc;
    taken[0] = '\0';
    if (!gs_rundir_root_name_ok(job)) {
        return gs_error_set(err, EINVAL, "'%s' is not a usable job dir name", job);
    }
    if (first) {
        if ((rc = gs_rundir_user_base_any(dir, base, sizeof(base), taken, taken_len, err)) != 0) {
            return rc;
        }
        if ((size_t)snprintf(out, len, "%s/%s", base, job) >= len) {
            return gs_error_set(err, ENAMETOOLONG, "'%s/%s' is too long", base, job);
        }
        return gs_rundir_ensure(out, err);
    }
    /* Found, never chosen: whatever another user does to the names
     * meanwhile, the rank goes where the first rank went. */
    long long deadline = gs_proc_now_ms() + timeout_ms;
    int wait_ms = 1;
    while ((rc = find_job_dir(dir, job, out, len, err)) == -EAGAIN) {
        if (gs_proc_now_ms() >= deadline) {
            return gs_error_set(err, ETIMEDOUT,
                                "the node's first rank made no run directory for this job in "
                                "'%s' or %s.1 to %s.%d within %d s",
                                dir, dir, dir, GS_RUNDIR_BASE_TRIES, timeout_ms / 1000);
        }
        usleep((useconds_t)wait_ms * 1000);
        wait_ms = wait_ms < 4 ? wait_ms * 2 : 4;
    }
    return rc;
}

int gs_provision_make_dir(const char *base, const char *name, uid_t uid, gid_t gid, char *out,
                          size_t len, gs_error_t *err)
{
    char own[512];
    int kept, rc;

    if (geteuid() == 0) {
        if (base == NULL) {
            base = GS_ROOT_RUNDIR;
        }
        if ((rc = gs_rundir_root_check_base(base, 1, err)) != 0) {
            return rc;
        }
        return gs_rundir_root_make(base, name, uid, gid, out, len, &kept, err);
    }
    if ((rc = gs_rundir_user_base(base, own, sizeof(own), err)) != 0) {
        return rc;
    }
    if (!gs_rundir_root_name_ok(name) || (size_t)snprintf(out, len, "%s/%s", own, name) >= len) {
        return gs_error_set(err, ENAMETOOLONG, "'%s/%s' is not a usable directory", own, name);
    }
    return gs_rundir_ensure(out, err);
}

/* Whether name (up to '=') is one of the kept: exact, or a prefix "NAME*". */
static int kept_name(const char *entry, const char *list, char sep)
{
    size_t n = strcspn(entry, "=");
    while (list != NULL && *list != '\0') {
        size_t len = strcspn(list, (char[]){sep, '\0'});
        if (len > 0 && list[len - 1] == '*' ? n >= len - 1 && strncmp(entry, list, len - 1) == 0
                                            : len == n && strncmp(entry, list, n) == 0) {
            return 1;
        }
        list += len + (list[len] == sep);
    }
    return 0;
}

int gs_provision_user_env(const char *user, const char *home, const char *shell)
{
    static const char basics[] = "PATH LD_LIBRARY_PATH LANG LANGUAGE LC_* TZ TMPDIR GSRUN_* CUDA_* "
                                 "NVIDIA_* HWLOC_* SLURM_* PBS_*";
    extern char **environ;
    char *site = getenv("GSRUN_AGENT_ENV") != NULL ? strdup(getenv("GSRUN_AGENT_ENV")) : NULL;
    size_t n = 0;
    char **keep;

    for (char **e = environ; *e != NULL; e++) {
        n++;
    }
    keep = calloc(n + 1, sizeof(*keep));
    if (keep == NULL) {
        free(site);
        return -1;
    }
    n = 0;
    for (char **e = environ; *e != NULL; e++) {
        if (kept_name(*e, basics, ' ') || kept_name(*e, site, ',')) {
            keep[n++] = *e; /* the strings stay: clearenv frees only the array */
        }
    }
    int rc = clearenv();
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = putenv(keep[i]);
    }
    free(keep);
    free(site);
    if (rc == 0 && user != NULL) {
        rc = setenv("USER", user, 1) | setenv("LOGNAME", user, 1);
    }
    if (rc == 0 && home != NULL) {
        rc = setenv("HOME", home, 1);
    }
    if (rc == 0 && shell != NULL && *shell != '\0') {
        rc = setenv("SHELL", shell, 1);
    }
    return rc == 0 ? 0 : -1;
}

/* Whether an agent holds the node dir's lock (0: none; -1: no dir). */
static int agent_running(const char *node_dir)
{
    int fd = open(node_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return -1;
    }
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0;
    close(fd);
    return held;
}

static int start_locked(const gs_config_t *cfg, const char *job_dir, const char *agent_path,
                        gs_state_t *st, int *already, gs_error_t *err)
{
    char node_dir[600];
    gs_node_req_t req;

    if (gs_node_dir(job_dir, node_dir, sizeof(node_dir), err) != 0) {
        return GS_EXIT_RUNDIR;
    }
    int running = agent_running(node_dir);
    if (running == 1) {
        /* The prolog ran before (a requeued job, a retry): the state tells. */
        *already = 1;
        if (gs_state_read(node_dir, st, err) != 0) {
            return GS_EXIT_SETUP;
        }
        return st->kind == GS_STATE_ERROR ? (st->exit_code ? st->exit_code : GS_EXIT_SETUP) : 0;
    }
    if (running == 0) {
        gs_rundir_remove(node_dir); /* a dead agent's: start afresh */
    }
    memset(&req, 0, sizeof(req));
    req.cfg = cfg;
    req.job_dir = job_dir;
    req.agent_path = agent_path;
    req.local_size = 0;
    req.job_long = 1;
    if (gs_node_start(&req, st, err) != 0) {
        /* The job will not run here: nothing of it may stay. */
        gs_error_t ignored;
        FILE *null = fopen("/dev/null", "w");
        if (null != NULL) {
            gs_provision_stop(job_dir, null, 0, 0, &ignored);
            fclose(null);
        }
        return st->exit_code ? st->exit_code : GS_EXIT_SETUP;
    }
    return 0;
}

int gs_provision_start(const gs_config_t *cfg, const char *job_dir, const char *agent_path,
                       gs_state_t *st, int *already, gs_error_t *err)
{
    *already = 0;
    memset(st, 0, sizeof(*st));
    if (gs_rundir_ensure(job_dir, err) != 0) {
        return GS_EXIT_RUNDIR;
    }
    /* Two prologs of one job at once (a retry while the first still runs):
     * the second waits, bounded, for the first, then finds its agent. */
    int lock = gs_rundir_lock_wait(job_dir, (cfg->timeout_s + 15) * 1000);
    if (lock < 0) {
        gs_error_set(err, EBUSY, "another gsrun prolog for %s did not finish in time", job_dir);
        return GS_EXIT_SETUP;
    }
    int code = start_locked(cfg, job_dir, agent_path, st, already, err);
    close(lock);
    return code;
}

/* "stop" to the agent; its report comes back on the connection: all of it
 * with verbose, else its problems. */
/* The most report lines an epilog prints from one agent. */
#define GS_PROVISION_REPORT_LINES 200

static int ask_stop(const char *node_dir, FILE *out, int verbose)
{
    char buf[GS_LINE_MAX], path[700];
    snprintf(path, sizeof(path), "%s/%s", node_dir, GS_PROTO_SOCKET);
    int fd = gs_unixsock_connect(path, NULL);

    /* MSG_NOSIGNAL: a peer that closes at once must not kill the epilog. */
    if (fd < 0 || send(fd, GS_PROTO_STOP, strlen(GS_PROTO_STOP), MSG_NOSIGNAL) !=
                      (ssize_t)strlen(GS_PROTO_STOP)) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    long long deadline = gs_proc_now_ms() + GS_PROTO_QUIT_TIMEOUT_MS + 2000;
    long n;
    int lines = 0;
    /* The answer comes through a socket in a directory the job's user
     * writes: whoever answers, root prints only cleaned text (no control
     * characters, valid UTF-8), a bounded number of lines. */
    while ((n = gs_proc_read_line(fd, buf, sizeof(buf), deadline)) > 0 &&
           lines < GS_PROVISION_REPORT_LINES) {
        if (verbose || strstr(buf, "problem: ") != NULL) {
            gs_text_rstrip(buf, "\r\n");
            gs_status_clean(buf);
            fprintf(out, "%s\n", buf);
            lines++;
        }
    }
    close(fd);
    return 0;
}

int gs_provision_stop(const char *job_dir, FILE *out, int verbose, int keep_dir, gs_error_t *err)
{
    char node_dir[600];

    if (gs_node_dir(job_dir, node_dir, sizeof(node_dir), err) != 0) {
        return GS_EXIT_RUNDIR;
    }
    int running = agent_running(node_dir);
    if (running == 1 && ask_stop(node_dir, out, verbose) != 0) {
        fprintf(out, "gsrun: node agent of %s does not answer; waiting for it\n", job_dir);
    }
    if (running == 1) {
        gs_task_wait_agent(node_dir, GS_PROTO_QUIT_TIMEOUT_MS + 2000);
    }
    if (agent_running(node_dir) == 1) {
        return gs_error_set(err, EBUSY,
                            "the node agent of %s did not stop within %d s; see `gsrun status`",
                            job_dir, GS_PROTO_QUIT_TIMEOUT_MS / 1000 + 2);
    }
    /* Nothing holds it now: whatever is left is a dead agent's. */
    if (keep_dir) {
        return 0; /* root removes it (its base is root's) */
    }
    if (access(job_dir, F_OK) == 0 && gs_rundir_remove(job_dir) != 0) {
        return gs_error_set(err, errno, "cannot remove %s: %s", job_dir, strerror(errno));
    }
    return 0;
}

/* Whether the node's servers begin with those the step's plan needs. */
static int servers_match(const gs_state_t *st, const gs_plan_t *plan)
{
    if (st->nservers < plan->nservers) {
        return 0;
    }
    for (int e = 0; e < plan->nservers; e++) {
        if (st->server[e].gpu != plan->server[e].gpu) {
            return 0;
        }
    }
    return 1;
}

/* "servers ..." to the job's agent; 0 on its "ok", else its error. */
static int ask_for_servers(const gs_config_t *cfg, const gs_state_t *st, const gs_plan_t *plan,
                           gs_error_t *err)
{
    char line[GS_LINE_MAX];
    int gpu[GS_MAX_GPUS];

    for (int e = 0; e < plan->nservers; e++) {
        gpu[e] = plan->server[e].gpu;
    }
    if (gs_protocol_servers_format(line, sizeof(line), plan->nservers, gpu) != 0) {
        return gs_error_set(err, E2BIG, "too many MPS servers for one request (%d)",
                            plan->nservers);
    }
    /* Starting servers takes the agent up to its start bound. */
    long n = gs_unixsock_ask(st->socket, line, line, sizeof(line),
                             gs_proc_now_ms() + (long long)cfg->timeout_s * 1000 + 5000, err);
    if (n <= 0) {
        return gs_error_set(err, EPROTO,
                            "the job's agent did not answer the request for %d MPS servers",
                            plan->nservers);
    }
    gs_text_rstrip(line, "\n");
    if (strcmp(line, "ok") != 0) {
        return gs_error_set(err, EPROTO, "the job's agent could not start %d MPS servers: %s",
                            plan->nservers, strncmp(line, "error ", 6) == 0 ? line + 6 : line);
    }
    return 0;
}

/* The task's environment from the node state (read into *stp). */
static int task_env(const gs_config_t *cfg, const char *node_dir, gs_state_t *stp, int local_rank,
                    int local_size, gs_clientenv_t *env, int *on, gs_error_t *err)
{
    gs_plan_t plan;
    int rc;

    if (access(node_dir, F_OK) != 0 || gs_state_read(node_dir, stp, err) != 0 ||
        stp->kind != GS_STATE_ON) {
        return 0; /* not provisioned, or without MPS: the task runs as it is */
    }
    /* The step's tasks over the job's GPUs (each one's first server), as
     * gsrun places them. */
    int ngpus = 0;
    for (int e = 0; e < stp->nservers; e++) {
        ngpus += stp->server[e].server == 0;
    }
    /* The setting, else what the job's agent found for the driver. */
    int limit =
        gs_policy_clients_per_server_known(cfg->clients_per_server, stp->clients_per_server);
    /* The batch job's servers are its steps' already: the user's shared
     * servers (--mps-share) play no part in a step's plan. */
    gs_config_t step_cfg = *cfg;
    step_cfg.share_node = 0;
    if ((rc = gs_policy_plan_compute(&step_cfg, local_size, ngpus, 1, "", limit, &plan, err)) !=
        0) {
        return rc;
    }
    if (!plan.use_mps) {
        return 0;
    }
    if (!servers_match(stp, &plan)) {
        /* More tasks on a GPU than the job's servers take: the job's agent
         * starts the missing ones (every task of the step asks; the first
         * request starts them, the others find them running). */
        if ((rc = ask_for_servers(cfg, stp, &plan, err)) != 0 ||
            (rc = gs_state_read(node_dir, stp, err)) != 0) {
            return rc;
        }
        if (!servers_match(stp, &plan)) {
            return gs_error_set(err, E2BIG,
                                "%d tasks of this step on this node need %d MPS servers (%d "
                                "clients each); the job's agent runs %d that do not fit them",
                                local_size, plan.nservers, limit, stp->nservers);
        }
    }
    gs_state_from_plan(stp, &plan); /* the servers' UUIDs and dirs stay the agent's */
    if ((rc = gs_clientenv_build(stp, -1, local_rank, local_size, cfg, env, err)) != 0) {
        return rc;
    }
    *on = 1;
    return 0;
}

int gs_provision_task_env(const gs_config_t *cfg, const char *job_dir, int local_rank,
                          int local_size, gs_clientenv_t *env, int *on, gs_error_t *err)
{
    char node_dir[600];
    int rc;

    *on = 0;
    memset(env, 0, sizeof(*env));
    if ((rc = gs_node_dir(job_dir, node_dir, sizeof(node_dir), err)) != 0) {
        return rc;
    }
    gs_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return gs_error_set(err, ENOMEM, "out of memory for the node state");
    }
    rc = task_env(cfg, node_dir, st, local_rank, local_size, env, on, err);
    free(st);
    return rc;
}
