/* SPDX-License-Identifier: BSD-3-Clause */
/* gs-hostd: one simulated host's init and remote shell, for the cluster tests.
 *
 *   gs-hostd serve SOCKET        PID 1 of a host (its own PID, UTS, mount and
 *                                network namespaces): reaps orphans and runs
 *                                commands sent to SOCKET
 *   gs-hostd rsh DIR HOST CMD... runs CMD on HOST (DIR/HOST.sock), as ssh does:
 *                                exits with CMD's status
 *
 * The client passes its own stdin, stdout and stderr to the host (SCM_RIGHTS),
 * so the remote command writes straight into the caller's pipes, as through an
 * ssh channel. The command runs in a new session, under /bin/sh -c, with a
 * fresh login-like environment (nothing of the caller's leaks across, as with
 * ssh). When the client goes away the command's session gets SIGHUP, as sshd
 * does when the connection drops. Killing the host's init ends every process
 * of the host (the kernel does it when a PID namespace's init dies). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CONN 256
#define MAX_CMD 65536

/* A request is the command's length with three descriptors (stdin, stdout,
 * stderr) attached, then the command. */
#define FDS_SPACE CMSG_SPACE(3 * sizeof(int))

static void init_header(struct msghdr *m, struct iovec *iov, uint32_t *len, char *cbuf)
{
    memset(m, 0, sizeof(*m));
    iov->iov_base = len;
    iov->iov_len = sizeof(*len);
    m->msg_iov = iov;
    m->msg_iovlen = 1;
    m->msg_control = cbuf;
    m->msg_controllen = FDS_SPACE;
}

static int send_request(int fd, const char *cmd)
{
    uint32_t len = (uint32_t)strlen(cmd);
    int fds[3] = {0, 1, 2};
    char cbuf[FDS_SPACE];
    struct iovec iov;
    struct msghdr m;
    init_header(&m, &iov, &len, cbuf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(c), fds, sizeof(fds));
    if (sendmsg(fd, &m, 0) != (ssize_t)sizeof(len)) {
        return -1;
    }
    return write(fd, cmd, len) == (ssize_t)len ? 0 : -1;
}

static int rsh(const char *dir, const char *host, int argc, char **argv)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char cmd[MAX_CMD] = "";
    size_t n = 0;
    int fd, status;

    for (int i = 0; i < argc; i++) {
        int w = snprintf(cmd + n, sizeof(cmd) - n, "%s%s", i ? " " : "", argv[i]);
        if (w < 0 || (size_t)w >= sizeof(cmd) - n) {
            fprintf(stderr, "gs-hostd: command too long\n");
            return 255;
        }
        n += (size_t)w;
    }
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s.sock", dir, host);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        fprintf(stderr, "gs-hostd: %s: no such host (%s: %s)\n", host, a.sun_path,
                strerror(errno));
        return 255;
    }
    if (send_request(fd, cmd) != 0) {
        fprintf(stderr, "gs-hostd: %s: cannot send the command\n", host);
        return 255;
    }
    /* The host answers with the command's wait status when it ends. */
    if (read(fd, &status, sizeof(status)) != (ssize_t)sizeof(status)) {
        fprintf(stderr, "gs-hostd: %s: connection lost\n", host);
        return 255;
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}

static int recv_request(int fd, int fds[3], char *cmd, size_t len)
{
    uint32_t n;
    char cbuf[FDS_SPACE];
    struct iovec iov;
    struct msghdr m;
    init_header(&m, &iov, &n, cbuf);
    if (recvmsg(fd, &m, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(n) || n >= len) {
        return -1;
    }
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c == NULL || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(3 * sizeof(int))) {
        return -1;
    }
    memcpy(fds, CMSG_DATA(c), 3 * sizeof(int));
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, cmd + got, n - got);
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
    }
    cmd[n] = '\0';
    return 0;
}

static pid_t run_command(int fds[3], const char *cmd)
{
    pid_t pid = fork();
    if (pid != 0) {
        return pid;
    }
    setsid();
    for (int i = 0; i < 3; i++) {
        dup2(fds[i], i);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    char *env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                   "HOME=/root", "SHELL=/bin/sh", "USER=root", "LOGNAME=root", "LANG=C.UTF-8",
                   NULL};
    if (chdir("/root") != 0 && chdir("/") != 0) {
        _exit(126);
    }
    execle("/bin/sh", "sh", "-c", cmd, (char *)NULL, env);
    _exit(127);
}

static void on_child(int sig)
{
    (void)sig; /* only wakes ppoll */
}

static int serve(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    struct {
        int fd;
        pid_t pid;
    } conn[MAX_CONN];
    int nconn = 0, lfd;
    static char cmd[MAX_CMD];
    sigset_t mask;

    /* SIGCHLD is unblocked only inside ppoll, so a child's exit always wakes it. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGCHLD, on_child);
    signal(SIGPIPE, SIG_IGN);
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    unlink(path);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 64) != 0) {
        fprintf(stderr, "gs-hostd: cannot listen on %s: %s\n", path, strerror(errno));
        return 1;
    }
    for (;;) {
        struct pollfd p[MAX_CONN + 1];
        sigset_t empty;
        int status;
        pid_t pid;

        sigemptyset(&empty);
        p[0] = (struct pollfd){nconn < MAX_CONN ? lfd : -1, POLLIN, 0};
        for (int i = 0; i < nconn; i++) {
            p[i + 1] = (struct pollfd){conn[i].fd, POLLIN, 0};
        }
        ppoll(p, (nfds_t)nconn + 1, NULL, &empty);
        /* Reap everything: our commands and the host's orphans. */
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int i = 0; i < nconn; i++) {
                if (conn[i].pid == pid) {
                    if (write(conn[i].fd, &status, sizeof(status)) < 0) {
                        /* the client is gone */
                    }
                    close(conn[i].fd);
                    conn[i] = conn[--nconn];
                    break;
                }
            }
        }
        for (int i = nconn - 1; i >= 0; i--) {
            /* Compare by descriptor: entries may have moved while reaping. */
            for (int j = 1; j <= nconn; j++) {
                if (p[j].fd == conn[i].fd && (p[j].revents & (POLLIN | POLLHUP | POLLERR))) {
                    kill(-conn[i].pid, SIGHUP); /* the client dropped the connection */
                    close(conn[i].fd);
                    conn[i] = conn[--nconn];
                    break;
                }
            }
        }
        if (p[0].revents & POLLIN) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), fds[3];
            if (fd < 0) {
                continue;
            }
            if (recv_request(fd, fds, cmd, sizeof(cmd)) != 0) {
                close(fd);
                continue;
            }
            pid = run_command(fds, cmd);
            for (int i = 0; i < 3; i++) {
                close(fds[i]);
            }
            if (pid < 0) {
                status = 127 << 8;
                if (write(fd, &status, sizeof(status)) < 0) {
                    /* the client is gone */
                }
                close(fd);
                continue;
            }
            conn[nconn].fd = fd;
            conn[nconn].pid = pid;
            nconn++;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "serve") == 0) {
        return serve(argv[2]);
    }
    if (argc >= 5 && strcmp(argv[1], "rsh") == 0) {
        return rsh(argv[2], argv[3], argc - 4, argv + 4);
    }
    fprintf(stderr, "usage: gs-hostd serve SOCKET | gs-hostd rsh DIR HOST COMMAND...\n");
    return 2;
}
