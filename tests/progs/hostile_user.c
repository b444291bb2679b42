/* SPDX-License-Identifier: BSD-3-Clause */
/* What a job's user can do to gsrun's files and sockets, for the tests
 * (tests/integration/batch_rundir.sh, exec_prefix.sh):
 *
 *   hostile_user deep DIR N        nest N directories under DIR (DIR/d/d/...), a file
 *                                  every 100 levels
 *   hostile_user wide DIR N        N entries in DIR, files and empty directories
 *   hostile_user listen PATH TEXT  listen on the unix socket PATH (replacing
 *                                  what is there) and answer every connection with
 *                                  TEXT (C escapes \e \n \r \t \\ understood), for
 *                                  at most 30 s
 *   hostile_user idle PATH N S     open N connections to PATH, send nothing, hold
 *                                  them S seconds
 *   hostile_user hello PATH LINE   send LINE and a newline, half-close, print the
 *                                  answer (5 s at most)
 *   hostile_user hold PATH N S LINE  open N connections to PATH, send LINE and a
 *                                  newline on each, read one answer line each
 *                                  (5 s at most), print how many were leases ("ok S"),
 *                                  hold them S seconds (a user's own process
 *                                  taking all of the shared agent's leases)
 *
 * Processes that try to outlive the end of their job (issue 37), each named
 * NAME (its comm, which the tests look for) and gone by itself after S
 * seconds should nothing end it:
 *   hostile_user chain NAME S FILE fork and exit in a loop, no pause between hops;
 *                                  the hop count in FILE every 256 hops (no
 *                                  process list sees a hop: each lives microseconds)
 *   hostile_user leader NAME S     a thread forks a child and both sleep while the
 *                                  main thread exits: the process reads state Z
 *   hostile_user bomb NAME N S     a fork bomb up to N processes of this user
 *                                  (RLIMIT_NPROC N); a process whose fork fails
 *                                  tries again after 1 s, so that a 2-core test
 *                                  machine (and the tests beside it) stays usable
 *
 * Built with `make check`; never installed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *what)
{
    fprintf(stderr, "hostile_user: %s: %s\n", what, strerror(errno));
    return 1;
}

static int deep(const char *dir, long n)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        return fail(dir);
    }
    for (long i = 0; i < n; i++) {
        if (mkdirat(fd, "d", 0700) != 0 && errno != EEXIST) {
            return fail("mkdirat");
        }
        int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (next < 0) {
            return fail("openat");
        }
        if (i % 100 == 0) {
            close(openat(next, "f", O_CREAT | O_WRONLY, 0600));
        }
        close(fd);
        fd = next;
    }
    close(fd);
    return 0;
}

static int wide(const char *dir, long n)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        return fail(dir);
    }
    for (long i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "e%ld", i);
        if (i % 2 ? mkdirat(fd, name, 0700) != 0 : close(openat(fd, name, O_CREAT | O_WRONLY, 0600)) != 0) {
            return fail(name);
        }
    }
    close(fd);
    return 0;
}

static int unix_addr(const char *path, struct sockaddr_un *a)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(a->sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(a->sun_path, sizeof(a->sun_path), "%s", path);
    return 0;
}

static int connect_to(const char *path)
{
    struct sockaddr_un a;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || unix_addr(path, &a) != 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

/* C escapes of the command line's TEXT. */
static size_t unescape(const char *in, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = in; *p != '\0' && n + 1 < len; p++) {
        if (*p == '\\' && p[1] != '\0') {
            p++;
            out[n++] = *p == 'e' ? 27 : *p == 'a' ? 7 : *p == 'n' ? '\n' : *p == 'r' ? '\r' : *p == 't' ? '\t' : *p;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return n;
}

static int listen_on(const char *path, const char *text)
{
    char answer[4096];
    size_t n = unescape(text, answer, sizeof(answer));
    struct sockaddr_un a;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(path);
    if (fd < 0 || unix_addr(path, &a) != 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fd, 16) != 0) {
        return fail(path);
    }
    printf("listening on %s\n", path); /* the tests wait for this line */
    fflush(stdout);
    time_t end = time(NULL) + 30;
    while (time(NULL) < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0) {
            continue;
        }
        int c = accept(fd, NULL, NULL);
        if (c >= 0) {
            char req[256]; /* what the epilog asks (stop), then the answer */
            struct pollfd r = {c, POLLIN, 0};
            if (poll(&r, 1, 2000) > 0 && read(c, req, sizeof(req)) < 0) {
                /* nothing asked: answer anyway */
            }
            if (write(c, answer, n) < 0) {
                /* the reader went away */
            }
            close(c);
        }
    }
    close(fd);
    unlink(path);
    return 0;
}

static int idle(const char *path, int n, int seconds)
{
    int opened = 0;
    for (int i = 0; i < n; i++) {
        if (connect_to(path) >= 0) { /* held open until exit */
            opened++;
        }
    }
    printf("idle: %d of %d connections open\n", opened, n);
    fflush(stdout);
    sleep((unsigned)seconds);
    return opened == n ? 0 : 1;
}

static int hello(const char *path, const char *line)
{
    char buf[1024];
    int fd = connect_to(path);
    if (fd < 0) {
        return fail(path);
    }
    if (dprintf(fd, "%s\n", line) < 0) {
        return fail("write");
    }
    shutdown(fd, SHUT_WR);
    struct pollfd p = {fd, POLLIN, 0};
    ssize_t r = poll(&p, 1, 5000) > 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    buf[r > 0 ? r : 0] = '\0';
    printf("answer: %s", r > 0 ? buf : "(none)\n");
    close(fd);
    return 0;
}

static int hold(const char *path, int n, int seconds, const char *line)
{
    int leased = 0;
    for (int i = 0; i < n; i++) {
        char buf[256];
        int fd = connect_to(path); /* held open until exit */
        if (fd < 0 || dprintf(fd, "%s\n", line) < 0) {
            continue;
        }
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r = poll(&p, 1, 5000) > 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        buf[r > 0 ? r : 0] = '\0';
        leased += strncmp(buf, "ok ", 3) == 0;
    }
    printf("hold: %d of %d leased\n", leased, n);
    fflush(stdout);
    sleep((unsigned)seconds);
    return leased == n ? 0 : 1;
}

static long long deadline_ms;

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void named(const char *name, int seconds)
{
    prctl(PR_SET_NAME, name);
    deadline_ms = now_ms() + seconds * 1000LL;
}

static int chain(const char *file)
{
    long long hops = 0;
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return fail(file);
    }
    while (now_ms() < deadline_ms) {
        if ((++hops & 255) == 0) {
            char text[32];
            int n = snprintf(text, sizeof(text), "%020lld\n", hops);
            if (pwrite(fd, text, (size_t)n, 0) != n) {
                return fail(file);
            }
        }
        pid_t next = fork();
        if (next > 0) {
            _exit(0);
        }
        if (next < 0) {
            usleep(1000);
        }
    }
    return 0;
}

static void *fork_and_sleep(void *arg)
{
    (void)arg;
    fork(); /* both, parent thread and child, sleep out the time */
    while (now_ms() < deadline_ms) {
        usleep(100000);
    }
    _exit(0);
}

static int leader(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fork_and_sleep, NULL) != 0) {
        return fail("pthread_create");
    }
    pthread_exit(NULL);
}

static int bomb(long n)
{
    struct rlimit r = {(rlim_t)n, (rlim_t)n};
    if (setrlimit(RLIMIT_NPROC, &r) != 0) {
        return fail("setrlimit");
    }
    while (now_ms() < deadline_ms) {
        if (fork() < 0) {
            sleep(1);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "chain") == 0) {
        named(argv[2], atoi(argv[3]));
        return chain(argv[4]);
    }
    if (argc == 4 && strcmp(argv[1], "leader") == 0) {
        named(argv[2], atoi(argv[3]));
        return leader();
    }
    if (argc == 5 && strcmp(argv[1], "bomb") == 0) {
        named(argv[2], atoi(argv[4]));
        return bomb(atol(argv[3]));
    }
    if (argc == 4 && strcmp(argv[1], "deep") == 0) {
        return deep(argv[2], atol(argv[3]));
    }
    if (argc == 4 && strcmp(argv[1], "wide") == 0) {
        return wide(argv[2], atol(argv[3]));
    }
    if (argc == 4 && strcmp(argv[1], "listen") == 0) {
        return listen_on(argv[2], argv[3]);
    }
    if (argc == 5 && strcmp(argv[1], "idle") == 0) {
        return idle(argv[2], atoi(argv[3]), atoi(argv[4]));
    }
    if (argc == 6 && strcmp(argv[1], "hold") == 0) {
        return hold(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
    }
    if (argc == 4 && strcmp(argv[1], "hello") == 0) {
        return hello(argv[2], argv[3]);
    }
    fprintf(stderr, "usage: see the head of tests/progs/hostile_user.c\n");
    return 2;
}
