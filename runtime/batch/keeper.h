/* SPDX-License-Identifier: BSD-3-Clause */
/* Root keeps hold of what it starts for a job. A root prolog runs its part
 * as the job's user under a keeper: a root process, in a session of its
 * own, that is the child subreaper of everything that part starts (the
 * agent, its MPS daemons, whatever they start). A process that double-forks
 * or calls setsid still ends up the keeper's child when its parent dies, so
 * the keeper can always find and end the whole tree; the job's user cannot
 * signal it. It names itself in a root-only file of the base
 * (".gs-keep-<name>.<pid>", holding its start time, so a PID reused
 * meanwhile is never taken for it, and the job's cgroup), exits by itself
 * once it has no child left, and on SIGTERM (root's epilog) ends its tree:
 * at once through the job's cgroup v2 (runtime/core/cgroup.h) where one
 * could be made, else by SIGKILL pass after pass until it has no child
 * left or the bound passes. */
#ifndef GS_KEEPER_H
#define GS_KEEPER_H

#include "runtime/core/gs_error.h"

/* Runs fn(arg) in a child of a new keeper (fn drops privileges itself) and
 * returns fn's exit status, once fn's child has exited or timeout_ms has
 * passed (then fn's child is killed and 70 returned); the keeper stays on
 * while fn's tree lives. base must have passed gs_rundir_root_check_base.
 * -1 with err set when no keeper could be started. warn says what the
 * keeper could not do ("" if nothing): the caller tells the user. */
int gs_keeper_run(const char *base, const char *name, int timeout_ms, int (*fn)(void *), void *arg,
                  gs_error_t *err, gs_error_t *warn);

/* Ends name's keepers in base: SIGTERM, then waits up to timeout_ms for
 * each to end its tree and exit (SIGKILL if it does not; then the job's
 * cgroup is ended here). Returns how many processes were ended (0: none
 * was left, or no keeper), or -ETIMEDOUT when a keeper had to be killed
 * itself; *left is how many of the job's processes are still running. */
int gs_keeper_end(const char *base, const char *name, int timeout_ms, int *left);

#endif
