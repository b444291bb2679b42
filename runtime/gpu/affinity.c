/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/gpu/affinity.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(GS_HAVE_HWLOC)
#include <hwloc.h>
#endif

static int mask_empty(const unsigned long *near, int nwords)
{
    if (near == NULL) {
        return 1;
    }
    for (int i = 0; i < nwords; i++) {
        if (near[i] != 0) {
            return 0;
        }
    }
    return 1;
}

#include <dirent.h>
#include <stdlib.h>

int gs_affinity_move(pid_t pid, const cpu_set_t *cpus)
{
    char path[64];
    int rc = -ESRCH;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL) {
        return sched_setaffinity(pid, sizeof(*cpus), cpus) == 0 ? 0 : -errno;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int tid = atoi(e->d_name);
        if (tid > 0) {
            rc = sched_setaffinity(tid, sizeof(*cpus), cpus) == 0 ? 0 : -errno;
        }
    }
    closedir(d);
    return rc;
}

void gs_affinity_cpuset_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
        if (!CPU_ISSET(c, set)) {
            continue;
        }
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) {
            e++;
        }
        used += (size_t)snprintf(buf + used, len - used, e > c ? "%s%d-%d" : "%s%d",
                                 used ? "," : "", c, e);
        c = e;
    }
}

int gs_affinity_cpuset_parse(const char *text, cpu_set_t *set)
{
    const char *p = text;
    CPU_ZERO(set);
    while (*p != '\0') {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0) {
            return -EINVAL;
        }
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || hi < lo) {
                return -EINVAL;
            }
            p = end;
        }
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++) {
            CPU_SET((int)c, set);
        }
        if (*p == ',') {
            p++;
        } else if (*p != '\0') {
            return -EINVAL;
        }
    }
    return 0;
}

#if defined(GS_HAVE_HWLOC)
/* Removes from cand the cores that have a CPU in avoid, unless that would
 * leave no core. */
static void drop_avoided(hwloc_topology_t topo, hwloc_bitmap_t cand, const cpu_set_t *avoid)
{
    hwloc_bitmap_t keep = hwloc_bitmap_alloc();
    int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, cand, HWLOC_OBJ_CORE);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(topo, cand, HWLOC_OBJ_CORE,
                                                               (unsigned)i);
        int cpu, hit = 0;
        hwloc_bitmap_foreach_begin(cpu, core->cpuset)
        {
            hit |= cpu < CPU_SETSIZE && CPU_ISSET(cpu, avoid);
        }
        hwloc_bitmap_foreach_end();
        if (!hit) {
            hwloc_bitmap_or(keep, keep, core->cpuset);
        }
    }
    hwloc_bitmap_and(keep, keep, cand);
    if (!hwloc_bitmap_iszero(keep)) {
        hwloc_bitmap_copy(cand, keep);
    }
    hwloc_bitmap_free(keep);
}

int gs_affinity_pick_core(const unsigned long *near, int nwords, const cpu_set_t *avoid,
                          cpu_set_t *out, char *desc, size_t desclen)
{
    hwloc_topology_t topo;
    hwloc_bitmap_t cand = NULL;
    hwloc_obj_t core = NULL;
    int rc = 0;

    CPU_ZERO(out);
    if (hwloc_topology_init(&topo) != 0) {
        return -ENOMEM;
    }
    /* CPUs only: loading the PCI tree would cost tens of milliseconds on the
     * path every rank waits on, and NVML already told us which CPUs are near. */
    hwloc_topology_set_all_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(topo, HWLOC_OBJ_CORE, HWLOC_TYPE_FILTER_KEEP_ALL);
    hwloc_topology_set_type_filter(topo, HWLOC_OBJ_PU, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return -EIO;
    }
    cand = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(topo));
    if (!mask_empty(near, nwords)) {
        hwloc_bitmap_t nearmap = hwloc_bitmap_alloc();
        for (int i = 0; i < nwords; i++) {
            hwloc_bitmap_set_ith_ulong(nearmap, (unsigned)i, near[i]);
        }
        if (hwloc_bitmap_intersects(cand, nearmap)) {
            hwloc_bitmap_and(cand, cand, nearmap);
        } else {
            rc = -ENOENT;
        }
        hwloc_bitmap_free(nearmap);
    }
    if (avoid != NULL) {
        drop_avoided(topo, cand, avoid);
    }
    int ncores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, cand, HWLOC_OBJ_CORE);
    if (ncores > 0) {
        core = hwloc_get_obj_inside_cpuset_by_type(topo, cand, HWLOC_OBJ_CORE, (unsigned)ncores - 1);
    }
    if (core != NULL) {
        hwloc_bitmap_and(cand, cand, core->cpuset);
    }
    int cpu;
    size_t used = 0;
    if (desc != NULL && desclen > 0) {
        used = (size_t)snprintf(desc, desclen, "core %d (PU ", core ? (int)core->logical_index : -1);
    }
    hwloc_bitmap_foreach_begin(cpu, cand)
    {
        if (cpu < CPU_SETSIZE) {
            CPU_SET(cpu, out);
            if (desc != NULL && used < desclen) {
                used += (size_t)snprintf(desc + used, desclen - used, "%s%d",
                                         CPU_COUNT(out) > 1 ? "," : "", cpu);
            }
        }
    }
    hwloc_bitmap_foreach_end();
    if (desc != NULL && used < desclen) {
        snprintf(desc + used, desclen - used, ")");
    }
    hwloc_bitmap_free(cand);
    hwloc_topology_destroy(topo);
    return rc;
}
#else
static int near_has(const unsigned long *near, int nwords, int cpu)
{
    int bits = (int)(8 * sizeof(unsigned long));
    if (mask_empty(near, nwords)) {
        return 1;
    }
    if (cpu / bits >= nwords) {
        return 0;
    }
    return (near[cpu / bits] >> (cpu % bits)) & 1UL;
}

/* Without hwloc: the highest allowed CPU near the GPU (no core grouping). */
int gs_affinity_pick_core(const unsigned long *near, int nwords, const cpu_set_t *avoid,
                          cpu_set_t *out, char *desc, size_t desclen)
{
    cpu_set_t allowed;
    CPU_ZERO(out);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        return -errno;
    }
    for (int pass = avoid != NULL ? 0 : 1; pass < 2; pass++) {
        for (int cpu = CPU_SETSIZE - 1; cpu >= 0; cpu--) {
            if (!CPU_ISSET(cpu, &allowed) || !near_has(near, nwords, cpu) ||
                (pass == 0 && CPU_ISSET(cpu, avoid))) {
                continue;
            }
            CPU_SET(cpu, out);
            if (desc != NULL) {
                snprintf(desc, desclen, "CPU %d", cpu);
            }
            return 0;
        }
    }
    *out = allowed;
    if (desc != NULL) {
        snprintf(desc, desclen, "any allowed CPU");
    }
    return -ENOENT;
}
#endif
