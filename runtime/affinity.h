/* CPU placement of the MPS daemons: one core near the GPU they serve. */
#ifndef GS_AFFINITY_H
#define GS_AFFINITY_H

#include <sched.h>
#include <stddef.h>

/* Chooses one core among the CPUs in near (a mask of nwords longs as NVML
 * gives it; NULL or empty means any) that this process may use, and fills
 * out with its hardware threads. The last such core is taken: launchers bind
 * ranks from the first core up, so the last one is the least contended.
 * desc receives a readable form ("core 15 (PU 15,31)"). Returns 0, or
 * -ENOENT when no allowed CPU is near (out then allows every CPU we may use). */
int gs_affinity_pick_core(const unsigned long *near, int nwords, cpu_set_t *out, char *desc,
                          size_t desclen);

#endif
