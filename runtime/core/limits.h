/* SPDX-License-Identifier: BSD-3-Clause */
/* The sizes and waits every layer shares, named once. */
#ifndef GS_LIMITS_H
#define GS_LIMITS_H

/* A path gsrun builds: PATH_MAX (4096) and room for the file name that is
 * appended to a directory of that length, so that a too-long path fails in
 * the check that names it (gs_rundir_*), never by silent truncation. */
#define GS_PATH_MAX 4200

/* One line read from a file gsrun or the agent wrote, or from a pipe: the
 * longest holds a path. */
#define GS_LINE_MAX 4200

/* Bounded waits for reads that should answer at once: a file of our own
 * or the kernel's (sysfs), and a program asked for its version. */
#define GS_WAIT_OWN_FILE_MS 100
#define GS_WAIT_SYSFS_MS 1000
#define GS_WAIT_VERSION_MS 10000
/* How long root's epilog keeps ending a job's leftover processes. */
#define GS_WAIT_ENDJOB_MS 5000
/* How long a child asked to exit is given before it is killed. */
#define GS_WAIT_CHILD_EXIT_MS 1000
/* How long root gives a job's keeper to end the job's tree: the keeper's
 * own end of it (GS_WAIT_ENDJOB_MS), its reaping of what died last
 * (GS_WAIT_CHILD_EXIT_MS), and a second for a loaded node. A keeper killed
 * before it is done hands its unreaped zombies to PID 1. */
#define GS_WAIT_KEEPER_MS (GS_WAIT_ENDJOB_MS + GS_WAIT_CHILD_EXIT_MS + 1000)

/* GPUs (or MIG instances) on one node. */
#define GS_MAX_GPUS 64

#endif
