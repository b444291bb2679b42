/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for nvidia-cuda-mps-control, for machines without a GPU.
 *
 *   -d   daemon mode (forks into the background)
 *   -f   foreground mode
 *   none client mode: sends each stdin line to the daemon, prints the reply
 *
 * Like the real one it listens on $CUDA_MPS_PIPE_DIRECTORY/control, logs to
 * $CUDA_MPS_LOG_DIRECTORY/control.log, starts one "server" process per
 * start_server, and answers quit, get_server_list, start_server -uid N,
 * get_server_status (FAULT while a fault's clients live), get_client_list
 * and the default-active-thread-percentage commands.
 *
 * Fault knobs (environment, read by the daemon):
 *   FAKE_MPS_FAIL_START=1        exit 1 at once with an error message
 *   FAKE_MPS_START_DELAY_MS=N    wait N ms before creating the socket
 *   FAKE_MPS_NO_SOCKET=1         never create the socket (never ready)
 *   FAKE_MPS_HANG_ON_QUIT=1      answer quit but keep running
 *   FAKE_MPS_IGNORE_TERM=1       ignore SIGTERM (only SIGKILL stops it)
 *   FAKE_MPS_QUIT_STATUS=N       exit N after quit
 *   FAKE_MPS_DIE_AFTER_MS=N      exit 3 N ms after start (dies mid-job)
 *   FAKE_MPS_SERVER_ERROR=TEXT   write TEXT as an error line to server.log
 *   FAKE_MPS_SERVER_CTX=1        with FAKE_NVML_CTX_DIR, the server writes its own
 *                                context there (the fake NVML lists it, 66 MiB)
 *   FAKE_MPS_SERVER_SETUP_MS=N   after start_server, answer no command for N
 *                                ms (the real daemon's silence while its new
 *                                server sets up its GPU context: ~250 ms on an
 *                                H100)
 *   FAKE_MPS_SILENT_LOG=FILE     append a line at each such silence's start
 *                                ("daemon <pid> (run by <its parent's comm>
 *                                <ppid>) silent <N> ms after start_server")
 *                                and one per command that came in it: "<sender's comm> <pid> (run by
 *                                <its parent's comm> <ppid>) waited <ms> ms:
 *                                <command>" (who was held up by it)
 *   FAKE_MPS_MUTE_FILE=FILE      while FILE.<its PID> exists, take every connection
 *                                (command or client) and never reply: a
 *                                wedged daemon that runs (not stopped)
 *   FAKE_MPS_RECORD=FILE         append one line per daemon start: pid, GPU,
 *                                pipe dir, CPU affinity, inherited MPS vars
 *   FAKE_MPS_MAX_CLIENTS=N       clients one daemon takes at once (default 48,
 *                                as the real one with a CUDA 13.0 driver)
 *   FAKE_MPS_ESCAPE=FILE         leave a process that escapes the daemon's
 *                                session: a grandchild that calls setsid and
 *                                sleeps, its PID written to FILE (what a
 *                                job's user can make its agent's children do)
 *
 * Clients: a connection that says "client <pid> [<its CUDA_VISIBLE_DEVICES>]"
 * stands for a CUDA context (tests/progs/rank_report --mps-client) and is
 * held until the client closes it; past the limit it is answered
 * "refused", as the real server refuses the 49th context
 * (cudaErrorDevicesUnavailable). The server's lines are the real ones
 * (driver 580, on an H200): "Client {PID: P, Context ID: 1} connected",
 * "Status of client {PID: P, Context ID: 1} is ACTIVE", and at its end
 * "Client process P disconnected". While its server is stopped (SIGSTOP) a
 * client gets no answer (held open, as a real client waits in CUDA's start
 * on a server that does not answer); a daemon stopped answers nothing.
 * A client whose CUDA_VISIBLE_DEVICES
 * names a device other than the server's one (0 or its UUID) is answered
 * "nodevice", after the real client's lines ("[T Client P] Client
 * requested 1 which is not a valid GPU ID in the MPS visible set of
 * devices"). The answer "ok N G" names the server's GPU G (the number at
 * the end of the fake NVML's UUID).
 *
 * A GPU fault: a held client that writes "fault" on its connection
 * (rank_report --mps-fault) faults the server as a real one does on Volta
 * and later (measured on an H200, driver 580): the daemon prints the real
 * lines on its output (control.out: "Client {PID: P, Context: 1}
 * encountered a fatal GPU error.", "Server is handling a fatal GPU
 * error.", the list of every client with a sticky error), tells every
 * held client "fault", and until the last of them has closed its
 * connection refuses new clients with 807 as the real server does
 * ("Server teardown in progress. Refusing to accept new client ...");
 * get_server_status says FAULT meanwhile, ACTIVE after. A quit in FAULT
 * waits for those clients, as the real quit does. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SERVERS 8

static char pipe_dir[4096], log_dir[4096];
static pid_t servers[MAX_SERVERS];
static int nservers;
static double default_pct = 100.0;
#define MAX_CLIENT_FDS 1024
static int client_fd[MAX_CLIENT_FDS];
static int client_pid[MAX_CLIENT_FDS];
static int nclients;
static int in_fault, quitting;

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logline(const char *file, const char *fmt, const char *arg)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", log_dir, file);
    FILE *f = fopen(path, "a");
    if (f) {
        time_t t = time(NULL);
        char ts[64];
        strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", localtime(&t));
        fprintf(f, "[%s.000 Control %d] ", ts, (int)getpid());
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        fprintf(f, fmt, arg); /* fmt is always one of this file's literals */
#pragma GCC diagnostic pop
        fputc('\n', f);
        fclose(f);
    }
}

/* A line of the server's, on the daemon's output as the real one prints
 * them in the foreground. */
static void serverline(const char *fmt, int a, int b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char t[64];
    strftime(t, sizeof(t), "%Y-%m-%d %H:%M:%S", localtime(&ts.tv_sec));
    printf("[%s.%03ld Server %5d] ", t, ts.tv_nsec / 1000000, nservers > 0 ? (int)servers[0] : 0);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    printf(fmt, a, b); /* fmt is always one of this file's literals */
#pragma GCC diagnostic pop
    printf("\n");
    fflush(stdout);
}

/* A line a client writes into its server's log (the real client's prefix). */
static void clientline(int pid, const char *text)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char t[64];
    strftime(t, sizeof(t), "%Y-%m-%d %H:%M:%S", localtime(&ts.tv_sec));
    printf("[%s.%03ld Client %5d] %s\n", t, ts.tv_nsec / 1000000, pid, text);
    fflush(stdout);
}

/* "<pid> <cvd>": whether a client with that CUDA_VISIBLE_DEVICES sees the
 * server's one device (as device 0, or by its UUID), as the real client
 * checks. */
static int device_visible(const char *rest)
{
    const char *sp = strchr(rest, ' ');
    const char *mine = env_or("CUDA_VISIBLE_DEVICES", "");
    char want[128];
    if (sp == NULL || sscanf(sp + 1, "%127s", want) != 1 || strcmp(want, "-") == 0) {
        return 1;
    }
    want[strcspn(want, ",")] = '\0';
    return strcmp(want, "0") == 0 || (mine[0] != '\0' && strncmp(mine, want, strlen(want)) == 0 &&
                                      strncmp(want, "GPU-", 4) == 0);
}

/* A client faulted: every client of the server gets a sticky error. */
static void fault(void)
{
    serverline("Client {PID: %d, Context: %d} encountered a fatal GPU error.", client_pid[0], 1);
    serverline("Server is handling a fatal GPU error.", 0, 0);
    for (int i = 0; i < nclients; i++) {
        serverline("Client {PID: %d, Context ID: %d} on device 0 to be torn down", client_pid[i], 1);
    }
    serverline("The following client process have a sticky error set:", 0, 0);
    for (int i = 0; i < nclients; i++) {
        serverline("%d", client_pid[i], 0);
    }
    for (int i = 0; i < nclients; i++) {
        if (write(client_fd[i], "fault\n", 6) < 0) {
            /* gone: its end comes on the next poll */
        }
    }
    in_fault = 1;
}

static void record_start(void)
{
    const char *rec = getenv("FAKE_MPS_RECORD");
    cpu_set_t set;
    char cpus[256] = "";
    size_t n = 0;
    if (rec == NULL) {
        return;
    }
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && n + 8 < sizeof(cpus); c++) {
            if (CPU_ISSET(c, &set)) {
                n += (size_t)snprintf(cpus + n, sizeof(cpus) - n, "%s%d", n ? "," : "", c);
            }
        }
    }
    FILE *f = fopen(rec, "a");
    if (f) {
        fprintf(f, "start pid=%d gpu=%s pipe=%s cpus=%s pct_env=%s\n", (int)getpid(),
                env_or("CUDA_VISIBLE_DEVICES", "(unset)"), pipe_dir, cpus,
                env_or("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "(unset)"));
        fclose(f);
    }
}

static void stop_servers(void)
{
    for (int i = 0; i < nservers; i++) {
        if (servers[i] > 1) {
            kill(servers[i], SIGTERM);
            waitpid(servers[i], NULL, 0);
        }
    }
    nservers = 0;
}

static void cleanup_files(void)
{
    char p[4200];
    const char *names[] = {"control", "nvidia-cuda-mps-control.pid", NULL};
    for (int i = 0; names[i]; i++) {
        snprintf(p, sizeof(p), "%s/%s", pipe_dir, names[i]);
        unlink(p);
    }
}

/* FAKE_MPS_SERVER_CTX=1 with FAKE_NVML_CTX_DIR: the server's own context,
 * for the fake NVML to list (compute listing only, 66 MiB, as a real
 * server's on an H200), on its daemon's GPU. */
static void server_ctx(void)
{
    const char *dir = getenv("FAKE_NVML_CTX_DIR"), *on = getenv("FAKE_MPS_SERVER_CTX");
    const char *uuid = env_or("CUDA_VISIBLE_DEVICES", ""), *dash = strrchr(uuid, '-');
    char path[4200];
    if (dir == NULL || on == NULL || strcmp(on, "1") != 0) {
        return;
    }
    snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%d server 66\n", dash != NULL ? atoi(dash + 1) : 0);
        fclose(f);
    }
}

static void start_server(void)
{
    pid_t pid;
    if (nservers >= MAX_SERVERS) {
        return;
    }
    pid = fork();
    if (pid == 0) {
        /* The "server": waits until told to stop, or its daemon dies. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        signal(SIGTERM, SIG_DFL);
        for (int fd = 3; fd < 1024; fd++) {
            close(fd); /* a client's connection must see EOF */
        }
        server_ctx();
        for (;;) {
            pause();
        }
    }
    if (pid > 0) {
        servers[nservers++] = pid;
        const char *err = getenv("FAKE_MPS_SERVER_ERROR");
        if (err) {
            logline("server.log", "ERROR: %s", err);
        }
        logline("server.log", "Server %s started", "");
    }
}

/* Whether process pid is stopped (SIGSTOP): a real server stopped so
 * answers no client, which waits in CUDA's start as long as it runs. */
static int stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p != NULL && (p[2] == 'T' || p[2] == 't');
}

/* Until when the daemon answers nothing (FAKE_MPS_SERVER_SETUP_MS). */
static long long silent_until;

/* The comm of a process, and its parent's PID. */
static void proc_comm(int pid, char *comm, size_t len, int *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    snprintf(comm, len, "?");
    *ppid = 0;
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (open != NULL && close != NULL && close > open) {
        snprintf(comm, len, "%.*s", (int)(close - open - 1), open + 1);
        sscanf(close + 2, "%*c %d", ppid);
    }
}

/* Says who sent a command in the silence, and for how long it waits: the
 * command line's process and the one that ran it (its parent). */
static void log_silent(int fd, long long left, const char *cmd)
{
    const char *path = getenv("FAKE_MPS_SILENT_LOG");
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (path == NULL || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
        return;
    }
    char comm[64], pcomm[64];
    int ppid, pppid;
    proc_comm((int)cr.pid, comm, sizeof(comm), &ppid);
    proc_comm(ppid, pcomm, sizeof(pcomm), &pppid);
    FILE *f = fopen(path, "a");
    if (f != NULL) {
        fprintf(f, "%s %d (run by %s %d) waited %lld ms: %.*s\n", comm, (int)cr.pid, pcomm, ppid,
                left, (int)strcspn(cmd, "\r\n"), cmd);
        fclose(f);
    }
}

/* Handles one connection; returns 1 when the daemon should exit. */
static int handle(int fd)
{
    char buf[512], reply[1024] = "";
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int quit = 0;
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    long long left = silent_until - now_ms();
    if (left > 0) {
        log_silent(fd, left, buf);
        usleep((useconds_t)left * 1000);
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    const char *mute = getenv("FAKE_MPS_MUTE_FILE");
    char muted[4200];
    snprintf(muted, sizeof(muted), "%s.%d", mute != NULL ? mute : "", (int)getpid());
    if (mute != NULL && access(muted, F_OK) == 0) {
        return -1; /* wedged: takes the connection, never replies */
    }
    logline("control.log", "User command: %s", buf);
    if (strcmp(buf, "quit") == 0) {
        quit = getenv("FAKE_MPS_HANG_ON_QUIT") ? 0 : 1;
        if (quit && in_fault && nclients > 0) {
            quitting = 1; /* ends with its last client */
            quit = 0;
        }
    } else if (strncmp(buf, "start_server -uid ", 18) == 0) {
        if (nservers == 0) {
            start_server();
            if (getenv("FAKE_MPS_SERVER_SETUP_MS")) {
                silent_until = now_ms() + atoi(getenv("FAKE_MPS_SERVER_SETUP_MS"));
                const char *log = getenv("FAKE_MPS_SILENT_LOG");
                FILE *f = log != NULL ? fopen(log, "a") : NULL;
                char pcomm[64];
                int ppid = (int)getppid(), pppid;
                proc_comm(ppid, pcomm, sizeof(pcomm), &pppid);
                if (f != NULL) {
                    fprintf(f, "daemon %d (run by %s %d) silent %s ms after start_server\n",
                            (int)getpid(), pcomm, ppid, getenv("FAKE_MPS_SERVER_SETUP_MS"));
                    fclose(f);
                }
            }
        }
        const char *rec = getenv("FAKE_MPS_RECORD");
        FILE *f = rec ? fopen(rec, "a") : NULL;
        if (f) {
            fprintf(f, "start_server gpu=%s\n", env_or("CUDA_VISIBLE_DEVICES", "(unset)"));
            fclose(f);
        }
    } else if (strncmp(buf, "client ", 7) == 0) {
        int max = atoi(env_or("FAKE_MPS_MAX_CLIENTS", "48"));
        if (nservers > 0 && stopped(servers[0])) {
            return -1; /* its server answers nothing: the client waits, held open */
        }
        if (in_fault || quitting) {
            serverline("Server teardown in progress. Refusing to accept new client {PID: %d, "
                       "Context ID: %d}",
                       atoi(buf + 7), 0);
            serverline("Failed to accept client {PID: %d, Context ID: %d} with status 807",
                       atoi(buf + 7), 0);
            snprintf(reply, sizeof(reply),
                     "refused: 807 MPS server is not ready to accept new MPS client requests\n");
        } else if (nclients >= max || nclients >= MAX_CLIENT_FDS) {
            char why[96];
            snprintf(why, sizeof(why), "Maximum number of clients (%d) reached", max);
            logline("server.log", "%s", why);
            snprintf(reply, sizeof(reply), "refused: %s\n", why);
        } else if (!device_visible(buf + 7)) {
            int pid = atoi(buf + 7);
            serverline("Client {PID: %d, Context ID: %d} connected", pid, 0);
            clientline(pid, "Invalid CUDA_VISIBLE_DEVICES.");
            clientline(pid, "Client requested 1 which is not a valid GPU ID in the MPS visible "
                            "set of devices");
            serverline("Client process %d disconnected", pid, 0);
            snprintf(reply, sizeof(reply), "nodevice: no CUDA-capable device is detected\n");
        } else {
            if (nservers == 0) {
                start_server(); /* the first client starts the server */
            }
            client_pid[nclients] = atoi(buf + 7);
            client_fd[nclients++] = fd;
            serverline("Client {PID: %d, Context ID: %d} connected", client_pid[nclients - 1], 1);
            serverline("Status of client {PID: %d, Context ID: %d} is ACTIVE",
                       client_pid[nclients - 1], 1);
            const char *uuid = env_or("CUDA_VISIBLE_DEVICES", "");
            const char *dash = strrchr(uuid, '-');
            snprintf(reply, sizeof(reply), "ok %d %d\n", nclients,
                     dash != NULL ? atoi(dash + 1) : 0);
            if (write(fd, reply, strlen(reply)) < 0) {
                /* gone already: its end is seen on the next poll */
            }
            return -1; /* held: the caller keeps fd open */
        }
    } else if (strcmp(buf, "get_server_list") == 0) {
        size_t k = 0;
        for (int i = 0; i < nservers; i++) {
            k += (size_t)snprintf(reply + k, sizeof(reply) - k, "%d\n", (int)servers[i]);
        }
    } else if (strncmp(buf, "get_server_status ", 18) == 0) {
        snprintf(reply, sizeof(reply), "%s\n", in_fault ? "FAULT" : "ACTIVE");
    } else if (strncmp(buf, "get_client_list ", 16) == 0) {
        size_t k = 0; /* one server: its clients, one PID a line, as MPS prints them */
        for (int i = 0; i < nclients && k < sizeof(reply); i++) {
            k += (size_t)snprintf(reply + k, sizeof(reply) - k, "%d\n", client_pid[i]);
        }
    } else if (strcmp(buf, "get_default_active_thread_percentage") == 0) {
        snprintf(reply, sizeof(reply), "%.1f\n", default_pct);
    } else if (strncmp(buf, "set_default_active_thread_percentage ", 37) == 0) {
        default_pct = atof(buf + 37);
        snprintf(reply, sizeof(reply), "%.1f\n", default_pct);
    } else {
        snprintf(reply, sizeof(reply), "Invalid command %s\n", buf);
    }
    if (write(fd, reply, strlen(reply)) < 0) {
        /* the client went away */
    }
    return quit;
}

/* Double fork and setsid: the grandchild has left the daemon's session
 * and parent; only a subreaper or a cgroup still holds it. */
static void escape(const char *file)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (fork() == 0) {
            int null = open("/dev/null", O_RDWR);
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            setsid();
            FILE *f = fopen(file, "a");
            if (f != NULL) {
                fprintf(f, "%d\n", (int)getpid());
                fclose(f);
            }
            if (getenv("FAKE_MPS_ESCAPE_EXEC") != NULL) {
                signal(SIGPIPE, SIG_DFL); /* what the user's code would run with */
                execl("/bin/sh", "sh", "-c", getenv("FAKE_MPS_ESCAPE_EXEC"), (char *)NULL);
                _exit(127);
            }
            for (int i = 0; i < 3000; i++) {
                usleep(100000); /* 5 min at most */
            }
        }
        _exit(0);
    }
    if (pid > 0) {
        waitpid(pid, NULL, 0);
    }
}

static int run_daemon(void)
{
    struct sockaddr_un addr;
    char path[4200];
    int lfd;
    long long die_at = -1;

    if (getenv("FAKE_MPS_FAIL_START")) {
        fprintf(stderr, "fake-mps: cannot start: FAKE_MPS_FAIL_START is set\n");
        return 1;
    }
    if (getenv("FAKE_MPS_IGNORE_TERM")) {
        signal(SIGTERM, SIG_IGN);
    }
    /* A client killed past its bound (gsrun kills a command's client after
     * 2 s) closes its end before the answer: the write fails with EPIPE,
     * and the daemon lives on, serving the job. Without this the fake died
     * of SIGPIPE whenever it answered late (under a fork bomb beside it). */
    signal(SIGPIPE, SIG_IGN);
    record_start();
    if (getenv("FAKE_MPS_ESCAPE")) {
        escape(getenv("FAKE_MPS_ESCAPE"));
    }
    if (getenv("FAKE_MPS_DIE_AFTER_MS")) {
        die_at = now_ms() + atoi(getenv("FAKE_MPS_DIE_AFTER_MS"));
    }
    if (getenv("FAKE_MPS_START_DELAY_MS")) {
        usleep((useconds_t)atoi(getenv("FAKE_MPS_START_DELAY_MS")) * 1000);
    }
    if (getenv("FAKE_MPS_NO_SOCKET")) {
        for (;;) {
            pause();
        }
    }
    snprintf(path, sizeof(path), "%s/nvidia-cuda-mps-control.pid", pipe_dir);
    FILE *pf = fopen(path, "w");
    if (pf) {
        fprintf(pf, "%d\n", (int)getpid());
        fclose(pf);
    }
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    /* Bound under a temporary name and renamed once listening, so that the
     * socket appears only when a client can connect (a client that came
     * between bind and listen was refused: seen under load in test_mps). */
    char final[sizeof(addr.sun_path)];
    snprintf(final, sizeof(final), "%s/control", pipe_dir);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/.control.tmp", pipe_dir);
    unlink(addr.sun_path);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(lfd, 64) != 0 ||
        rename(addr.sun_path, final) != 0) {
        fprintf(stderr, "fake-mps: cannot listen on %s: %s\n", final, strerror(errno));
        return 1;
    }
    logline("control.log", "Starting control daemon%s", "");
    for (;;) {
        static struct pollfd p[1 + MAX_CLIENT_FDS];
        p[0] = (struct pollfd){lfd, POLLIN, 0};
        for (int i = 0; i < nclients; i++) {
            p[1 + i] = (struct pollfd){client_fd[i], POLLIN, 0};
        }
        int timeout = -1;
        if (die_at >= 0) {
            long long left = die_at - now_ms();
            if (left <= 0) {
                logline("control.log", "fake: dying on purpose%s", "");
                _exit(3);
            }
            timeout = (int)left;
        }
        if (poll(p, (nfds_t)(1 + nclients), timeout) <= 0) {
            continue;
        }
        /* A client that closed its connection: its context is gone; one
         * that says "fault" faults the server. */
        for (int i = nclients - 1; i >= 0; i--) {
            char said[16];
            if (p[1 + i].revents == 0) {
                continue;
            }
            ssize_t r = (p[1 + i].revents & POLLIN) ? read(client_fd[i], said, sizeof(said)) : 0;
            if (r > 0) {
                if (strncmp(said, "fault", 5) == 0 && !in_fault) {
                    fault();
                }
                continue;
            }
            serverline("Client process %d disconnected", client_pid[i], 0);
            close(client_fd[i]);
            client_pid[i] = client_pid[nclients - 1];
            client_fd[i] = client_fd[--nclients];
        }
        if (in_fault && nclients == 0) {
            in_fault = 0;
            serverline("Destroy server context on device %d", 0, 0);
        }
        if (quitting && nclients == 0) {
            stop_servers();
            cleanup_files();
            logline("control.log", "Control daemon exiting%s", "");
            return atoi(env_or("FAKE_MPS_QUIT_STATUS", "0"));
        }
        if (!(p[0].revents & POLLIN)) {
            continue;
        }
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        int quit = handle(fd);
        if (quit < 0) {
            continue; /* a client, held */
        }
        close(fd);
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        if (quit) {
            stop_servers();
            cleanup_files();
            logline("control.log", "Control daemon exiting%s", "");
            return atoi(env_or("FAKE_MPS_QUIT_STATUS", "0"));
        }
    }
}

static int run_client(void)
{
    char line[512];
    int rc = 0;
    while (fgets(line, sizeof(line), stdin) != NULL) {
        struct sockaddr_un addr;
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        memset(&addr, 0, sizeof(addr));
        addr.sun_family = AF_UNIX;
        snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control", pipe_dir);
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
            printf("Cannot find MPS control daemon process\n");
            close(fd);
            return 1;
        }
        if (write(fd, line, strlen(line)) < 0) {
            rc = 1;
        }
        shutdown(fd, SHUT_WR);
        char buf[1024];
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
            fwrite(buf, 1, (size_t)n, stdout);
        }
        close(fd);
    }
    return rc;
}

int main(int argc, char **argv)
{
    snprintf(pipe_dir, sizeof(pipe_dir), "%s",
             env_or("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"));
    snprintf(log_dir, sizeof(log_dir), "%s",
             env_or("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"));
    if (argc > 1 && strcmp(argv[1], "-f") == 0) {
        return run_daemon();
    }
    if (argc > 1 && strcmp(argv[1], "-d") == 0) {
        pid_t pid = fork();
        if (pid != 0) {
            return pid < 0 ? 1 : 0;
        }
        setsid();
        return run_daemon();
    }
    if (argc > 1) {
        fprintf(stderr, "fake-mps: unknown option %s\n", argv[1]);
        return 2;
    }
    return run_client();
}
