/* SPDX-License-Identifier: BSD-3-Clause */
// small_kernels: the small-grid microbenchmark.
//
//   small_kernels [--kernels K] [--blocks B] [--threads T] [--work W]
//
// Each rank launches K kernels (default 100) of B blocks (8) x T threads
// (256), each thread doing W dependent integer multiply-adds (default
// 400000, about 1 ms on an H200): the shape of a strong-scaled code whose
// kernels no longer fill the GPU. Every thread's result is checked against
// the host (the same linear congruential steps, composed in O(log W)). Rank 0 prints one summary line:
//   small_kernels: np=.. loop=<max s> init=<max s> first_kernel=<epoch s> ok=0|1
#include <mpi.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "cuda_check.h"

#define LCG_A 1664525u
#define LCG_C 1013904223u

// Dependent steps from a per-thread start: nothing for the compiler to fold.
__global__ void spin(unsigned *v, int work)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, x = v[i];
    for (int k = 0; k < work; k++) {
        x = x * LCG_A + LCG_C;
    }
    v[i] = x;
}

// x -> a x + c applied n times, as one affine map (a^n, c (a^(n-1) + ... + 1)).
static void lcg_power(unsigned long long n, unsigned *an, unsigned *cn)
{
    unsigned ra = 1, rc = 0, a = LCG_A, c = LCG_C;
    while (n > 0) {
        if (n & 1) {
            rc = a * rc + c;
            ra = a * ra;
        }
        c = a * c + c;
        a = a * a;
        n >>= 1;
    }
    *an = ra;
    *cn = rc;
}

static double epoch_now()
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int rank = 0, size = 1, kernels = 100, blocks = 8, threads = 256, work = 400000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--kernels")) {
            kernels = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--blocks")) {
            blocks = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--threads")) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--work")) {
            work = atoi(argv[++i]);
        }
    }
    double t0 = MPI_Wtime();
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    double t_init = MPI_Wtime() - t0;

    int n = blocks * threads;
    unsigned *d;
    std::vector<unsigned> h(n);
    for (int i = 0; i < n; i++) {
        h[i] = (unsigned)(i + 7919 * rank);
    }
    CHECK(cudaMalloc(&d, sizeof(unsigned) * n));
    CHECK(cudaMemcpy(d, h.data(), sizeof(unsigned) * n, cudaMemcpyHostToDevice));
    spin<<<blocks, threads>>>(d, 1);
    CHECK(cudaDeviceSynchronize());
    double first_done = epoch_now();

    MPI_Barrier(MPI_COMM_WORLD);
    double ts = MPI_Wtime();
    for (int k = 0; k < kernels; k++) {
        spin<<<blocks, threads>>>(d, work);
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    double loop = MPI_Wtime() - ts;

    std::vector<unsigned> out(n);
    CHECK(cudaMemcpy(out.data(), d, sizeof(unsigned) * n, cudaMemcpyDeviceToHost));
    unsigned an, cn;
    lcg_power(1ULL + (unsigned long long)kernels * work, &an, &cn);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        if (out[i] != an * h[i] + cn) {
            ok = 0;
        }
    }
    double loop_max = 0, init_max = 0, first_max = 0;
    int all_ok = 0;
    MPI_Reduce(&loop, &loop_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t_init, &init_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&first_done, &first_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("small_kernels: np=%d kernels=%d blocks=%d threads=%d work=%d loop=%.4f init=%.3f "
               "first_kernel=%.6f ok=%d\n",
               size, kernels, blocks, threads, work, loop_max, init_max, first_max, all_ok);
    }
    cudaFree(d);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
