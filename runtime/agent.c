#include "gs_autoconf.h"

#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "affinity.h"
#include "gpu.h"
#include "mps.h"
#include "policy.h"
#include "proc.h"
#include "rundir.h"
#include "state.h"

typedef struct {
    int fd;        /* pidfd, or the rank's connection */
    int is_pidfd;
    pid_t pid;
    int rank;
} gs_rank_t;

typedef struct {
    const gs_agent_opts_t *o;
    char node_dir[256];
    char control[4096];
    gs_plan_t plan;
    gs_gpu_list_t gpus;
    gs_mps_daemon_t daemon[GS_MAX_GPUS];
    char pinned[GS_MAX_GPUS][96];
    int ndaemons;
    int listen_fd;
    int sig_fd;
    int watch_fd;
    gs_rank_t *ranks;
    gs_rank_t *seen;  /* every registration, for naming ranks in MPS's log */
    int nranks;       /* live entries */
    int registered;   /* ever */
    /* report */
    char report[16384];
    size_t report_len;
    int problems;
} gs_agent_t;

static void report(gs_agent_t *a, int problem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void report(gs_agent_t *a, int problem, const char *fmt, ...)
{
    va_list ap;
    size_t room = sizeof(a->report) - a->report_len;
    int n;
    if (room < 2) {
        return;
    }
    n = snprintf(a->report + a->report_len, room, "%snode %s: ", problem ? "problem: " : "",
                 a->o->node_name);
    if (n < 0 || (size_t)n >= room) {
        return;
    }
    a->report_len += (size_t)n;
    room -= (size_t)n;
    va_start(ap, fmt);
    n = vsnprintf(a->report + a->report_len, room - 1, fmt, ap);
    va_end(ap);
    if (n > 0) {
        a->report_len += (size_t)n < room - 1 ? (size_t)n : room - 2;
    }
    a->report[a->report_len++] = '\n';
    a->report[a->report_len] = '\0';
    a->problems += problem;
}

static void signal_ready(gs_agent_t *a, const char *word)
{
    if (a->o->ready_fd >= 0) {
        if (write(a->o->ready_fd, word, strlen(word)) < 0) {
            /* The leader is gone; the state file still tells the others. */
        }
        close(a->o->ready_fd);
        ((gs_agent_opts_t *)a->o)->ready_fd = -1;
    }
}

static void publish(gs_agent_t *a, gs_state_t *st)
{
    gs_error_t err;
    if (gs_state_write(a->node_dir, st, &err) != 0) {
        report(a, 1, "%s", err.text);
    }
}

/* Publishes a state without MPS: off (with or without a notice the node
 * leader prints) or an error (exit code for the ranks). */
static void publish_without_mps(gs_agent_t *a, gs_state_kind_t kind, int notice, int code,
                                const char *msg)
{
    static gs_state_t st;
    memset(&st, 0, sizeof(st));
    st.kind = kind;
    st.notice = notice;
    st.exit_code = code;
    snprintf(st.message, sizeof(st.message), "%s", msg);
    publish(a, &st);
    /* The node leader prints it at once; the report keeps it for -v. */
    report(a, 0, "%s%s", kind == GS_STATE_OFF ? "MPS off: " : "", msg);
}

static void publish_error(gs_agent_t *a, int code, const char *msg)
{
    publish_without_mps(a, GS_STATE_ERROR, 0, code, msg);
}

static void publish_off(gs_agent_t *a, int notice, const char *msg)
{
    publish_without_mps(a, GS_STATE_OFF, notice, 0, msg);
}

static int rank_in_line(const gs_agent_t *a, const char *line);

static void stop_daemons(gs_agent_t *a)
{
    for (int g = 0; g < a->ndaemons; g++) {
        gs_mps_daemon_t *d = &a->daemon[g];
        char note[512];
        long long t0 = gs_now_ms();
        int was_running = d->daemon_pid > 0;
        int esc = gs_mps_stop(d, a->control, GS_AGENT_QUIT_TIMEOUT_MS, note, sizeof(note));
        if (esc) {
            report(a, 1, "GPU %d (%s): %s", g, d->uuid, note);
        } else if (was_running) {
            report(a, 0, "GPU %d: MPS shut down in %lld ms", g, gs_now_ms() - t0);
        }
        /* What MPS itself logged as errors, for the user to see. In the
         * foreground the daemon prints its and its server's log lines to
         * control.out; read the log files only where that is empty. */
        static const char *const out_only[] = {"control.out", NULL};
        static const char *const files[] = {"server.log", "control.log", NULL};
        char probe[4200];
        struct stat sb;
        snprintf(probe, sizeof(probe), "%s/control.out", d->log_dir);
        const char *const *logs = stat(probe, &sb) == 0 && sb.st_size > 0 ? out_only : files;
        for (const char *const *f = logs; *f != NULL; f++) {
            char lines[8][256];
            int n = gs_mps_scan_log(d->log_dir, *f, lines, 8);
            for (int i = 0; i < n; i++) {
                int r = rank_in_line(a, lines[i]);
                if (r >= 0) {
                    report(a, 1, "GPU %d: local rank %d: %s: %s", g, r, *f, lines[i]);
                } else {
                    report(a, 1, "GPU %d: %s: %s", g, *f, lines[i]);
                }
            }
        }
        gs_rundir_remove(d->pipe_dir);
        gs_rundir_remove(d->log_dir);
    }
    a->ndaemons = 0;
}

/* Starts MPS on every GPU of the plan. On failure stops what it started. */
static int start_daemons(gs_agent_t *a, gs_error_t *err)
{
    long long deadline = gs_now_ms() + (long long)a->o->cfg.timeout_s * 1000;
    int rc = 0;

    for (int g = 0; g < a->plan.ngpus; g++) {
        gs_mps_daemon_t *d = &a->daemon[g];
        const gs_gpu_t *gpu = &a->gpus.gpu[g];
        cpu_set_t cpus;

        memset(d, 0, sizeof(*d));
        d->gpu = g;
        snprintf(d->uuid, sizeof(d->uuid), "%s", gpu->uuid);
        if ((size_t)snprintf(d->pipe_dir, sizeof(d->pipe_dir), "%s/g%d", a->node_dir, g) >=
                sizeof(d->pipe_dir) ||
            !gs_rundir_socket_fits(d->pipe_dir)) {
            rc = gs_error_set(err, ENAMETOOLONG,
                              "MPS socket directory '%s' is too long for a unix socket (108 "
                              "bytes); set TMPDIR to a shorter directory",
                              d->pipe_dir);
            break;
        }
        snprintf(d->log_dir, sizeof(d->log_dir), "%s/g%d.log", a->node_dir, g);
        if ((rc = gs_rundir_ensure(d->pipe_dir, err)) != 0 ||
            (rc = gs_rundir_ensure(d->log_dir, err)) != 0) {
            break;
        }
        int pin = gs_affinity_pick_core(gpu->have_cpumask ? gpu->cpumask : NULL,
                                        GS_GPU_CPUMASK_WORDS, &cpus, a->pinned[g],
                                        sizeof(a->pinned[g]));
        a->ndaemons = g + 1;
        rc = gs_mps_spawn(d, a->control, pin == 0 || pin == -ENOENT ? &cpus : NULL, err);
        if (rc != 0) {
            break;
        }
    }
    /* All daemons start in parallel; now wait for each to serve. */
    for (int g = 0; rc == 0 && g < a->ndaemons; g++) {
        gs_mps_daemon_t *d = &a->daemon[g];
        rc = gs_mps_wait_socket(d, deadline, err);
        if (rc == 0) {
            rc = gs_mps_start_server(d, a->control, getuid(), deadline, err);
        }
        if (rc != 0) {
            char why[GS_ERROR_LEN];
            snprintf(why, sizeof(why), "GPU %d (%s): %s", g, d->uuid, err->text);
            snprintf(err->text, sizeof(err->text), "%s", why);
        }
    }
    if (rc != 0) {
        stop_daemons(a);
    }
    return rc;
}

static int open_listener(gs_agent_t *a, char *path, size_t len, gs_error_t *err)
{
    struct sockaddr_un addr;
    int fd;

    if ((size_t)snprintf(path, len, "%s/%s", a->node_dir, GS_AGENT_SOCKET) >= len ||
        strlen(path) >= sizeof(addr.sun_path)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "agent socket path '%s' is too long; set TMPDIR to a shorter "
                            "directory",
                            path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return gs_error_set(err, errno, "socket: %s", strerror(errno));
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    unlink(path);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return gs_error_set(err, e, "cannot listen on '%s': %s", path, strerror(e));
    }
    a->listen_fd = fd;
    return 0;
}

/* One registration: "hello <local rank>\n" from a shim about to exec. */
static void accept_rank(gs_agent_t *a)
{
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    char buf[64];
    int fd, rank = -1;
    long n;

    fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != getuid()) {
        /* The node dir is 0700, so this cannot be another user's rank. */
        close(fd);
        return;
    }
    n = gs_read_all(fd, buf, sizeof(buf), gs_now_ms() + 2000);
    if (n <= 0 || sscanf(buf, "hello %d", &rank) != 1 || rank < 0 || rank >= a->o->local_size) {
        dprintf(fd, "error bad registration\n");
        close(fd);
        return;
    }
    gs_rank_t *r = &a->ranks[a->nranks];
    r->pid = cred.pid;
    r->rank = rank;
    r->fd = gs_proc_pidfd_open(cred.pid);
    if (r->fd >= 0) {
        /* The pidfd tracks the process itself; the connection can go. */
        r->is_pidfd = 1;
        dprintf(fd, "ok pidfd\n");
        close(fd);
    } else {
        /* No pidfd: the rank keeps this connection across exec, and the
         * kernel closes it when the rank exits, even on SIGKILL. */
        r->is_pidfd = 0;
        r->fd = fd;
        dprintf(fd, "ok socket\n");
    }
    if (a->registered < a->o->local_size) {
        a->seen[a->registered] = *r;
    }
    a->nranks++;
    a->registered++;
}

/* "... {PID: 5480, ..." in an MPS log line: which local rank that was. */
static int rank_in_line(const gs_agent_t *a, const char *line)
{
    const char *p = strstr(line, "PID: ");
    if (p == NULL || a->seen == NULL) {
        return -1;
    }
    pid_t pid = (pid_t)atoi(p + 5);
    for (int i = 0; i < a->registered && i < a->o->local_size; i++) {
        if (a->seen[i].pid == pid) {
            return a->seen[i].rank;
        }
    }
    return -1;
}

static void drop_rank(gs_agent_t *a, int i)
{
    close(a->ranks[i].fd);
    a->ranks[i] = a->ranks[a->nranks - 1];
    a->nranks--;
}

static void note_child_exits(gs_agent_t *a)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (int g = 0; g < a->ndaemons; g++) {
            gs_mps_daemon_t *d = &a->daemon[g];
            if (d->daemon_pid == pid) {
                d->daemon_reaped = 1;
                d->daemon_status = st;
                d->daemon_pid = 0;
                report(a, 1,
                       "GPU %d (%s): the MPS control daemon exited while the job ran (%s %d); "
                       "ranks on this GPU lost MPS",
                       g, d->uuid, WIFSIGNALED(st) ? "signal" : "status",
                       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            }
        }
    }
}

/* Serves registrations until the job is over on this node. */
static void serve(gs_agent_t *a)
{
    int nfds = 3 + a->o->local_size;
    struct pollfd *p = calloc((size_t)nfds, sizeof(*p));
    long long last_change = gs_now_ms();
    const char *why = NULL;

    while (p != NULL && why == NULL) {
        int k = 0, timeout = -1;
        p[k++] = (struct pollfd){a->sig_fd, POLLIN, 0};
        p[k++] = (struct pollfd){a->registered < a->o->local_size ? a->listen_fd : -1, POLLIN, 0};
        p[k++] = (struct pollfd){a->watch_fd, POLLIN, 0};
        for (int i = 0; i < a->nranks; i++) {
            p[k++] = (struct pollfd){a->ranks[i].fd, POLLIN, 0};
        }
        if (a->watch_fd < 0 && a->o->watch_pid > 1) {
            timeout = 1000; /* no pidfd for the launcher: look every second */
        }
        if (a->nranks == 0 && a->registered < a->o->local_size) {
            timeout = 1000; /* ranks still expected: a bound on waiting for them */
        }
        if (poll(p, (nfds_t)k, timeout) < 0 && errno != EINTR) {
            why = "poll failed";
            break;
        }
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGCHLD) {
                    note_child_exits(a);
                } else {
                    why = "the agent was told to stop";
                }
            }
        }
        if (p[1].revents & POLLIN) {
            accept_rank(a);
            last_change = gs_now_ms();
        }
        if ((p[2].revents & (POLLIN | POLLHUP)) ||
            (a->watch_fd < 0 && a->o->watch_pid > 1 && !gs_proc_alive(a->o->watch_pid, -1))) {
            why = "the launcher exited";
        }
        for (int i = a->nranks - 1, j = k - 1; i >= 0; i--, j--) {
            if (p[j].revents & (POLLIN | POLLHUP | POLLERR)) {
                drop_rank(a, i);
                last_change = gs_now_ms();
            }
        }
        if (a->nranks == 0 && a->registered >= a->o->local_size) {
            why = "every rank has exited";
        } else if (a->nranks == 0 &&
                   gs_now_ms() - last_change > (long long)a->o->cfg.timeout_s * 1000 * 2) {
            /* Some ranks never registered (their shim failed) and the rest are
             * gone: keeping MPS up would serve nobody. */
            why = "no rank left and the missing ones never registered";
        }
    }
    free(p);
    report(a, 0, "served %d of %d ranks; stopping MPS: %s", a->registered, a->o->local_size,
           why ? why : "error");
}

/* With MPS off the ranks still read the state file; it stays until the
 * launcher, and with it every rank of this node, is gone. */
static void wait_for_launcher(gs_agent_t *a)
{
    pid_t pid = a->o->watch_pid;
    int fd;
    if (pid <= 1) {
        return;
    }
    fd = gs_proc_pidfd_open(pid);
    while (gs_proc_alive(pid, fd)) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {a->sig_fd, POLLIN, 0}};
        if (fd < 0) {
            p[0].fd = -1;
        }
        if (poll(p, 2, fd >= 0 ? -1 : 1000) > 0 && (p[1].revents & POLLIN)) {
            struct signalfd_siginfo si;
            int stop = 0;
            while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
                stop |= si.ssi_signo != SIGCHLD;
            }
            if (stop) {
                break;
            }
        }
    }
    if (fd >= 0) {
        close(fd);
    }
}

static void write_report(gs_agent_t *a)
{
    char path[512], tmp[520];
    int fd;
    snprintf(path, sizeof(path), "%s/%s.report", a->o->job_dir, a->o->node_name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return;
    }
    dprintf(fd, "gsrun-report problems=%d\n%s", a->problems, a->report);
    close(fd);
    rename(tmp, path);
}

/* The agent must not hold the rank's stdout/stderr (mpirun waits for them
 * to close) nor any other descriptor it inherited. */
static void close_from(int first, int last)
{
    if (first > last) {
        return;
    }
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, (unsigned)last, 0) == 0) {
        return;
    }
#endif
    for (int fd = first; fd <= last; fd++) {
        close(fd);
    }
}

static void detach_stdio(int keep)
{
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        if (devnull > 2) {
            close(devnull);
        }
    }
    if (keep >= 3) {
        close_from(3, keep - 1);
        close_from(keep + 1, 65535);
    } else {
        close_from(3, 65535);
    }
}

int gs_agent_main(const gs_agent_opts_t *o)
{
    static gs_agent_t agent;
    gs_agent_t *a = &agent;
    gs_error_t err;
    sigset_t mask;
    int lockfd = -1, rc, code = 0;
    char sock[256];
    char ctl_err[GS_ERROR_LEN] = "";
    int have_control;

    long long t_start = gs_now_ms();
    memset(a, 0, sizeof(*a));
    a->o = o;
    a->listen_fd = a->sig_fd = a->watch_fd = -1;
    detach_stdio(o->ready_fd);
    snprintf(a->node_dir, sizeof(a->node_dir), "%s/%s", o->job_dir, o->node_name);

    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    a->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

    /* gsrun takes this lock after the job to know the agent has finished. */
    lockfd = open(a->node_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (lockfd < 0 || flock(lockfd, LOCK_EX) != 0) {
        publish_error(a, GS_EXIT_RUNDIR, "cannot lock the node directory");
        signal_ready(a, "error\n");
        return GS_EXIT_RUNDIR;
    }

    rc = gs_gpu_discover(&a->gpus, &err);
    if (rc == 0) {
        rc = gs_gpu_filter_visible(&a->gpus, getenv("CUDA_VISIBLE_DEVICES"), &err);
    }
    if (rc != 0) {
        snprintf(a->gpus.reason, sizeof(a->gpus.reason), "%s", err.text);
        a->gpus.count = 0;
    }
    have_control = gs_config_find_executable(o->cfg.control, GS_CONTROL_SEARCH_DIRS,
                                             "MPS control program", a->control,
                                             sizeof(a->control), &err) == 0;
    if (!have_control) {
        snprintf(ctl_err, sizeof(ctl_err), "%s", err.text);
    }
    rc = gs_plan_compute(&o->cfg, o->local_size, a->gpus.count, have_control, ctl_err, &a->plan,
                         &err);
    if (rc != 0) {
        code = GS_EXIT_UNAVAILABLE;
        publish_error(a, code, err.text);
        signal_ready(a, "error\n");
        goto idle;
    }
    if (!a->plan.use_mps) {
        if (a->gpus.count == 0 && o->cfg.mps != GS_MPS_OFF) {
            char msg[600];
            snprintf(msg, sizeof(msg), "no NVIDIA GPU found on this node (%s); running without MPS",
                     a->gpus.reason);
            publish_off(a, 1, msg);
        } else {
            publish_off(a, a->plan.notice, a->plan.reason);
        }
        signal_ready(a, "ok\n");
        goto idle;
    }

    rc = start_daemons(a, &err);
    if (rc != 0) {
        if (o->cfg.mps == GS_MPS_AUTO) {
            char msg[700];
            snprintf(msg, sizeof(msg), "MPS could not start: %s; running without MPS", err.text);
            publish_off(a, 1, msg);
            signal_ready(a, "ok\n");
        } else {
            code = GS_EXIT_SETUP;
            publish_error(a, code, err.text);
            signal_ready(a, "error\n");
        }
        goto idle;
    }

    a->ranks = calloc((size_t)o->local_size, sizeof(*a->ranks));
    a->seen = calloc((size_t)o->local_size, sizeof(*a->seen));
    if (a->ranks == NULL || a->seen == NULL || open_listener(a, sock, sizeof(sock), &err) != 0) {
        stop_daemons(a);
        code = GS_EXIT_SETUP;
        publish_error(a, code, a->ranks ? err.text : "out of memory");
        signal_ready(a, "error\n");
        goto idle;
    }
    if (o->watch_pid > 1) {
        a->watch_fd = gs_proc_pidfd_open(o->watch_pid);
    }

    {
        static gs_state_t st;
        memset(&st, 0, sizeof(st));
        st.kind = GS_STATE_ON;
        snprintf(st.socket, sizeof(st.socket), "%s", sock);
        st.ngpus = a->plan.ngpus;
        for (int g = 0; g < a->plan.ngpus; g++) {
            const gs_gpu_share_t *s = &a->plan.gpu[g];
            gs_state_gpu_t *sg = &st.gpu[g];
            sg->first_rank = s->first_rank;
            sg->nranks = s->nranks;
            sg->pct_set = s->pct_set;
            if (s->pct_set) {
                gs_policy_format_percentage(s->pct, sg->pct, sizeof(sg->pct));
            }
            snprintf(sg->uuid, sizeof(sg->uuid), "%s", a->daemon[g].uuid);
            snprintf(sg->pipe_dir, sizeof(sg->pipe_dir), "%s", a->daemon[g].pipe_dir);
            snprintf(sg->log_dir, sizeof(sg->log_dir), "%s", a->daemon[g].log_dir);
        }
        publish(a, &st);
        signal_ready(a, "ok\n");
        report(a, 0, "MPS ready for the ranks %lld ms after the agent started",
               gs_now_ms() - t_start);
        /* The ranks are on their way; now record the servers (for teardown)
         * and confirm that each daemon runs one. */
        for (int g = 0; g < a->plan.ngpus; g++) {
            const gs_gpu_share_t *s = &a->plan.gpu[g];
            gs_mps_daemon_t *d = &a->daemon[g];
            if (gs_mps_record_servers(d, a->control, GS_AGENT_QUIT_TIMEOUT_MS, &err) != 0) {
                report(a, 1, "GPU %d (%s): %s", g, d->uuid, err.text);
            }
            report(a, 0,
                   "GPU %d (%s, %s): MPS control daemon %d on %s, server %d, ranks %d-%d at %s%%, "
                   "ready in %lld ms",
                   g, a->gpus.gpu[g].name, d->uuid, (int)d->daemon_pid, a->pinned[g],
                   (int)d->server_pid[0], s->first_rank, s->first_rank + s->nranks - 1,
                   s->pct_set ? st.gpu[g].pct : "100 (unset)", d->ready_ms - d->start_ms);
        }
    }

    serve(a);
    stop_daemons(a);
    goto out;

idle:
    wait_for_launcher(a);
out:
    if (a->listen_fd >= 0) {
        close(a->listen_fd);
    }
    free(a->ranks);
    free(a->seen);
    write_report(a);
    /* The node dir goes last, while we still hold its lock. */
    gs_rundir_remove(a->node_dir);
    if (o->gsrun_pid > 1 && !gs_proc_alive(o->gsrun_pid, -1)) {
        /* gsrun is gone (killed): nobody will read the report or remove the
         * job dir, so the last agent out does. */
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.report", o->job_dir, o->node_name);
        unlink(path);
        snprintf(path, sizeof(path), "%s/owner", o->job_dir);
        unlink(path);
        rmdir(o->job_dir);
    }
    if (lockfd >= 0) {
        close(lockfd);
    }
    return code;
}
