/* SPDX-License-Identifier: BSD-3-Clause */
/* Checks before a job starts that warn rather than fail, and the cleanup of
 * run directories that crashed jobs left behind. */
#ifndef GS_PREFLIGHT_H
#define GS_PREFLIGHT_H

#include <stddef.h>

#define GS_PREFLIGHT_MIN_NOFILE 1024
#define GS_PREFLIGHT_MIN_SHM_MB 64

/* Fills up to max warnings (each a full sentence saying what to raise) for
 * a soft open-file limit below GS_PREFLIGHT_MIN_NOFILE and less than
 * GS_PREFLIGHT_MIN_SHM_MB free in shm_dir (NULL: /dev/shm). Returns the count. */
int gs_preflight_warnings(const char *shm_dir, char (*out)[256], int max);

/* The file in a job dir that names the gsrun process that owns it. */
#define GS_OWNER_FILE "owner"

/* Writes <job_dir>/owner with this process's PID. Returns 0 or -errno
 * (-ENOSPC: the file system is full). */
int gs_preflight_claim(const char *job_dir);

/* Removes <tmpdir>/gsrun.* directories of ours whose owner process is gone
 * and whose node agents are gone (no node dir is locked). A directory
 * without an owner file, or of another user, is never touched. Puts up to
 * max removed paths in out; returns the number removed. */
int gs_preflight_clean_stale(const char *tmpdir, char (*out)[256], int max);

#endif
