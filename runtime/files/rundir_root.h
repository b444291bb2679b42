/* SPDX-License-Identifier: BSD-3-Clause */
/* Run directories that root makes for a user: a batch job's (gsrun prolog)
 * and a Slurm step's (the SPANK plugin). Their names come from job and step
 * ids, which anyone can guess, so they live in a base that only root may
 * write (GS_ROOT_RUNDIR, /run/gsrun by default): no user can take a name
 * there first or swap one for a link. Root makes each for its user (owned
 * by the user, 0700); the user's processes (agent, MPS, tasks) work inside;
 * root removes it, never following a link within. See doc/security.md. */
#ifndef GS_RUNDIR_ROOT_H
#define GS_RUNDIR_ROOT_H

#include <stddef.h>
#include <sys/types.h>

#include "runtime/core/gs_error.h"

/* Checks base and every directory above it: real directories (no links)
 * owned by root that no one else may write (an ancestor may be sticky, as
 * /tmp is). With create, as root, makes a missing base (0755) first. */
int gs_rundir_root_check_base(const char *base, int create, gs_error_t *err);

/* Whether name is usable as a directory name there: letters, digits, '.',
 * '_' and '-', not starting with '.', at most 64 characters. */
int gs_rundir_root_name_ok(const char *name);

/* Names in a base that are not jobs': a dir being made (".gs-new-<name>.<pid>",
 * renamed into place once it is the user's), what an epilog could not
 * remove (".gs-trash-<name>.<pid>", moved aside for the next prolog), and a
 * job's keeper's file (".gs-keep-<name>.<pid>", runtime/batch/keeper.h). */
#define GS_RUNDIR_ROOT_NEW ".gs-new-"
#define GS_RUNDIR_ROOT_TRASH ".gs-trash-"
#define GS_RUNDIR_ROOT_KEEP ".gs-keep-"

/* As root: makes <base>/<name> for uid:gid, mode 0700, into out. One that
 * already is uid's private directory is kept (*kept = 1: a prolog run
 * again); anything else under that name (a dead job's, another uid's) is
 * removed first. The name appears finished or not at all, and
 * two callers at once both get it (*kept for one of them). The base must have passed
 * gs_rundir_root_check_base. */
int gs_rundir_root_make(const char *base, const char *name, uid_t uid, gid_t gid, char *out,
                        size_t len, int *kept, gs_error_t *err);

/* <base>/<name> into out if it is uid's private directory (a real
 * directory owned by uid, no group or other access); the caller has
 * checked the base. Returns 0, -ENOENT when there is none, or another
 * negative errno with err saying why (another user's, not a directory). */
int gs_rundir_root_find(const char *base, const char *name, uid_t uid, char *out, size_t len,
                        gs_error_t *err);

/* Moves <base>/<name>'s dir aside under the trash prefix (it could not be
 * removed now); 0 or a negative errno. */
int gs_rundir_root_set_aside(const char *base, const char *name);

/* Removes, best effort, what was set aside in base, and the dirs being
 * made and the keeper files of processes that are gone. */
void gs_rundir_root_sweep(const char *base);

/* The owner of <base>/<name> (a real directory), or -1 if there is none. */
int gs_rundir_root_owner(const char *base, const char *name, uid_t *uid, gid_t *gid);

#endif
