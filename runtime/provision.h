/* Provisioning a node for a whole batch job, for sites that start MPS in
 * the batch system's prolog instead of per job step (gsrun prolog, gsrun
 * epilog, gsrun task-prolog): the node agent runs MPS on every visible GPU
 * for the job, each task works out its GPU and share from the state the
 * agent publishes, and the epilog stops it. The job dir has a fixed name,
 * "<dir>/gsrun.job-<job id>", so that every command finds it again. */
#ifndef GS_PROVISION_H
#define GS_PROVISION_H

#include <stddef.h>
#include <stdio.h>

#include "clientenv.h"
#include "config.h"
#include "gs_error.h"
#include "state.h"

/* The job dir of job (letters, digits, '.', '_', '-') under dir. */
int gs_provision_job_dir(const char *dir, const char *job, char *out, size_t len,
                         gs_error_t *err);

/* Starts the job's agent (agent_path) on this node, or finds it running
 * (*already = 1; a dir left by a dead one is removed first), and reads its
 * state into st. Returns 0 when the job may run (MPS on, or off under
 * auto: st->message says why), or the exit code of an error (err). Runs as
 * the job's user. */
int gs_provision_start(const gs_config_t *cfg, const char *job_dir, const char *agent_path,
                       gs_state_t *st, int *already, gs_error_t *err);

/* Stops the job's agent on this node, copying its report to out (all of it
 * with verbose, else its problems), and waits (bounded) until its dirs are
 * gone; removes what a dead agent left. Nothing to stop is success (the
 * epilog may run twice). */
int gs_provision_stop(const char *job_dir, FILE *out, int verbose, gs_error_t *err);

/* A task's environment: local_rank of local_size tasks of a step on this
 * node, placed and shared over the job's GPUs as gsrun would. *on is 0
 * (and env empty) when the node runs no MPS for the job, or this step does
 * not share a GPU. */
int gs_provision_task_env(const gs_config_t *cfg, const char *job_dir, int local_rank,
                          int local_size, gs_clientenv_t *env, int *on, gs_error_t *err);

#endif
