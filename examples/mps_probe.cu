/* SPDX-License-Identifier: BSD-3-Clause */
// mps_probe: an MPI+CUDA program that reports, per rank, whether it really
// runs under MPS and how many SMs it may use, and checks a computed result.
//
//   mps_probe [--expect-mps] [--expect-sms S] [--n N] [--iters K] [--fault R] [--sleep MS]
//             [--alloc-mb M] [--mem] [--stuck MS] [--hold-mb M]
//
// Each rank fills a vector on the GPU, runs K kernels of a small grid over
// it and checks the sum on the host. --expect-mps fails a rank that is not
// an MPS client; --expect-sms S fails one that does not see exactly S SMs.
// (Under MPS every device query already reports the client's share, so the
// expected count is computed by the caller from a run without MPS.)
// --fault R makes rank R write through an invalid device pointer (a GPU
// fault, for the fault tests); --stuck MS: a rank whose CUDA call fails
// stays MS ms outside MPI before it aborts (a rank stuck after its error,
// while the others wait for it in MPI); --alloc-mb M tries one more allocation of M MiB
// and prints whether it succeeded (for memory-limit checks; not a failure);
// --sleep MS keeps every rank's context alive
// that long after its work. --mem: once every rank holds its context (a
// barrier), rank 0 prints the device's free and total memory as its
// context sees them (under MPS: the whole GPU's), for the context cost per
// client: "mps_probe: N contexts: free_mib=F total_mib=T". --hold-mb M: each
// rank holds M x (rank + 1) MiB more (written) through its --sleep, for the
// per-rank memory checks (tests/gpu/memory.sh).
#include <mpi.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

#include "cuda_check.h"

__global__ void bad_write(float *p)
{
    p[threadIdx.x] = 1.0f;
}

__global__ void axpy(float *x, int n, float a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        x[i] = x[i] + a;
    }
}

int main(int argc, char **argv)
{
    int rank = 0, size = 1, n = 1 << 20, iters = 100, expect_mps = 0;
    int expected_sms = -1, fault_rank = -1, sleep_ms = 0, alloc_mb = 0, mem = 0, hold_mb = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--expect-mps")) {
            expect_mps = 1;
        } else if (!strcmp(argv[i], "--expect-sms") && i + 1 < argc) {
            expected_sms = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--fault") && i + 1 < argc) {
            fault_rank = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sleep") && i + 1 < argc) {
            sleep_ms = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--stuck") && i + 1 < argc) {
            cuda_check_stuck_ms = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--mem")) {
            mem = 1;
        } else if (!strcmp(argv[i], "--hold-mb") && i + 1 < argc) {
            hold_mb = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--alloc-mb") && i + 1 < argc) {
            alloc_mb = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        }
    }

    double t0 = MPI_Wtime();
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0)); // creates the context: the MPS client connects here
    double t_init = MPI_Wtime() - t0;

    int sms = 0, mps = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, 0));

    float *d = nullptr;
    CHECK(cudaMalloc(&d, sizeof(float) * n));
    CHECK(cudaMemset(d, 0, sizeof(float) * n));
    if (rank == fault_rank) {
        bad_write<<<1, 32>>>((float *)0x10);
    }
    for (int k = 0; k < iters; k++) {
        axpy<<<8, 256>>>(d, n, 1.0f);
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    float *h = (float *)malloc(sizeof(float) * n);
    CHECK(cudaMemcpy(h, d, sizeof(float) * n, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (h[i] != (float)iters) {
            bad++;
        }
    }
    char alloc[128] = "";
    if (alloc_mb > 0) {
        void *big = nullptr;
        cudaError_t e = cudaMalloc(&big, (size_t)alloc_mb << 20);
        snprintf(alloc, sizeof(alloc), " alloc=%dMB:%s", alloc_mb,
                 e == cudaSuccess ? "ok" : cudaGetErrorName(e));
        if (e == cudaSuccess) {
            cudaFree(big);
        } else {
            cudaGetLastError(); // clear it: the rank goes on
        }
    }
    // The GPU this rank runs on, as NVML and CUDA_VISIBLE_DEVICES name it.
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    char uuid[48];
    const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
    snprintf(uuid, sizeof(uuid),
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    const char *pct_env = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    int ok = bad == 0;
    if (expect_mps && mps != 1) {
        ok = 0;
    }
    if (expected_sms >= 0 && sms != expected_sms) {
        ok = 0;
    }
    printf("rank %d/%d: mps=%d sms=%d%s%s pct=%s init=%.3fs gpu=%s%s result=%s%s\n", rank, size,
           mps, sms, expected_sms >= 0 ? " expected_sms=" : "",
           expected_sms >= 0 ? std::to_string(expected_sms).c_str() : "", pct_env ? pct_env : "unset",
           t_init, uuid, alloc, bad == 0 ? "ok" : "WRONG", ok ? "" : " FAIL");
    fflush(stdout);
    if (mem) {
        size_t free_b = 0, total_b = 0;
        MPI_Barrier(MPI_COMM_WORLD); // every context exists
        if (rank == 0 && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
            printf("mps_probe: %d contexts: free_mib=%zu total_mib=%zu\n", size, free_b >> 20,
                   total_b >> 20);
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD); // and still exists while rank 0 looks
    }
    void *held = nullptr;
    if (hold_mb > 0) {
        size_t bytes = (size_t)hold_mb * (size_t)(rank + 1) << 20;
        CHECK(cudaMalloc(&held, bytes));
        CHECK(cudaMemset(held, 1, bytes)); // written: resident, not only reserved
        CHECK(cudaDeviceSynchronize());
        printf("rank %d: holds %zu MiB\n", rank, bytes >> 20);
        fflush(stdout);
    }
    if (sleep_ms > 0) {
        usleep((useconds_t)sleep_ms * 1000);
    }
    if (held != nullptr) {
        cudaFree(held);
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mps_probe: %d ranks, %s\n", size, all_ok ? "all checks passed" : "CHECKS FAILED");
    }
    free(h);
    cudaFree(d);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
