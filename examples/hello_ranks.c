/* SPDX-License-Identifier: BSD-3-Clause */
/* A CPU-only MPI program: each rank says where it runs and what gsrun set
 * up for it. Used by the quick start on machines without a GPU. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *env(const char *n)
{
    const char *v = getenv(n);
    return v ? v : "(unset)";
}

int main(int argc, char **argv)
{
    int rank, size, sum = 0, one = 1;
    char host[256] = "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof(host) - 1);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s: local rank %s, MPS %s, GPU %s, thread percentage %s\n", rank, size,
           host, env("GSRUN_LOCAL_RANK"), env("GSRUN_MPS_ACTIVE"), env("GSRUN_GPU_UUID"),
           env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
    MPI_Finalize();
    return sum == size ? 0 : 1;
}
