/* SPDX-License-Identifier: BSD-3-Clause */
// gpu_fault: one CUDA process (no MPI) for the fault tests: a GPU fault on
// an MPS server, the clients it ends and the server it leaves in FAULT.
//
//   gpu_fault [--work MS] [--fault-after MS] [--hold MS]
//
// Each process creates its context (the MPS client connects here) and prints
//   gpu_fault: pid=P mps=0|1 context up
// or, when the context cannot be had (a server in FAULT refuses new
// clients: 807, cudaErrorMpsServerNotReady),
//   gpu_fault: pid=P context failed: <name> (<code>): <text>        exit 4
// --work MS: kernels on a buffer for MS ms, each checked; then
//   gpu_fault: pid=P work ok kernels=K                               exit 0
// or, when a fault ends the context (another client's, on a shared server),
//   gpu_fault: pid=P work failed after T s: <name> (<code>): <text>  exit 2
// --fault-after MS: after MS ms, a write through an invalid device pointer:
//   gpu_fault: pid=P faulted: <name> (<code>)                        exit 3
// --hold MS: then stays alive MS ms, its context (and so the server's
// FAULT) held, as a rank that logs, checkpoints or waits in MPI after its
// error would; its exit status is the same.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

__global__ void bad_write(float *p)
{
    p[threadIdx.x] = 1.0f;
}

__global__ void step(float *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        x[i] = x[i] * 0.5f + 1.0f;
    }
}

static double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int say_error(const char *what, cudaError_t e)
{
    printf("gpu_fault: pid=%d %s: %s (%d): %s\n", (int)getpid(), what, cudaGetErrorName(e), (int)e,
           cudaGetErrorString(e));
    fflush(stdout);
    return (int)e;
}

int main(int argc, char **argv)
{
    int work_ms = 0, fault_ms = -1, hold_ms = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--work") && i + 1 < argc) {
            work_ms = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--fault-after") && i + 1 < argc) {
            fault_ms = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--hold") && i + 1 < argc) {
            hold_ms = atoi(argv[++i]);
        } else {
            fprintf(stderr, "gpu_fault: unknown argument '%s'\n", argv[i]);
            return 64;
        }
    }
    cudaError_t e = cudaFree(0);
    if (e != cudaSuccess) {
        say_error("context failed", e);
        return 4;
    }
    int mps = 0;
    cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, 0);
    printf("gpu_fault: pid=%d mps=%d context up\n", (int)getpid(), mps);
    fflush(stdout);

    const int n = 1 << 20;
    float *d = nullptr;
    if ((e = cudaMalloc(&d, sizeof(float) * n)) != cudaSuccess) {
        say_error("context failed", e);
        return 4;
    }
    if (fault_ms >= 0) {
        usleep((useconds_t)fault_ms * 1000);
        bad_write<<<1, 32>>>((float *)0x10);
        e = cudaDeviceSynchronize();
        printf("gpu_fault: pid=%d faulted: %s (%d)\n", (int)getpid(), cudaGetErrorName(e), (int)e);
        fflush(stdout);
        rc = 3;
    } else if (work_ms > 0) {
        double t0 = now_s();
        long k = 0;
        while ((now_s() - t0) * 1000 < work_ms) {
            step<<<8, 256>>>(d, n);
            e = cudaDeviceSynchronize();
            if (e != cudaSuccess) {
                char what[96];
                snprintf(what, sizeof(what), "work failed after %.1f s", now_s() - t0);
                say_error(what, e);
                rc = 2;
                break;
            }
            k++;
        }
        if (rc == 0) {
            printf("gpu_fault: pid=%d work ok kernels=%ld\n", (int)getpid(), k);
        }
    }
    fflush(stdout);
    if (hold_ms > 0) {
        usleep((useconds_t)hold_ms * 1000);
    }
    if (rc == 0) {
        cudaFree(d);
    }
    return rc;
}
