/* SPDX-License-Identifier: BSD-3-Clause */
/* Two ranks on one GPU pass a CUDA IPC handle over MPI (tests/gpu/share_libs.sh).
 * Rank 0 allocates and fills a buffer and sends its IPC handle; rank 1 opens
 * it, checks rank 0's bytes, writes its own, and rank 0 checks those. Prints
 * one line: "ipc=ok" or "ipc=fail step=<what> error=<CUDA's name>", which
 * tells whether a CUDA-aware MPI could move halos GPU to GPU between these
 * ranks (MPS clients of one server, of two servers, or no MPS). */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define N (1 << 20)

static int fail(int rank, const char *step, cudaError_t e)
{
    printf("rank=%d ipc=fail step=%s error=%s\n", rank, step, cudaGetErrorName(e));
    fflush(stdout);
    return 1;
}

int main(int argc, char **argv)
{
    static unsigned char host[N];
    cudaIpcMemHandle_t handle;
    unsigned char *buf = NULL;
    int rank, size, bad = 0, i;
    cudaError_t e;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) {
            fprintf(stderr, "ipc_pair: run it with 2 ranks (got %d)\n", size);
        }
        MPI_Finalize();
        return 2;
    }
    if (rank == 0) {
        memset(host, 0xa5, N);
        if ((e = cudaMalloc((void **)&buf, N)) != cudaSuccess ||
            (e = cudaMemcpy(buf, host, N, cudaMemcpyHostToDevice)) != cudaSuccess) {
            bad = fail(rank, "malloc", e);
        } else if ((e = cudaIpcGetMemHandle(&handle, buf)) != cudaSuccess) {
            bad = fail(rank, "get_handle", e);
        }
        MPI_Send(&bad, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
        MPI_Send(&handle, sizeof(handle), MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(&bad, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (!bad) {
            if ((e = cudaMemcpy(host, buf, N, cudaMemcpyDeviceToHost)) != cudaSuccess) {
                bad = fail(rank, "read_back", e);
            } else {
                for (i = 0; i < N && host[i] == 0x5a; i++) {
                }
                bad = i != N;
                printf("rank=0 ipc=%s step=peer_write\n", bad ? "fail" : "ok");
            }
        }
        cudaFree(buf);
    } else {
        int peer_bad;
        MPI_Recv(&peer_bad, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(&handle, sizeof(handle), MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = peer_bad;
        if (!bad && (e = cudaIpcOpenMemHandle((void **)&buf, handle,
                                              cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess) {
            bad = fail(rank, "open_handle", e);
        } else if (!bad) {
            if ((e = cudaMemcpy(host, buf, N, cudaMemcpyDeviceToHost)) != cudaSuccess) {
                bad = fail(rank, "read", e);
            } else {
                for (i = 0; i < N && host[i] == 0xa5; i++) {
                }
                bad = i != N;
                printf("rank=1 ipc=%s step=read\n", bad ? "fail" : "ok");
                memset(host, 0x5a, N);
                if (!bad && (e = cudaMemcpy(buf, host, N, cudaMemcpyHostToDevice)) != cudaSuccess) {
                    bad = fail(rank, "write", e);
                }
                cudaDeviceSynchronize();
            }
            cudaIpcCloseMemHandle(buf);
        }
        MPI_Send(&bad, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("ipc=%s\n", bad ? "fail" : "ok");
    }
    MPI_Finalize();
    return bad;
}
