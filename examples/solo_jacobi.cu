/* SPDX-License-Identifier: BSD-3-Clause */
// solo_jacobi: a single-GPU Jacobi solver that links no MPI library, for
// ensembles (many independent copies on one GPU, as a parameter sweep runs).
//
//   solo_jacobi [--n N] [--iters K] [--start-at MS]
//
// Relaxes an N x N grid (default 1024) by K sweeps (default 1000), the top
// boundary held at 1, and prints one line:
//   solo_jacobi: n=.. iters=.. solve=<s> checksum=..
// The solve time runs from the first sweep to the last one's end, context
// creation and allocation excluded. --start-at holds the first sweep until
// that wall-clock time (ms since the epoch), so that the copies of an
// ensemble started together solve together, whatever their start-up took
// (tests/bench/pack.sh); a copy ready later starts at once and says so.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

// Its own check: cuda_check.h aborts through MPI, which this program lacks.
#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "solo_jacobi: %s failed: %s\n", #call,                   \
                    cudaGetErrorString(e_));                                         \
            exit(3);                                                                 \
        }                                                                            \
    } while (0)

__global__ void sweep(const float *in, float *out, int n)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x <= 0 || y <= 0 || x >= n - 1 || y >= n - 1) {
        return;
    }
    out[(size_t)y * n + x] = 0.25f * (in[(size_t)(y - 1) * n + x] + in[(size_t)(y + 1) * n + x] +
                                      in[(size_t)y * n + x - 1] + in[(size_t)y * n + x + 1]);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int n = 1024, iters = 1000;
    long long start_at = 0;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--n")) {
            n = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--iters")) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--start-at")) {
            start_at = atoll(argv[++i]);
        }
    }
    if (n < 3 || iters < 1) {
        fprintf(stderr, "solo_jacobi: need --n >= 3 and --iters >= 1\n");
        return 2;
    }
    size_t bytes = sizeof(float) * (size_t)n * n;
    float *a, *b, *host = (float *)calloc((size_t)n * n, sizeof(float));
    for (int x = 0; x < n; x++) {
        host[x] = 1.0f; // the top boundary
    }
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, host, bytes, cudaMemcpyHostToDevice));
    dim3 block(32, 8), grid((n + 31) / 32, (n + 7) / 8);
    CHECK(cudaDeviceSynchronize());
    long long late_ms = 0;
    if (start_at > 0) {
        struct timespec w;
        clock_gettime(CLOCK_REALTIME, &w);
        long long wait_ms = start_at - ((long long)w.tv_sec * 1000 + w.tv_nsec / 1000000);
        if (wait_ms > 0) {
            struct timespec d = {(time_t)(wait_ms / 1000), (long)(wait_ms % 1000) * 1000000L};
            nanosleep(&d, NULL);
        } else {
            late_ms = -wait_ms;
        }
    }
    double t0 = now_s();
    for (int it = 0; it < iters; it++) {
        sweep<<<grid, block>>>(a, b, n);
        float *t = a;
        a = b;
        b = t;
    }
    CHECK(cudaDeviceSynchronize());
    double solve = now_s() - t0;
    CHECK(cudaMemcpy(host, a, bytes, cudaMemcpyDeviceToHost));
    double sum = 0;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        sum += host[i];
    }
    printf("solo_jacobi: n=%d iters=%d solve=%.4f checksum=%.6f late_ms=%lld\n", n, iters, solve, sum,
           late_ms);
    free(host);
    return 0;
}
