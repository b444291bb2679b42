/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/rank/node.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/gpu/affinity.h"
#include "runtime/wire/agentcmd.h"
#include "runtime/core/proc.h"
#include "runtime/wire/protocol.h"
#include "runtime/files/ledger.h"
#include "runtime/files/rundir.h"
#include "runtime/core/unixsock.h"
#include "runtime/core/limits.h"

void gs_node_id(char *buf, size_t len)
{
    char boot[64] = "", ns[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof(boot) - 1);
        boot[n > 0 ? n : 0] = '\0';
        boot[strcspn(boot, "\n")] = '\0';
        close(fd);
    }
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    if (boot[0] == '\0') {
        gs_rundir_node_name(boot, sizeof(boot)); /* no /proc: the host name will do */
    }
    snprintf(buf, len, "%s/%s", boot, ns);
}

int gs_node_job_dir(const gs_node_req_t *req, char *out, size_t len, int *here, gs_error_t *err)
{
    char id[160];
    const char *name = strrchr(req->job_dir, '/');
    int rc;

    gs_node_id(id, sizeof(id));
    *here = req->gsrun_node == NULL || strcmp(req->gsrun_node, id) == 0;
    if (*here) {
        if ((size_t)snprintf(out, len, "%s", req->job_dir) >= len) {
            return gs_error_set(err, ENAMETOOLONG, "run directory path too long");
        }
        return 0;
    }
    /* mkdtemp's name: "gsrun." and 6 letters or digits, nothing else. */
    if (name == NULL || strncmp(name, "/gsrun.", 7) != 0 || strlen(name) != 13 ||
        strspn(name + 7, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != 6) {
        return gs_error_set(err, EINVAL, "GSRUN_JOB_DIR '%s' is not a gsrun job dir",
                            req->job_dir);
    }
    if ((rc = gs_rundir_check_parent(gs_rundir_tmpdir(), err)) != 0) {
        return rc;
    }
    if ((size_t)snprintf(out, len, "%s%s", gs_rundir_tmpdir(), name) >= len) {
        return gs_error_set(err, ENAMETOOLONG, "TMPDIR '%s' is too long", gs_rundir_tmpdir());
    }
    return 0;
}

int gs_node_dir(const char *job_dir, char *out, size_t len, gs_error_t *err)
{
    char node[64];
    gs_rundir_node_name(node, sizeof(node));
    if ((size_t)snprintf(out, len, "%s/%s", job_dir, node) >= len) {
        return gs_error_set(err, ENAMETOOLONG, "run directory path too long");
    }
    return 0;
}

/* What the agent's process runs (gs_proc_spawn_daemon, or for the early
 * agent gs_proc_spawn_child): its command line,
 * the job's environment on top of ours, gsrun-agent. */
typedef struct {
    const gs_node_req_t *req;
    const char *job_dir;
    int here;
} agent_child_t;

static void agent_child(void *ctx, int ready_w)
{
    const agent_child_t *c = ctx;
    const gs_node_req_t *req = c->req;
    static char buf[1024];
    char *argv[40];
    gs_agentcmd_t args;
    gs_agentcmd_init(&args);
    snprintf(args.job_dir, sizeof(args.job_dir), "%s", c->job_dir);
    gs_rundir_node_name(args.node_name, sizeof(args.node_name));
    args.local_size = req->local_size;
    args.watch_pid = req->launcher_pid;
    args.gsrun_pid = c->here ? req->gsrun_pid : 0;
    args.mode = req->job_long ? GS_MODE_JOB_LONG : req->early ? GS_MODE_EARLY : GS_MODE_PER_JOB;
    args.in_sequence = req->in_sequence ? 1 : 0;
    args.t0_ms = req->t0_ms;
    args.ranks_at_most = req->early ? req->ranks_at_most : 0;
    /* Passed on (F_DUPFD clears close-on-exec): the ready pipe's write
     * end; early, the launcher pipe. */
    args.ready_fd = fcntl(ready_w, F_DUPFD, 3);
    args.watch_fd = req->early ? fcntl(req->early_watch_fd, F_DUPFD, 3) : -1;
    /* The report: a file gsrun reads on its node; away from it the
     * leader's stderr (the launcher forwards it to gsrun like the job's
     * output), or rank 0's once it can be opened. A batch job's agent
     * keeps nothing of its prolog's: the batch system waits for the
     * prolog's output to close. */
    if (c->here && req->gsrun_pid > 0) {
        args.report = GS_SINK_FILE;
        /* Kept for what must be told while the job runs (a rank without
         * MPS, a GPU fault): the same open file as gsrun's stderr, so that
         * the lines land in order among the job's output. */
        args.report_fd = fcntl(2, F_DUPFD, 3);
    } else if (req->report_rank0) {
        args.report = GS_SINK_RANK0;
    } else if (req->job_long) {
        args.report = GS_SINK_NOWHERE;
    } else {
        args.report = GS_SINK_LEADER_FD;
        args.report_fd = fcntl(2, F_DUPFD, 3);
    }
    if (req->agent_env != NULL) {
        for (char *const *e = req->agent_env; *e != NULL; e++) {
            putenv(*e);
        }
    }
    gs_error_t ignored;
    /* The agent reads its settings from GSRUN_*, like the shim. */
    gs_config_export_env(req->cfg, &ignored);
    if (gs_agentcmd_to_argv(&args, req->agent_path, buf, sizeof(buf), argv, 40) == 0) {
        execv(req->agent_path, argv);
    }
    _exit(127);
}

/* How long an agent's start is waited for: its own start-up is bounded by
 * the same timeout; the margin covers GPU discovery and writing the state. */
static long long agent_wait_ms(int timeout_s)
{
    return ((long long)timeout_s + 10) * 1000;
}

/* Starts the agent as a daemon: its own session (Open MPI kills each rank's
 * process group), not a child of the rank (the program must not inherit it). */
static int spawn_agent(const gs_node_req_t *req, const char *job_dir, int here, int *ready_rd,
                       gs_error_t *err)
{
    agent_child_t c = {req, job_dir, here};
    int rc = gs_proc_spawn_daemon(agent_child, &c, ready_rd, err);
    if (rc != 0) {
        return gs_error_set(err, -rc, "cannot start the node agent: %s", strerror(-rc));
    }
    return 0;
}

/* Registers with the agent, telling it the CPUs this rank is bound to;
 * the answer names the rank's GPU in the state (it may wait until every
 * rank of the node has registered, when the agent places by locality). */
static int register_rank(const gs_state_t *st, int local_rank, int for_parent, int timeout_s,
                         int *gpu, int *generation, int *keep_fd, gs_error_t *err)
{
    char line[GS_LINE_MAX], reply[64], cpus[4096] = "";
    cpu_set_t mine;
    int by_pidfd = 0, fd = gs_unixsock_connect(st->socket, err);

    if (fd < 0) {
        return gs_error_set(err, -fd, "cannot reach the node agent at '%s': %s", st->socket,
                            strerror(-fd));
    }
    if (sched_getaffinity(0, sizeof(mine), &mine) == 0) {
        gs_affinity_cpuset_format(&mine, cpus, sizeof(cpus));
    }
    /* "parent": the rank is our parent (it inherits our CPUs, and only a
     * pidfd can follow it). */
    int len = gs_protocol_hello_format(line, sizeof(line), local_rank, cpus, for_parent);
    if (len < 0 || write(fd, line, (size_t)len) != len) {
        close(fd);
        return gs_error_set(err, EPROTO, "cannot register rank %d with the node agent", local_rank);
    }
    shutdown(fd, SHUT_WR);
    /* One line: in socket mode the agent keeps the connection open. */
    long n = gs_proc_read_line(fd, reply, sizeof(reply),
                               gs_proc_now_ms() + (long long)timeout_s * 1000 + 5000);
    if (n <= 0 || gs_protocol_answer_parse(reply, &by_pidfd, gpu, generation) != 0) {
        close(fd);
        reply[strcspn(reply, "\n")] = '\0';
        return n == -ETIMEDOUT
                   ? gs_error_set(err, ETIMEDOUT, "the node agent did not answer the registration "
                                  "of rank %d within %d s", local_rank, timeout_s + 5)
               : n <= 0 ? gs_error_set(err, EPROTO, "the node agent closed the registration of "
                                       "rank %d without an answer", local_rank)
                        : gs_error_set(err, EPROTO, "the node agent refused the registration of "
                                       "rank %d: %s", local_rank, reply);
    }
    if (!by_pidfd && for_parent) {
        close(fd);
        return gs_error_set(err, ENOSYS, "this kernel has no pidfds (Linux 5.3 or later), which "
                                         "a task prolog needs to follow its task; use the SPANK "
                                         "plugin (srun --mps) or gsrun with mpirun here");
    }
    if (!by_pidfd) {
        /* The agent tracks us through this connection: keep it across exec. */
        int flags = fcntl(fd, F_GETFD);
        fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
        *keep_fd = fd;
    } else {
        close(fd);
    }
    return 0;
}

/* Waits until the node agent has published the node state and reads it. A
 * node-wide error state comes back as a failure with the agent's message. */
static int wait_ready(const gs_node_req_t *req, const char *node_dir, int ready_rd, gs_state_t *st,
                      gs_error_t *err)
{
    long long deadline = gs_proc_now_ms() + agent_wait_ms(req->cfg->timeout_s);
    int rc = gs_state_wait(node_dir, deadline, ready_rd, err);

    if (rc == -EPIPE) {
        /* Installed and runnable: it was killed or crashed, and the hint
         * to install it would send the user the wrong way. */
        rc = access(req->agent_path, X_OK) == 0
                 ? gs_error_set(err, ECHILD,
                                "the node agent (%s) ended before it reported: it was killed or "
                                "crashed; run the job again (with -v to see its start)",
                                req->agent_path)
                 : gs_error_set(err, ECHILD,
                                "the node agent (%s) exited before it reported; check that it is "
                                "installed beside gsrun-shim",
                                req->agent_path);
        /* Tell the other ranks instead of letting them wait out the timeout. */
        gs_state_t failed;
        memset(&failed, 0, sizeof(failed));
        failed.kind = GS_STATE_ERROR;
        failed.exit_code = GS_EXIT_SETUP;
        snprintf(failed.message, sizeof(failed.message), "%s", err->text);
        gs_state_write(node_dir, &failed, NULL);
    }
    if (ready_rd >= 0) {
        close(ready_rd);
    }
    if (rc == 0) {
        rc = gs_state_read(node_dir, st, err);
    }
    if (rc != 0) {
        st->exit_code = GS_EXIT_SETUP;
        return rc;
    }
    if (st->kind == GS_STATE_ERROR) {
        return gs_error_set(err, EIO, "%s", st->message);
    }
    return 0;
}

/* The node leader, where gsrun started the agent early: the node's size. */
static int tell_size(const char *node_dir, int local_size, pid_t launcher, int timeout_s,
                     gs_error_t *err)
{
    char path[300], line[64], reply[64];
    snprintf(path, sizeof(path), "%s/%s", node_dir, GS_PROTO_SOCKET);
    if (gs_protocol_size_format(line, sizeof(line), local_size, (int)launcher) <= 0) {
        return gs_error_set(err, EINVAL, "the node's size %d does not fit a message", local_size);
    }
    /* The agent answers once its early start of MPS is done or has failed
     * (bounded by the same timeout, plus stopping what it started). */
    long n = gs_unixsock_ask(path, line, reply, sizeof(reply),
                             gs_proc_now_ms() + ((long long)timeout_s + 15) * 1000, err);
    if (n < 0 && n != -EPIPE && n != -ETIMEDOUT) {
        return gs_error_set(err, (int)-n, "cannot reach the node agent gsrun started (%s): %s",
                            path, strerror((int)-n));
    }
    if (n <= 0 || strncmp(reply, "ok", 2) != 0) {
        return gs_error_set(err, EPROTO, "the node agent gsrun started did not take the node's "
                                         "size");
    }
    return 0;
}

/* An early agent that did not report ready is made to go (asked, then
 * killed, if it still runs) and waited for with its guard (they hold the
 * node dir's lock until they have gone, and remove the dir as they go):
 * only then may the node's first rank start another one there. A late one
 * left running would take the lock, the socket or the dir from it. */
#define GS_EARLY_STOP_MS 2000

static void end_early(pid_t pid, const char *node_dir, int timeout_s)
{
    if (gs_proc_wait(pid, GS_EARLY_STOP_MS, NULL) != 0) { /* one that failed is ending */
        gs_proc_stop_child(pid, GS_EARLY_STOP_MS, NULL);
    }
    /* The guard stops what the agent had started (bounded by its TERM
     * wait for ranks, of which there are none yet). */
    int fd = gs_rundir_lock_wait(node_dir, (int)agent_wait_ms(timeout_s));
    if (fd >= 0) {
        close(fd);
    }
}

int gs_node_start_early(const gs_node_req_t *req, int *launcher_fd, gs_error_t *err)
{
    char node_dir[256], line[64];
    int ready_rd = -1, rc, w[2];
    pid_t pid = 0;
    gs_node_req_t early = *req;

    *launcher_fd = -1;
    if (pipe2(w, O_CLOEXEC) != 0) {
        return gs_error_set(err, errno, "pipe: %s", strerror(errno));
    }
    early.early = 1;
    early.early_watch_fd = w[0];
    agent_child_t c = {&early, req->job_dir, 1};
    if ((rc = gs_node_dir(req->job_dir, node_dir, sizeof(node_dir), err)) != 0 ||
        (rc = gs_rundir_ensure(node_dir, err)) != 0 ||
        (rc = gs_proc_spawn_child(agent_child, &c, &ready_rd, &pid, err)) != 0) {
        close(w[0]);
        close(w[1]);
        return rc;
    }
    close(w[0]); /* the agent has its own */
    /* Listening is the agent's first step (a few ms): then mpirun may start.
     * A loaded node may take seconds; it is waited for as long as a rank
     * waits for its agent, since giving up on a live one is no faster. */
    long n = gs_proc_read_line(ready_rd, line, sizeof(line),
                               gs_proc_now_ms() + agent_wait_ms(req->cfg->timeout_s));
    close(ready_rd);
    if (n > 0 && gs_protocol_ready_parse(line) == 0) {
        *launcher_fd = w[1];
        return 0;
    }
    close(w[1]); /* the launcher pipe: a live agent ends on its closing */
    end_early(pid, node_dir, req->cfg->timeout_s);
    if ((rc = gs_rundir_ensure(node_dir, err)) != 0) { /* its end removed it */
        return rc;
    }
    if (n == -ETIMEDOUT) {
        return gs_error_set(err, ETIMEDOUT, "the node agent did not start within %lld s (PID "
                            "%d, ended)", agent_wait_ms(req->cfg->timeout_s) / 1000, (int)pid);
    }
    return gs_error_set(err, ECHILD, "the node agent did not start (%s)",
                        n > 0 ? line : "it exited");
}

/* The job's dirs on this node, then (with agent_path) the agent, then its
 * state. */
static int reach_agent(const gs_node_req_t *req, char *node_dir, size_t len, gs_state_t *st,
                       gs_error_t *err)
{
    char job_dir[256];
    int ready_rd = -1, rc, here;

    memset(st, 0, sizeof(*st));
    if ((rc = gs_node_job_dir(req, job_dir, sizeof(job_dir), &here, err)) != 0 ||
        (rc = gs_rundir_check_usable(job_dir, err)) != 0 ||
        (rc = gs_node_dir(job_dir, node_dir, len, err)) != 0 ||
        (rc = gs_rundir_ensure(job_dir, err)) != 0 ||
        (rc = gs_rundir_ensure(node_dir, err)) != 0) {
        st->exit_code = GS_EXIT_RUNDIR;
        return rc;
    }
    if (req->agent_path != NULL && here && req->early_agent) {
        rc = tell_size(node_dir, req->local_size, req->launcher_pid, req->cfg->timeout_s, err);
    } else if (req->agent_path != NULL) {
        rc = spawn_agent(req, job_dir, here, &ready_rd, err);
    }
    if (rc != 0) {
        st->exit_code = GS_EXIT_SETUP;
        return rc;
    }
    return wait_ready(req, node_dir, ready_rd, st, err);
}

int gs_node_start(const gs_node_req_t *req, gs_state_t *st, gs_error_t *err)
{
    char node_dir[256];
    return reach_agent(req, node_dir, sizeof(node_dir), st, err);
}

int gs_node_join(const gs_node_req_t *req, gs_state_t *st, int *gpu, int *keep_fd, gs_error_t *err)
{
    char node_dir[256];
    int rc;

    *keep_fd = -1;
    *gpu = -1;
    if ((rc = reach_agent(req, node_dir, sizeof(node_dir), st, err)) != 0) {
        return rc;
    }
    /* Off or on, a rank registers where the agent listens, so that the
     * agent can end it if the launcher dies. */
    if (st->socket[0] != '\0') {
        int generation = 0;
        rc = register_rank(st, req->local_rank, req->for_parent, req->cfg->timeout_s, gpu,
                           &generation, keep_fd, err);
        /* The agent published the state again since this rank read it (the
         * user's shared MPS ended before the rank came, and the job now
         * runs servers of its own): the answer holds for the new one. */
        if (rc == 0 && generation != st->generation) {
            rc = gs_state_read(node_dir, st, err);
            rc = rc == 0 && st->kind == GS_STATE_ERROR ? gs_error_set(err, EIO, "%s", st->message)
                                                       : rc;
        }
        if (rc != 0) {
            st->exit_code =
                st->kind == GS_STATE_ERROR && st->exit_code != 0 ? st->exit_code : GS_EXIT_SETUP;
            return rc;
        }
        if (*gpu >= st->nservers) {
            *gpu = -1;
        }
    }
    /* The rank's GPU counts in the user's placement record while the rank
     * lives, even where its agent is killed with its guard (a shared flock
     * on the job's entry, kept across exec). A task prolog speaks for its
     * parent, which it cannot give a flock: none there. */
    if (st->placed[0] != '\0' && !req->for_parent) {
        gs_ledger_hold(st->placed); /* the descriptor stays open: that is the point */
    }
    return 0;
}

void gs_node_print_plan(FILE *f, const char *node, const gs_state_t *st, const char *source,
                        int verbose)
{
    if (st->kind == GS_STATE_OFF && (st->notice || verbose)) {
        fprintf(f, "gsrun: node %s: %s\n", node, st->message);
    }
    if (st->kind == GS_STATE_ON && st->notice && st->message[0] != '\0') {
        fprintf(f, "gsrun: node %s: %s\n", node, st->message);
    }
    if (st->kind == GS_STATE_ON && verbose) {
        for (int g = 0; g < st->nservers; g++) {
            const gs_state_server_t *s = &st->server[g];
            char server[48] = "";
            if (s->gpu_servers > 1) {
                snprintf(server, sizeof(server), " (server %d of %d)", s->server, s->gpu_servers);
            }
            fprintf(f, "gsrun: node %s: MPS on %s%s for %d local rank%s at %s%% (local ranks from %s)\n",
                    node, s->uuid, server, s->nranks, s->nranks == 1 ? "" : "s",
                    s->pct_set ? s->pct : "100", source);
        }
    }
}
