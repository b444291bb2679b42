/* SPDX-License-Identifier: BSD-3-Clause */
/* A CUDA program without MPI for the container tests: what a rank runs
 * inside a container image, whose files are the image's (no Open MPI there).
 * It starts CUDA as the fakes play it (tests/progs/fake_client.h), becomes
 * an MPS client where the pipe dir is there to reach, else holds a context
 * without MPS, and prints one line:
 *
 *   ct_client [--sleep MS] [options below]
 *   rank=R pid=P uid=U pipe=DIR client=ok ... | client=none | client=refused (...)
 *
 * (R: the launcher's rank, OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK, "-"
 * without one.) It holds its context MS milliseconds from its start (the
 * agent sees it), then exits 0; a refused client exits 46 as CUDA's
 * cudaErrorDevicesUnavailable. Having no MPI, one rank can end long before
 * the others (tests/integration/watch_holds.sh):
 *
 *   --start-wait MS      print "rank=R pid=P start", wait MS, then start CUDA
 *   --start-when FILE    the same, waiting until FILE exists (20 s at most)
 *   --quit-rank R        rank R prints "rank=R pid=P quit" and exits 0 at
 *                        once, before CUDA
 *   --bare-rank R        rank R starts CUDA (libcuda mapped) but makes no
 *                        context: "client=bare"
 *   --fault-rank R       rank R, once a client, faults its server (says
 *                        "fault" to the fake daemon, as rank_report
 *                        --mps-fault) when FILE of --fault-when exists
 *                        (20 s at most), at once without it
 *   --on-fault ACTION    what a client does when its server tells it of a
 *                        fault ("rank=R pid=P fault" printed first):
 *                        exit:MS  exits 0 MS ms later (the context ends);
 *                        hold     catches the error and goes on: keeps its
 *                                 context and sleeps to its --sleep's end
 *                        (default: hold)
 *   --on-fault-rank R ACTION  the same for rank R only
 *   --workers-mixed      forks 4 workers that each start CUDA and hold a
 *                        context for --sleep: 2 MPS clients, 2 contexts
 *                        without MPS; prints "rank=R pid=P workers=W,W,W,W
 *                        kinds=mps,mps,plain,plain"
 *   --until FILE         ends its hold (--sleep) early once FILE exists (so
 *                        do the workers of --workers-mixed)
 *   --big-env DIR        runs itself again (the same process: exec) with an
 *                        environment of about 2 MB: 15 variables of 128 KiB,
 *                        the current environment less CUDA_MPS_PIPE_DIRECTORY,
 *                        and last CUDA_MPS_PIPE_DIRECTORY=DIR; prints
 *                        "rank=R pid=P bigenv=BYTES vars=N" and waits 500 ms
 *                        before CUDA starts (fewer big variables when the
 *                        kernel refuses, one at least) */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/progs/fake_client.h"

extern char **environ;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long long ms)
{
    if (ms > 0) {
        struct timespec t = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&t, &t) != 0 && errno == EINTR) {
        }
    }
}

static const char *rank_of(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
    for (int i = 0; names[i] != NULL; i++) {
        if (getenv(names[i]) != NULL && getenv(names[i])[0] != '\0') {
            return getenv(names[i]);
        }
    }
    return "-";
}

static int is_rank(int r)
{
    return r >= 0 && strcmp(rank_of(), "-") != 0 && atoi(rank_of()) == r;
}

/* exit:MS -> MS; hold -> -1 */
static long long parse_action(const char *a)
{
    return strncmp(a, "exit:", 5) == 0 ? atoll(a + 5) : -1;
}

/* Runs this program again with a big environment ending in
 * CUDA_MPS_PIPE_DIRECTORY=dir; argv without --big-env. Returns only on
 * failure. */
static void big_env(const char *dir, int argc, char **argv)
{
    enum { BIG = 15, ONE = 128 * 1024 - 64 };
    size_t n = 0;
    while (environ[n] != NULL) {
        n++;
    }
    char **env = calloc(n + BIG + 3, sizeof(*env));
    char **args = calloc((size_t)argc + 2, sizeof(*args));
    char *pipe = malloc(strlen(dir) + 32);
    if (env == NULL || args == NULL || pipe == NULL) {
        return;
    }
    int k = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--big-env") == 0 && i + 1 < argc) {
            i++;
            continue;
        }
        args[k++] = argv[i];
    }
    args[k++] = "--big-env-done";
    args[k] = NULL;
    sprintf(pipe, "CUDA_MPS_PIPE_DIRECTORY=%s", dir);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) {
        return;
    }
    self[len] = '\0'; /* by its name: the process keeps its program's name */
    for (int big = BIG; big >= 1; big--) {
        size_t e = 0;
        for (int b = 0; b < big; b++) {
            char *v = malloc(ONE);
            if (v == NULL) {
                return;
            }
            int w = snprintf(v, ONE, "GS_BIG_%02d=", b);
            memset(v + w, 'x', ONE - (size_t)w - 1);
            v[ONE - 1] = '\0';
            env[e++] = v;
        }
        for (size_t i = 0; i < n; i++) {
            if (strncmp(environ[i], "CUDA_MPS_PIPE_DIRECTORY=", 24) != 0) {
                env[e++] = environ[i];
            }
        }
        env[e++] = pipe;
        env[e] = NULL;
        execve(self, args, env);
        if (errno != E2BIG) {
            perror("ct_client: execve");
            return;
        }
        for (int b = 0; b < big; b++) {
            free(env[b]);
        }
    }
}

/* One worker of --workers-mixed: a context (an MPS client when mps) held
 * until end, or until FILE until exists. */
static void worker(int mps, long long end, const char *until)
{
    char reply[256] = "";
    int fd = -1;
    cuda_start();
    if (mps && pipe_visible() && (fd = mps_client(reply, sizeof(reply))) >= 0) {
        int n = 0, g = 0;
        if (sscanf(reply, "ok %d %d", &n, &g) == 2) {
            ctx_file(g, "mps");
        }
    } else {
        ctx_file(plain_gpu(), "plain");
    }
    while (now_ms() < end && (until == NULL || access(until, F_OK) != 0)) {
        sleep_ms(end - now_ms() < 50 ? end - now_ms() : 50);
    }
    _exit(mps && fd < 0 ? 46 : 0);
}

int main(int argc, char **argv)
{
    long long t0 = now_ms(), hold_ms = 0, start_wait = 0, on_fault = -1, on_fault_r = -1;
    int quit_rank = -1, bare_rank = -1, fault_rank = -1, on_fault_rank = -1, mixed = 0;
    const char *fault_when = NULL, *big = NULL, *until = NULL, *start_when = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sleep") == 0 && i + 1 < argc) {
            hold_ms = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--start-wait") == 0 && i + 1 < argc) {
            start_wait = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--start-when") == 0 && i + 1 < argc) {
            start_when = argv[++i];
        } else if (strcmp(argv[i], "--quit-rank") == 0 && i + 1 < argc) {
            quit_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--bare-rank") == 0 && i + 1 < argc) {
            bare_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--fault-rank") == 0 && i + 1 < argc) {
            fault_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--fault-when") == 0 && i + 1 < argc) {
            fault_when = argv[++i];
        } else if (strcmp(argv[i], "--on-fault") == 0 && i + 1 < argc) {
            on_fault = parse_action(argv[++i]);
        } else if (strcmp(argv[i], "--on-fault-rank") == 0 && i + 2 < argc) {
            on_fault_rank = atoi(argv[++i]);
            on_fault_r = parse_action(argv[++i]);
        } else if (strcmp(argv[i], "--workers-mixed") == 0) {
            mixed = 1;
        } else if (strcmp(argv[i], "--until") == 0 && i + 1 < argc) {
            until = argv[++i];
        } else if (strcmp(argv[i], "--big-env") == 0 && i + 1 < argc) {
            big = argv[++i];
        } else if (strcmp(argv[i], "--big-env-done") == 0) {
            size_t bytes = 0, vars = 0;
            for (char **e = environ; *e != NULL; e++, vars++) {
                bytes += strlen(*e) + 1;
            }
            printf("rank=%s pid=%d bigenv=%zu vars=%zu\n", rank_of(), (int)getpid(), bytes, vars);
            fflush(stdout);
            start_wait = start_wait > 500 ? start_wait : 500; /* the agent reads it first */
        }
    }
    if (big != NULL) {
        big_env(big, argc, argv);
        return 45;
    }
    if (is_rank(quit_rank)) {
        printf("rank=%s pid=%d quit\n", rank_of(), (int)getpid());
        fflush(stdout);
        return 0;
    }
    if (start_wait > 0 || start_when != NULL) {
        printf("rank=%s pid=%d start\n", rank_of(), (int)getpid());
        fflush(stdout);
        sleep_ms(start_wait);
        for (int i = 0; start_when != NULL && i < 2000 && access(start_when, F_OK) != 0; i++) {
            sleep_ms(10);
        }
    }
    if (mixed) {
        pid_t w[4];
        long long end = t0 + hold_ms;
        fflush(stdout);
        for (int i = 0; i < 4; i++) {
            w[i] = fork();
            if (w[i] == 0) {
                worker(i < 2, end, until);
            }
        }
        printf("rank=%s pid=%d workers=%d,%d,%d,%d kinds=mps,mps,plain,plain\n", rank_of(),
               (int)getpid(), (int)w[0], (int)w[1], (int)w[2], (int)w[3]);
        fflush(stdout);
        int rc = 0, st;
        for (int i = 0; i < 4; i++) {
            if (w[i] > 0 && waitpid(w[i], &st, 0) == w[i] && (!WIFEXITED(st) || WEXITSTATUS(st))) {
                rc = 46;
            }
        }
        return rc;
    }
    char reply[256] = "none";
    int fd = -1;
    cuda_start();
    if (is_rank(bare_rank)) {
        snprintf(reply, sizeof(reply), "bare");
    } else if (!pipe_visible()) {
        ctx_file(plain_gpu(), "plain");
    } else if ((fd = mps_client(reply, sizeof(reply))) >= 0) {
        int n = 0, g = 0;
        if (sscanf(reply, "ok %d %d", &n, &g) == 2) {
            ctx_file(g, "mps");
        }
    } else if (fd == -2) {
        ctx_file(plain_gpu(), "plain"); /* its daemon closed on it: CUDA without MPS */
        fd = -1;
    }
    int refused = fd < 0 && strcmp(reply, "none") != 0 && strcmp(reply, "bare") != 0;
    printf("rank=%s pid=%d uid=%d pipe=%s client=%s%s\n", rank_of(), (int)getpid(), (int)getuid(),
           env("CUDA_MPS_PIPE_DIRECTORY"), refused ? "refused " : "", reply);
    fflush(stdout);
    if (fd >= 0 && is_rank(fault_rank)) {
        for (int i = 0; fault_when != NULL && i < 2000 && access(fault_when, F_OK) != 0; i++) {
            sleep_ms(10);
        }
        if (write(fd, "fault\n", 6) != 6) {
            return 47;
        }
    }
    long long then = is_rank(on_fault_rank) ? on_fault_r : on_fault;
    int faulted = 0;
    for (long long left; (left = t0 + hold_ms - now_ms()) > 0;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (until != NULL && access(until, F_OK) == 0) {
            break;
        }
        left = until != NULL && left > 50 ? 50 : left;
        if (fd < 0 || faulted) {
            sleep_ms(left);
            continue;
        }
        if (poll(&p, 1, (int)left) <= 0) {
            continue;
        }
        char said[16] = "";
        ssize_t r = read(fd, said, sizeof(said) - 1);
        if (r <= 0) {
            printf("rank=%s pid=%d server gone\n", rank_of(), (int)getpid());
            fflush(stdout);
            close(fd);
            fd = -1;
            continue;
        }
        if (strncmp(said, "fault", 5) == 0) {
            faulted = 1;
            printf("rank=%s pid=%d fault\n", rank_of(), (int)getpid());
            fflush(stdout);
            if (then >= 0) {
                sleep_ms(then);
                return 0; /* a program that ends after its error: its context with it */
            }
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    return refused ? 46 : 0;
}
