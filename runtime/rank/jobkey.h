/* SPDX-License-Identifier: BSD-3-Clause */
/* The job key of the rank prefix (`gsrun exec`): a name every rank of one
 * job on one node computes alike, without gsrun to hand it out. From the
 * launcher's variables when it names the job (GSRUN_JOB_KEY given by hand,
 * PMIx's namespace, Slurm's job and step), else from the ranks' common
 * parent: the launcher's process on this node (Hydra's proxy, orted, prted,
 * slurmstepd), by its PID and start time, so that a reused PID gives
 * another key. The name lives in the user's private base directory
 * ($TMPDIR/gsrun-<uid>, 0700, checked), so another user cannot take it. */
#ifndef GS_JOBKEY_H
#define GS_JOBKEY_H

#include <stddef.h>
#include <sys/types.h>

/* The key and where it came from ("GSRUN_JOB_KEY", "PMIX_NAMESPACE",
 * "SLURM_JOB_ID", "parent"); 0, or -ENOENT when not even the parent can
 * be read (no /proc). */
int gs_jobkey_get(char *out, size_t len, const char **source);
/* The job dir's name for a key: "exec-", a hash of the key, "-" and the key
 * with every byte other than a letter, digit, '.', '_' or '-' as '_', cut
 * to about 100 bytes (the hash keeps cleaned or cut keys apart). */
void gs_jobkey_dir_name(const char *key, char *out, size_t len);
/* A process's start time in clock ticks since boot (/proc/PID/stat), or -1. */
long long gs_jobkey_start_time(pid_t pid);

#endif
