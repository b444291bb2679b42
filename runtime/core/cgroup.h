/* SPDX-License-Identifier: BSD-3-Clause */
/* A cgroup v2 of root's that holds everything root starts for one job, so
 * that the job's end is one atomic step of the kernel's (cgroup.kill): no
 * fork chain, fork bomb or thread trick outruns it, and no process can
 * leave the cgroup (moving one takes write access to cgroup files that
 * only root has). The cgroups are <mount>/gsrun/<name>, beside the batch
 * system's own (which gsrun never touches); <mount> is the cgroup2 mount
 * (/sys/fs/cgroup on a pure v2 host, /sys/fs/cgroup/unified on a hybrid
 * one), or what the root environment's GSRUN_CGROUP_ROOT names ("none":
 * no cgroup; the caller ends the job by its process tree). */
#ifndef GS_CGROUP_H
#define GS_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

#include "runtime/core/gs_error.h"

/* The most tasks (processes and threads) one job's cgroup may hold, where
 * the pids controller is there: room for the agent, its daemons and their
 * threads on the largest node, a bound on a fork bomb. */
#define GS_CGROUP_PIDS_MAX 16384

/* The cgroup2 mount to use, into out: GSRUN_CGROUP_ROOT when set, else the
 * first cgroup2 mount of /proc/self/mountinfo. 0; -ENOENT when there is
 * none (or GSRUN_CGROUP_ROOT is "none"). */
int gs_cgroup_mount(char *out, size_t len);

/* Makes the cgroup <mount>/gsrun/<name> (with a number added where that
 * name is taken), its pids.max set where the pids controller is
 * available, into path. 0, or -errno with err saying why. */
int gs_cgroup_make(const char *mount, const char *name, char *path, size_t len, gs_error_t *err);

/* Moves pid (0: the caller) into the cgroup at path. 0 or -errno. */
int gs_cgroup_enter(const char *path, pid_t pid);

/* Ends every process of the cgroup at path at once (cgroup.kill; where the
 * kernel has none, 5.13 and older: freezes it and SIGKILLs its processes),
 * reaping this process's exited children meanwhile, and waits up to
 * timeout_ms until the cgroup is empty. Returns how many processes it
 * held; *left is how many it still holds after timeout_ms (0: empty). */
int gs_cgroup_kill(const char *path, int timeout_ms, int *left);

/* Removes the (empty) cgroup at path: 0 or -errno. */
int gs_cgroup_remove(const char *path);

#endif
