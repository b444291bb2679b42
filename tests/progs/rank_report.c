/* SPDX-License-Identifier: BSD-3-Clause */
/* An MPI program for the integration tests: each rank prints what gsrun
 * gave it, and can fail on request.
 *
 *   rank_report [--exit R CODE] [--kill R] [--segv R] [--sleep MS] [--check-control]
 *               [--ignore-term] [--grandchild SECONDS] [--barrier] [--stamp]
 *
 * --check-control: fail unless $CUDA_MPS_PIPE_DIRECTORY/control exists when
 * the rank starts (MPS must be ready before any rank runs).
 * slurm_gpus= is GPU_DEVICE_ORDINAL, which Slurm sets to the job's GPUs as
 * it sets CUDA_VISIBLE_DEVICES (which gsrun rewrites).
 * --barrier: every rank has finished MPI_Init before any fails (MPICH's
 * mpiexec reports a rank lost during the others' MPI_Init by whichever
 * rank notices first: its status then depends on timing).
 * --stamp: also print "stamp=MAIN,INIT" (wall clock, microseconds: main's
 * start and MPI_Init's return), for tests/bench/launch_overhead.sh.
 * --mps-client: under MPS, be a client of the fake daemon (tests/fake) as a
 * CUDA context is of the real one: connect to its control socket, say
 * "client <pid>", hold the connection until every rank has connected
 * (a barrier) and exit; a refused client (the server is full) fails with
 * 46, cudaErrorDevicesUnavailable. As a CUDA program it first loads
 * libcuda.so.1 (the stand-in in tests/fake/cuda, by its path) and, like CUDA, uses MPS only
 * where $CUDA_MPS_PIPE_DIRECTORY/control is there to connect to: else it
 * holds a context without MPS. With FAKE_NVML_CTX_DIR set it writes its
 * context there for the fake NVML to list ("<GPU> mps" or "<GPU> plain");
 * --gpu-mib M: listed with M * (rank + 1) MiB of GPU memory.
 * A CUDA_VISIBLE_DEVICES the server cannot serve fails as CUDA does: "no
 * CUDA-capable device is detected", status 100. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tests/progs/fake_client.h"

static long long wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
    int rank, size, exit_rank = -1, exit_code = 0, kill_rank = -1, segv_rank = -1;
    int sleep_ms = 0, check = 0, control_ok = -1, grandchild = 0, barrier = 0, stamp = 0;
    int client = 0, fault_rank = -1, victim = 0, hold = 0, gpu_mib = 0;
    long long t_main = wall_us(), t_init;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--exit") == 0 && i + 2 < argc) {
            exit_rank = atoi(argv[++i]);
            exit_code = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--kill") == 0 && i + 1 < argc) {
            kill_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--segv") == 0 && i + 1 < argc) {
            segv_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--sleep") == 0 && i + 1 < argc) {
            sleep_ms = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--check-control") == 0) {
            check = 1;
        } else if (strcmp(argv[i], "--ignore-term") == 0) {
            signal(SIGTERM, SIG_IGN); /* only SIGKILL ends this rank */
        } else if (strcmp(argv[i], "--barrier") == 0) {
            barrier = 1;
        } else if (strcmp(argv[i], "--stamp") == 0) {
            stamp = 1;
        } else if (strcmp(argv[i], "--mps-client") == 0) {
            client = 1;
        } else if (strcmp(argv[i], "--mps-fault") == 0 && i + 1 < argc) {
            client = hold = 1;
            fault_rank = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--mps-victim") == 0) {
            client = hold = victim = 1;
        } else if (strcmp(argv[i], "--gpu-mib") == 0 && i + 1 < argc) {
            gpu_mib = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--grandchild") == 0 && i + 1 < argc) {
            grandchild = atoi(argv[++i]);
        }
    }
    if (check) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof(path), "%s/control", env("CUDA_MPS_PIPE_DIRECTORY"));
        control_ok = stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
    }
    char host[256] = "-", cpus[256] = "";
    gethostname(host, sizeof(host));
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0, n = 0; c < CPU_SETSIZE && n < 200; c++) {
            if (CPU_ISSET(c, &set)) {
                n += snprintf(cpus + n, sizeof(cpus) - (size_t)n, "%s%d", n ? "," : "", c);
            }
        }
    }
    MPI_Init(&argc, &argv);
    t_init = wall_us();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ctx_mib = gpu_mib * (rank + 1);
    printf("rank=%d size=%d local=%s/%s mps=%s pipe=%s log=%s pct=%s cvd=%s uuid=%s "
           "gpuranks=%s control=%d slurm_gpus=%s jobdir=%s host=%s pid=%d cpus=%s memlimit=%s "
           "prio=%s\n",
           rank, size, env("GSRUN_LOCAL_RANK"), env("GSRUN_LOCAL_SIZE"), env("GSRUN_MPS_ACTIVE"),
           env("CUDA_MPS_PIPE_DIRECTORY"), env("CUDA_MPS_LOG_DIRECTORY"),
           env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), env("CUDA_VISIBLE_DEVICES"),
           env("GSRUN_GPU_UUID"), env("GSRUN_GPU_RANKS"), control_ok, env("GPU_DEVICE_ORDINAL"),
           env("GSRUN_JOB_DIR"),
           host, (int)getpid(), cpus, env("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
           env("CUDA_MPS_CLIENT_PRIORITY"));
    if (stamp) {
        printf("stamp=%lld,%lld\n", t_main, t_init);
    }
    fflush(stdout);
    if (client) {
        cuda_start();
    }
    if (client && !pipe_visible()) {
        ctx_file(plain_gpu(), "plain"); /* CUDA without MPS */
        printf("rank=%d client=none\n", rank);
        fflush(stdout);
        client = 0;
    }
    char reply[256];
    int fd = client ? mps_client(reply, sizeof(reply)) : -1;
    if (fd == -2) { /* its daemon closed on it unanswered: CUDA runs without MPS */
        ctx_file(plain_gpu(), "plain");
        printf("rank=%d client=none\n", rank);
        fflush(stdout);
        client = 0;
    }
    if (client) {
        if (fd < 0 && strncmp(reply, "nodevice", 8) == 0) {
            fprintf(stderr, "rank %d: cudaSetDevice: no CUDA-capable device is detected\n", rank);
            fflush(stderr);
            _exit(100);
        }
        if (fd >= 0) {
            int n = 0, g = 0;
            if (sscanf(reply, "ok %d %d", &n, &g) == 2) {
                ctx_file(g, "mps");
            }
        }
        if (fd < 0) {
            fprintf(stderr, "rank %d: MPS client refused (%s): cudaErrorDevicesUnavailable\n",
                    rank, reply);
            fflush(stderr);
            _exit(46);
        }
        printf("rank=%d client=%s\n", rank, reply);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD); /* every client connected at once */
        if (rank == fault_rank && write(fd, "fault\n", 6) != 6) {
            _exit(47);
        }
        if (!hold) {
            close(fd);
        } else if (victim && sleep_ms > 0) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, sleep_ms) > 0) {
                char said[16] = "";
                ssize_t r = read(fd, said, sizeof(said) - 1);
                fprintf(stderr, "rank %d: %s\n", rank,
                        r > 0 && strncmp(said, "fault", 5) == 0
                            ? "an illegal memory access was encountered (the MPS server faulted)"
                            : "the MPS server went away");
                fflush(stderr);
                _exit(2);
            }
            sleep_ms = 0;
        }
    }
    if (grandchild > 0 && fork() == 0) {
        /* Left behind: outlives the rank, in its own session. */
        setsid();
        if (fork() == 0) {
            sleep((unsigned)grandchild);
        }
        _exit(0);
    }
    if (barrier) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (sleep_ms > 0) {
        usleep((useconds_t)sleep_ms * 1000);
    }
    if (rank == kill_rank) {
        raise(SIGKILL);
    }
    if (rank == segv_rank) {
        raise(SIGSEGV);
    }
    if (check && control_ok != 1) {
        fprintf(stderr, "rank %d: MPS control socket missing at start\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 9);
    }
    if (rank == exit_rank) {
        exit(exit_code); /* without MPI_Finalize, as a crashing program would */
    }
    MPI_Finalize();
    return 0;
}
