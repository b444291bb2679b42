/* SPDX-License-Identifier: BSD-3-Clause */
/* What gsrun's helper programs share: locating each other (gsrun-shim,
 * gsrun-agent, gsrun-srun-task), and a rank's request to join its node. */
#ifndef GS_HELPERS_H
#define GS_HELPERS_H

#include <stddef.h>

#include "runtime/gs_error.h"
#include "runtime/node.h"

/* Finds helper `name` beside the running executable (a build tree, or a
 * relocated install), else in the configured pkglibexecdir. */
int gs_helper_path(const char *name, char *out, size_t len, gs_error_t *err);

/* The request of a rank of a job gsrun started (gsrun-shim,
 * gsrun-srun-task): gsrun's job dir, node and PID from its GSRUN_*
 * variables; agent (the node leader's) or NULL. The launcher PID and the
 * front end's own fields are the caller's. */
void gs_helper_job_req(gs_node_req_t *req, const gs_config_t *cfg, const char *job_dir,
                       int local_rank, int local_size, const char *agent);

#endif
