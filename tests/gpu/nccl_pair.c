/* SPDX-License-Identifier: BSD-3-Clause */
/* Two ranks on one GPU make an NCCL communicator (tests/gpu/share_libs.sh):
 * prints "nccl=ok" after an all-reduce, or "nccl=fail error=<NCCL's text>"
 * (NCCL refuses two ranks on one GPU: "Duplicate GPU detected"). */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t r;
    float *x;
    int rank, size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        ncclGetUniqueId(&id);
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    cudaSetDevice(0);
    r = ncclCommInitRank(&comm, size, id, rank);
    if (r == ncclSuccess) {
        cudaMalloc((void **)&x, sizeof(float));
        r = ncclAllReduce(x, x, 1, ncclFloat, ncclSum, comm, 0);
        cudaStreamSynchronize(0);
        ncclCommDestroy(comm);
    }
    printf("rank=%d nccl=%s%s%s\n", rank, r == ncclSuccess ? "ok" : "fail",
           r == ncclSuccess ? "" : " error=", r == ncclSuccess ? "" : ncclGetErrorString(r));
    MPI_Finalize();
    return r != ncclSuccess;
}
