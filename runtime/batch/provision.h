/* SPDX-License-Identifier: BSD-3-Clause */
/* Provisioning a node for a whole batch job, for sites that start MPS in
 * the batch system's prolog instead of per job step (gsrun prolog, gsrun
 * epilog, gsrun task-prolog): the node agent runs MPS on every visible GPU
 * for the job, each task works out its GPU and share from the state the
 * agent publishes, and the epilog stops it. Every command finds the job's
 * dir again by its name, "job-<job id>", in a base no other user can write:
 * as root, a root-only base (runtime/files/rundir_root.h) where root makes the
 * dir for the job's user; as a user, a private base of the user's own. */
#ifndef GS_PROVISION_H
#define GS_PROVISION_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "runtime/rank/clientenv.h"
#include "runtime/core/config.h"
#include "runtime/core/gs_error.h"
#include "runtime/files/state.h"

/* The job dir's name for job (letters, digits, '.', '_', '-'): "job-<id>". */
int gs_provision_job_name(const char *job, char *out, size_t len, gs_error_t *err);

/* Whether --dir's value can be a base: an absolute path without control
 * bytes. 0, or -EINVAL with err saying why (the value shown with '?'). */
int gs_provision_dir_ok(const char *dir, gs_error_t *err);

/* The dir <base>/<name> for a job or step of uid:gid, made by whoever runs
 * this: as root in a root-only base (base, or GS_ROOT_RUNDIR) for the user;
 * as the user in the user's own base (gs_rundir_user_base). A dir that
 * already is the user's is kept; a name someone else took is refused (user)
 * or replaced (root). */
/* gsrun exec's job dir on this node, where every rank of the node agrees
 * on it whatever other users do to the names in the shared directory at
 * the same time: the node's first rank (first) chooses the base as
 * gs_rundir_user_base_any does and makes <base>/<job>; every other
 * rank waits (up to timeout_ms) until one of the candidate bases that is
 * its own holds that job dir, which only the first rank makes. -EPERM
 * once every candidate has been another user's for 100 ms. */
int gs_provision_exec_job_dir(const char *dir, const char *job, int first, int timeout_ms,
                              char *out, size_t len, char *taken, size_t taken_len,
                              gs_error_t *err);

int gs_provision_make_dir(const char *base, const char *name, uid_t uid, gid_t gid, char *out,
                          size_t len, gs_error_t *err);

/* For the job's user's part of a root prolog (after the switch to the
 * user): an environment of the user's login basics (HOME, USER, LOGNAME,
 * SHELL), gsrun's own settings (GSRUN_*), what finding and using the driver
 * needs (PATH, LD_LIBRARY_PATH, CUDA_*, NVIDIA_*, HWLOC_*), the locale, time
 * zone and TMPDIR, the batch system's facts of the job (SLURM_*, PBS_*), and the
 * names a site lists in GSRUN_AGENT_ENV (comma-separated; NAME* keeps a
 * prefix); nothing else of root's: the user can read its agent's
 * environment in /proc. 0, or -1 when the environment cannot be set. */
int gs_provision_user_env(const char *user, const char *home, const char *shell);

/* Starts the job's agent (agent_path) on this node, or finds it running
 * (*already = 1; a dir left by a dead one is removed first), and reads its
 * state into st. Returns 0 when the job may run (MPS on, or off under
 * auto: st->message says why), or the exit code of an error (err). Runs as
 * the job's user. */
int gs_provision_start(const gs_config_t *cfg, const char *job_dir, const char *agent_path,
                       gs_state_t *st, int *already, gs_error_t *err);

/* Stops the job's agent on this node, copying its report to out (all of it
 * with verbose, else its problems), and waits (bounded) until its dirs are
 * gone; removes what a dead agent left, and the job dir unless keep_dir
 * (root removes a dir in its base). Nothing to stop is success (the epilog
 * may run twice). */
int gs_provision_stop(const char *job_dir, FILE *out, int verbose, int keep_dir,
                      gs_error_t *err);

/* A task's environment: local_rank of local_size tasks of a step on this
 * node, placed and shared over the job's GPUs as gsrun would. *on is 0
 * (and env empty) when the node runs no MPS for the job, or this step does
 * not share a GPU. */
int gs_provision_task_env(const gs_config_t *cfg, const char *job_dir, int local_rank,
                          int local_size, gs_clientenv_t *env, int *on, gs_error_t *err);

#endif
