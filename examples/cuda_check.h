/* SPDX-License-Identifier: BSD-3-Clause */
// CHECK(call): abort the MPI job with a message naming the failed CUDA call.
// Used by the CUDA examples; expects an int `rank` in scope.
#ifndef GS_EXAMPLES_CUDA_CHECK_H
#define GS_EXAMPLES_CUDA_CHECK_H

#include <cstdio>
#include <cuda_runtime.h>
#include <mpi.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call,                 \
                    cudaGetErrorString(e_));                                         \
            MPI_Abort(MPI_COMM_WORLD, 3);                                            \
        }                                                                            \
    } while (0)

#endif
