/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun-agent: a job's node agent, started by node.c (gs_node_*), or the
 * user's node service (--mps-share=node, started by a job's agent), with
 * the command line agentcmd.h describes; settings come from the GSRUN_*
 * environment, as for the shim. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <string.h>

#include "runtime/agent/agent.h"
#include "runtime/wire/agentcmd.h"
#include "runtime/core/config.h"

int main(int argc, char **argv)
{
    gs_agent_opts_t o;
    gs_error_t err;

    memset(&o, 0, sizeof(o));
    gs_config_init(&o.cfg);
    if (gs_config_load_env(&o.cfg, &err) != 0) {
        fprintf(stderr, "gsrun-agent: %s\n", err.text);
        return 2;
    }
    if (gs_agentcmd_parse(argc, argv, &o.args, &err) != 0) {
        fprintf(stderr, "gsrun-agent: %s; gsrun-agent is started by gsrun-shim\n", err.text);
        return 2;
    }
    /* Two programs: the user's node service, or a job's agent. */
    return o.args.mode == GS_MODE_SHARED ? gs_agent_service_main(&o) : gs_agent_main(&o);
}
