#include "gs_autoconf.h"

#include "affinity.h"

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

#if defined(GS_HAVE_HWLOC)
int gs_affinity_pick_core(const unsigned long *near, int nwords, cpu_set_t *out, char *desc,
                          size_t desclen)
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
int gs_affinity_pick_core(const unsigned long *near, int nwords, cpu_set_t *out, char *desc,
                          size_t desclen)
{
    cpu_set_t allowed;
    CPU_ZERO(out);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        return -errno;
    }
    for (int cpu = CPU_SETSIZE - 1; cpu >= 0; cpu--) {
        if (CPU_ISSET(cpu, &allowed) && near_has(near, nwords, cpu)) {
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
