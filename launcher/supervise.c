/* SPDX-License-Identifier: BSD-3-Clause */
/* Running the launcher as gsrun's child: signal forwarding, waiting, and
 * gsrun's exit as the launcher's. */
#include "gs_autoconf.h"

#include "launcher/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"

static int sigpipe_fd[2] = {-1, -1};

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    /* Only record it: the main loop decides. A signal the terminal sent went
     * to mpirun too (same process group), so only those sent by a process
     * to gsrun itself (si_code <= 0) are forwarded. */
    unsigned char msg[2] = {(unsigned char)sig, (unsigned char)(si != NULL && si->si_code <= 0)};
    int saved = errno;
    if (write(sigpipe_fd[1], msg, sizeof(msg)) < 0) {
        /* The pipe is full: enough signals are pending already. */
    }
    errno = saved;
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, 0};

int gs_exec_launcher(const char *launcher, char **argv)
{
    execv(launcher, argv);
    fprintf(stderr, "gsrun: cannot run launcher '%s': %s\n", launcher, strerror(errno));
    return errno == ENOENT ? GS_EXIT_NOTFOUND : GS_EXIT_NOEXEC;
}

int gs_supervise(const char *launcher, char **cmd, gs_error_t *err)
{
    struct sigaction sa;
    int status = 0;
    pid_t self = getpid(), child;

    if (pipe2(sigpipe_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
        return gs_error_set(err, errno, "pipe: %s", strerror(errno));
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (const int *s = forwarded; *s != 0; s++) {
        sigaction(*s, &sa, NULL);
    }
    child = fork();
    if (child < 0) {
        return gs_error_set(err, errno, "cannot fork the launcher: %s", strerror(errno));
    }
    if (child == 0) {
        for (const int *s = forwarded; *s != 0; s++) {
            signal(*s, SIG_DFL);
        }
        signal(SIGPIPE, SIG_DFL); /* ignored by gsrun itself, not by mpirun */
        /* If gsrun is killed (SIGKILL: nothing to forward), mpirun dies too;
         * its orteds then end their ranks, and every node agent ends what is
         * left of its node. SIGKILL rather than SIGTERM: on the simulated
         * cluster the other hosts' ranks were gone 1.2 s after mpirun's
         * SIGKILL but 2.1 s after its SIGTERM (plain mpirun, 12 ranks). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != self) {
            _exit(128 + SIGKILL);
        }
        _exit(gs_exec_launcher(launcher, cmd));
    }

    /* Wait for mpirun through its pidfd (or a short poll where the kernel
     * has none), handling forwarded signals as they come. */
    int child_fd = gs_proc_pidfd_open(child);
    for (;;) {
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child) {
            break;
        }
        struct pollfd p[2] = {{sigpipe_fd[0], POLLIN, 0}, {child_fd, POLLIN, 0}};
        int pr = poll(p, child_fd >= 0 ? 2 : 1, child_fd >= 0 ? -1 : 5);
        if (pr > 0 && (p[0].revents & POLLIN)) {
            unsigned char msg[2];
            while (read(sigpipe_fd[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg)) {
                if (msg[1]) {
                    kill(child, msg[0]);
                }
            }
        }
    }
    if (child_fd >= 0) {
        close(child_fd);
    }
    return status;
}

int gs_exit_like(int status)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        signal(sig, SIG_DFL);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        raise(sig);
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
