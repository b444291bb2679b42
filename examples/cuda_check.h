/* SPDX-License-Identifier: BSD-3-Clause */
// CHECK(call): abort the MPI job with a message naming the failed CUDA call.
// Used by the CUDA examples; expects an int `rank` in scope.
#ifndef GS_EXAMPLES_CUDA_CHECK_H
#define GS_EXAMPLES_CUDA_CHECK_H

#include <cstdio>
#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

// A rank stuck after its error (writing a checkpoint, a log, or hung), for
// the fault tests: CHECK then waits this long, outside MPI, before it aborts.
static int cuda_check_stuck_ms __attribute__((unused)) = 0;

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call,                 \
                    cudaGetErrorString(e_));                                         \
            fflush(stderr);                                                          \
            if (cuda_check_stuck_ms > 0) {                                           \
                usleep((useconds_t)cuda_check_stuck_ms * 1000);                      \
            }                                                                        \
            MPI_Abort(MPI_COMM_WORLD, 3);                                            \
        }                                                                            \
    } while (0)

#endif
