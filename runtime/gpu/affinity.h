/* SPDX-License-Identifier: BSD-3-Clause */
/* CPU placement of the MPS daemons: one core near the GPU they serve. */
#ifndef GS_AFFINITY_H
#define GS_AFFINITY_H

#include <sched.h>
#include <stddef.h>
#include <sys/types.h>

/* Chooses one core among the CPUs in near (a mask of nwords longs as NVML
 * gives it; NULL or empty means any) that this process may use, and fills
 * out with its hardware threads. Cores with a CPU in avoid (NULL: none; the
 * other daemons' cores, the ranks' cores) are passed over while another
 * near core is left. The last such core is taken: launchers bind ranks
 * from the first core up, so the last one is the least contended. desc
 * receives a readable form ("core 15 (PU 15,31)"). Returns 0, or -ENOENT
 * when no allowed CPU is near (out then allows every CPU we may use). */
int gs_affinity_pick_core(const unsigned long *near, int nwords, const cpu_set_t *avoid,
                          cpu_set_t *out, char *desc, size_t desclen);

/* Pins every thread of process pid to cpus. Returns 0 or -errno. */
int gs_affinity_move(pid_t pid, const cpu_set_t *cpus);

/* A CPU set as the kernel writes CPU lists ("0-3,8,10-11"); "" when empty. */
void gs_affinity_cpuset_format(const cpu_set_t *set, char *buf, size_t len);

/* Parses such a list. Returns 0 or -EINVAL. */
int gs_affinity_cpuset_parse(const char *text, cpu_set_t *set);

#endif
