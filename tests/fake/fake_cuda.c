/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for libcuda.so.1 that does nothing: tests/progs/rank_report
 * loads it (by its path, never through the library path, so that no MPI
 * library finds it) when it acts as a CUDA program, so that the process
 * maps a "libcuda.so" as a real one does once CUDA starts in it: the node
 * agent looks there before it asks NVML about the process. */
int cuInit(unsigned int flags);

int cuInit(unsigned int flags)
{
    (void)flags;
    return 0;
}
