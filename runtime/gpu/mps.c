/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/gpu/mps.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/core/text.h"
#include "runtime/core/limits.h"

/* Variables a daemon must not inherit: the user's own MPS settings would
 * point it at another daemon's directories or GPUs. */
static const char *const strip_vars[] = {"CUDA_MPS_", "CUDA_VISIBLE_DEVICES=", NULL};

int gs_mps_validate_command(const char *cmd)
{
    if (cmd == NULL || *cmd == '\0' || strlen(cmd) > 200) {
        return -EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)cmd; *p != '\0'; p++) {
        if (*p < 0x20 || *p > 0x7e) {
            return -EINVAL;
        }
    }
    return 0;
}

static void child_reset_signals(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++) {
        signal(s, SIG_DFL);
    }
}

int gs_mps_spawn(gs_mps_daemon_t *d, const char *control, const cpu_set_t *cpus,
                 gs_error_t *err)
{
    char e_pipe[GS_PATH_MAX], e_log[GS_PATH_MAX], e_cvd[128], outpath[GS_PATH_MAX];
    const char *set[] = {e_pipe, e_log, e_cvd, NULL};
    char **env;
    int outfd;
    pid_t pid, parent = getpid();

    snprintf(e_pipe, sizeof(e_pipe), "CUDA_MPS_PIPE_DIRECTORY=%s", d->pipe_dir);
    snprintf(e_log, sizeof(e_log), "CUDA_MPS_LOG_DIRECTORY=%s", d->log_dir);
    snprintf(e_cvd, sizeof(e_cvd), "CUDA_VISIBLE_DEVICES=%s", d->uuid);
    gs_mps_out_path(d, outpath, sizeof(outpath));

    env = gs_proc_env_build(strip_vars, set);
    if (env == NULL) {
        return gs_error_set(err, ENOMEM, "out of memory");
    }
    outfd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (outfd < 0) {
        int e = errno;
        gs_proc_env_free(env);
        return gs_error_set(err, e, "cannot create '%s': %s", outpath, strerror(e));
    }
    pid = fork();
    if (pid < 0) {
        int e = errno;
        gs_proc_env_free(env);
        close(outfd);
        return gs_error_set(err, e, "cannot fork the MPS control daemon: %s", strerror(e));
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        /* If the agent dies (even by SIGKILL) the daemon must not outlive it. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) {
            _exit(1);
        }
        child_reset_signals();
        if (devnull >= 0) {
            dup2(devnull, 0);
        }
        dup2(outfd, 1);
        dup2(outfd, 2);
        if (cpus != NULL) {
            sched_setaffinity(0, sizeof(*cpus), cpus);
        }
        execve(control, (char *const[]){(char *)control, "-f", NULL}, env);
        dprintf(2, "gsrun-agent: cannot run '%s': %s\n", control, strerror(errno));
        _exit(127);
    }
    gs_proc_env_free(env);
    close(outfd);
    d->daemon_pid = pid;
    d->daemon_reaped = 0;
    d->start_ms = gs_proc_now_ms();
    return 0;
}

int gs_mps_daemon_exited(gs_mps_daemon_t *d)
{
    int st;
    if (d->daemon_reaped) {
        return 1;
    }
    if (d->daemon_pid > 0 && waitpid(d->daemon_pid, &st, WNOHANG) == d->daemon_pid) {
        d->daemon_reaped = 1;
        d->daemon_status = st;
        return 1;
    }
    return 0;
}

static void describe_exit(int st, char *buf, size_t len)
{
    if (WIFEXITED(st)) {
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
    } else if (WIFSIGNALED(st)) {
        snprintf(buf, len, "was killed by signal %d", WTERMSIG(st));
    } else {
        snprintf(buf, len, "stopped");
    }
}

/* The last line the daemon printed, for error messages. */
static void last_output(const gs_mps_daemon_t *d, char *buf, size_t len)
{
    char path[GS_PATH_MAX], text[GS_LINE_MAX];
    int fd;
    long n;
    buf[0] = '\0';
    gs_mps_out_path(d, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return;
    }
    n = gs_proc_read_all(fd, text, sizeof(text), gs_proc_now_ms() + GS_WAIT_OWN_FILE_MS);
    close(fd);
    n = n > 0 ? (long)gs_text_rstrip(text, "\n ") : 0;
    if (n > 0) {
        const char *nl = strrchr(text, '\n');
        snprintf(buf, len, ": %s", nl ? nl + 1 : text);
    }
}

int gs_mps_socket_ready(gs_mps_daemon_t *d, long long deadline_ms, gs_error_t *err)
{
    char path[GS_PATH_MAX], why[64], out[300];
    struct stat st;

    snprintf(path, sizeof(path), "%s/control", d->pipe_dir);
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        return 1;
    }
    if (gs_mps_daemon_exited(d)) {
        describe_exit(d->daemon_status, why, sizeof(why));
        last_output(d, out, sizeof(out));
        return gs_error_set(err, ECHILD, "the MPS control daemon %s before it was ready%s", why,
                            out);
    }
    if (gs_proc_now_ms() >= deadline_ms) {
        return gs_error_set(err, ETIMEDOUT,
                            "the MPS control daemon did not create its socket '%s' in time "
                            "(raise --mps-timeout if the node is very slow)",
                            path);
    }
    return 0;
}

int gs_mps_wait_socket(gs_mps_daemon_t *d, long long deadline_ms, gs_error_t *err)
{
    int rc, wait_ms = 1;
    /* Looked for every 1 to 2 ms (the socket comes 17-45 ms after the spawn
     * on an H100, every ms of it on the way to MPS being ready), which also
     * notices the daemon exiting (its death is no file-system event); not
     * through inotify, whose closing waits for an RCU grace period (18 ms
     * measured). */
    while ((rc = gs_mps_socket_ready(d, deadline_ms, err)) == 0) {
        poll(NULL, 0, wait_ms);
        wait_ms = 2;
    }
    return rc < 0 ? rc : 0;
}

/* The control program in client mode, with a clean environment naming only
 * the daemon's pipe dir, given cmd on its standard input. 0 with *pid and
 * *out (its output's read end), or a negative errno; nothing left open then. */
static int client_spawn(const char *control, const char *pipe_dir, const char *cmd, pid_t *pid,
                        int *out, gs_error_t *err)
{
    char e_pipe[GS_PATH_MAX], line[256];
    const char *set[] = {e_pipe, NULL};
    int in[2] = {-1, -1}, outp[2] = {-1, -1}, rc = 0;
    char **env = NULL;

    snprintf(e_pipe, sizeof(e_pipe), "CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir);
    env = gs_proc_env_build(strip_vars, set);
    if (env == NULL || pipe2(in, O_CLOEXEC) != 0 || pipe2(outp, O_CLOEXEC) != 0) {
        rc = gs_error_set(err, errno ? errno : ENOMEM, "cannot prepare an MPS control command");
        goto out;
    }
    *pid = fork();
    if (*pid < 0) {
        rc = gs_error_set(err, errno, "cannot fork: %s", strerror(errno));
        goto out;
    }
    if (*pid == 0) {
        child_reset_signals();
        dup2(in[0], 0);
        dup2(outp[1], 1);
        dup2(outp[1], 2);
        execve(control, (char *const[]){(char *)control, NULL}, env);
        _exit(127);
    }
    snprintf(line, sizeof(line), "%s\n", cmd);
    /* A pipe holds far more than one command line: this write cannot block. */
    if (write(in[1], line, strlen(line)) < 0) {
        /* The client exited early; its reply says why. */
    }
    *out = outp[0];
    outp[0] = -1;
out:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) {
            close(in[i]);
        }
        if (outp[i] >= 0) {
            close(outp[i]);
        }
    }
    gs_proc_env_free(env);
    return rc;
}

/* The client's answer and end, bounded by deadline: 0, or a negative errno
 * with err naming the command (a client past its time is killed). */
static int client_reply(pid_t pid, int out, const char *cmd, char *reply, size_t replylen,
                        long long deadline, int timeout_ms, gs_error_t *err)
{
    int st = 0;
    if (gs_proc_read_all(out, reply, replylen, deadline) < 0) {
        kill(pid, SIGKILL);
        gs_proc_wait(pid, GS_WAIT_CHILD_EXIT_MS, NULL);
        return gs_error_set(err, ETIMEDOUT, "MPS control command '%s' got no answer within %d ms",
                            cmd, timeout_ms);
    }
    long long left = deadline - gs_proc_now_ms();
    if (gs_proc_wait(pid, left > 0 ? (int)left : 0, &st) != 0) {
        kill(pid, SIGKILL);
        gs_proc_wait(pid, GS_WAIT_CHILD_EXIT_MS, NULL);
        return gs_error_set(err, ETIMEDOUT,
                            "MPS control command '%s' did not finish within %d ms", cmd,
                            timeout_ms);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        size_t n = gs_text_rstrip(reply, "\n");
        return gs_error_set(err, EIO, "MPS control command '%s' failed (status %d)%s%s", cmd,
                            WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), n ? ": " : "",
                            reply);
    }
    return 0;
}

int gs_mps_command(const char *control, const char *pipe_dir, const char *cmd, char *reply,
                   size_t replylen, int timeout_ms, gs_error_t *err)
{
    char scratch[64];
    long long deadline = gs_proc_now_ms() + timeout_ms;
    pid_t pid;
    int out, rc;

    if (reply == NULL || replylen == 0) {
        reply = scratch;
        replylen = sizeof(scratch);
    }
    reply[0] = '\0';
    if (gs_mps_validate_command(cmd) != 0) {
        return gs_error_set(err, EINVAL, "refusing a malformed MPS control command");
    }
    if ((rc = client_spawn(control, pipe_dir, cmd, &pid, &out, err)) != 0) {
        return rc;
    }
    rc = client_reply(pid, out, cmd, reply, replylen, deadline, timeout_ms, err);
    close(out);
    return rc;
}

int gs_mps_parse_server_list(const char *reply, pid_t *pids, int max)
{
    int n = 0;
    const char *p = reply;
    while (*p != '\0' && n < max) {
        char *end;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        long v = strtol(p, &end, 10);
        if (end != p && v > 1 && (*end == '\0' || *end == '\n' || *end == '\r' || *end == ' ')) {
            pids[n++] = (pid_t)v;
        }
        while (*end != '\0' && *end != '\n') {
            end++;
        }
        p = end;
    }
    return n;
}

/* The daemon's answer to cmd (by deadline) into reply. */
static int ask_by(gs_mps_daemon_t *d, const char *control, const char *cmd, char *reply, size_t len,
                  long long deadline, gs_error_t *err)
{
    long long left = deadline - gs_proc_now_ms();
    return gs_mps_command(control, d->pipe_dir, cmd, reply, len, left > 0 ? (int)left : 1, err);
}

int gs_mps_start_server(gs_mps_daemon_t *d, const char *control, uid_t uid, long long deadline_ms,
                        gs_error_t *err)
{
    char cmd[64], reply[1024];

    snprintf(cmd, sizeof(cmd), "start_server -uid %u", (unsigned)uid);
    int rc = ask_by(d, control, cmd, reply, sizeof(reply), deadline_ms, err);
    if (rc == 0) {
        d->ready_ms = gs_proc_now_ms();
    }
    return rc;
}

int gs_mps_ask_word(gs_mps_daemon_t *d, const char *control, int status, int timeout_ms,
                    gs_mps_word_t *w, gs_error_t *err)
{
    char reply[8192], cmd[64];
    pid_t servers[GS_MPS_MAX_SERVERS];
    long long deadline = gs_proc_now_ms() + timeout_ms;
    memset(w, 0, sizeof(*w));
    w->fault = status ? 0 : -1;
    int rc = ask_by(d, control, "get_server_list", reply, sizeof(reply), deadline, err);
    int ns = rc == 0 ? gs_mps_parse_server_list(reply, servers, GS_MPS_MAX_SERVERS) : 0;
    for (int i = 0; rc == 0 && i < ns; i++) {
        int faulted = 0;
        if (status && w->fault >= 0) {
            snprintf(cmd, sizeof(cmd), "get_server_status %d", (int)servers[i]);
            rc = ask_by(d, control, cmd, reply, sizeof(reply), deadline, err);
            faulted = rc == 0 && strncmp(reply, "FAULT", 5) == 0;
            if (rc == 0 && !faulted && strncmp(reply, "ACTIVE", 6) != 0) {
                w->fault = -1; /* "Unknown command": no word on faults */
            }
        }
        snprintf(cmd, sizeof(cmd), "get_client_list %d", (int)servers[i]);
        rc = rc == 0 ? ask_by(d, control, cmd, reply, sizeof(reply), deadline, err) : rc;
        if (rc != 0) {
            break;
        }
        if (faulted && w->fault != 1) {
            w->fault = 1; /* the faulted server's clients alone */
            w->nclients = 0;
        }
        if (faulted || w->fault != 1) {
            w->nclients += gs_mps_parse_server_list(reply, w->clients + w->nclients,
                                                    GS_MPS_CLIENTS_MAX - w->nclients);
        }
    }
    return rc;
}

int gs_mps_word_lists(const gs_mps_word_t *w, pid_t pid)
{
    for (int i = 0; i < w->nclients; i++) {
        if (w->clients[i] == pid) {
            return 1;
        }
    }
    return 0;
}

int gs_mps_record_servers(gs_mps_daemon_t *d, const char *control, int timeout_ms,
                          gs_error_t *err)
{
    char reply[1024];
    pid_t pids[GS_MPS_MAX_SERVERS];
    int rc, n;

    rc = gs_mps_command(control, d->pipe_dir, "get_server_list", reply, sizeof(reply), timeout_ms,
                        err);
    if (rc != 0) {
        return rc;
    }
    n = gs_mps_parse_server_list(reply, pids, GS_MPS_MAX_SERVERS);
    if (n == 0) {
        return gs_error_set(err, EIO, "the MPS control daemon lists no server after start_server");
    }
    for (int i = 0; i < d->nservers; i++) {
        if (d->server_pidfd[i] >= 0) {
            close(d->server_pidfd[i]);
        }
    }
    for (int i = 0; i < n; i++) {
        d->server_pid[i] = pids[i];
        d->server_pidfd[i] = gs_proc_pidfd_open(pids[i]);
    }
    d->nservers = n;
    return 0;
}

int gs_mps_log_line_is_error(const char *line)
{
    static const char *const words[] = {"error", "fail", "fault", "exception", "abort", NULL};
    /* The server logs every client exit as a failed receive ("... status
     * 806, assuming client {PID: n, Context ID: 1} exit"): that is normal. */
    if (strstr(line, "assuming client") != NULL) {
        return 0;
    }
    for (const char *const *w = words; *w != NULL; w++) {
        if (strcasestr(line, *w) != NULL) {
            return 1;
        }
    }
    return 0;
}

int gs_mps_scan_log(const char *log_dir, const char *file, char (*out)[256], int max)
{
    char path[GS_PATH_MAX], line[1024];
    FILE *f;
    int n = 0, fd;

    snprintf(path, sizeof(path), "%s/%s", log_dir, file);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd); /* MPS's "log" is a fifo: never block on it */
        return 0;
    }
    f = fdopen(fd, "r");
    if (f == NULL) {
        close(fd);
        return 0;
    }
    while (n < max && fgets(line, sizeof(line), f) != NULL) {
        if (gs_mps_log_line_is_error(line)) {
            gs_text_rstrip(line, "\r\n");
            snprintf(out[n++], 256, "%s", line);
        }
    }
    fclose(f);
    return n;
}

void gs_mps_out_path(const gs_mps_daemon_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "%s/" GS_MPS_CONTROL_OUT, d->log_dir);
}
