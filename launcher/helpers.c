/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "launcher/helpers.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GS_PKGLIBEXECDIR
#define GS_PKGLIBEXECDIR "/usr/local/libexec/gsrun"
#endif

int gs_helper_path(const char *name, char *out, size_t len, gs_error_t *err)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        if ((size_t)snprintf(out, len, "%s/%s", dirname(self), name) < len &&
            access(out, X_OK) == 0) {
            return 0;
        }
    }
    if ((size_t)snprintf(out, len, "%s/%s", GS_PKGLIBEXECDIR, name) < len &&
        access(out, X_OK) == 0) {
        return 0;
    }
    return gs_error_set(err, ENOENT,
                        "helper program %s was found neither beside this program nor in %s; "
                        "reinstall gsrun",
                        name, GS_PKGLIBEXECDIR);
}

void gs_helper_job_req(gs_node_req_t *req, const gs_config_t *cfg, const char *job_dir,
                       int local_rank, int local_size, const char *agent)
{
    const char *pid = getenv("GSRUN_PID");
    memset(req, 0, sizeof(*req));
    req->cfg = cfg;
    req->job_dir = job_dir;
    req->gsrun_node = getenv("GSRUN_NODE_ID");
    req->gsrun_pid = pid != NULL ? (pid_t)atoi(pid) : 0;
    req->agent_path = agent;
    req->local_rank = local_rank;
    req->local_size = local_size;
    /* Set by gsrun for its ranks: its node's agent started early, and the
     * clock the timelines count from. */
    req->early_agent = getenv("GSRUN_EARLY_AGENT") != NULL;
    req->t0_ms = getenv("GSRUN_T0") != NULL ? atoll(getenv("GSRUN_T0")) : 0;
}
