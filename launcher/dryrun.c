/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "launcher/dryrun.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/gs_error.h"
#include "runtime/files/rundir.h"
#include "runtime/gpu/gpu.h"
#include "runtime/plan/policy.h"

/* Every setting gsrun's command line takes, as that option would give it:
 * one line the user can copy. From the settings table, so a new setting
 * shows here with no change to this file. */
static void print_settings(FILE *f, const gs_config_t *cfg)
{
    char value[GS_MAX_VALUE_LEN];
    fprintf(f, "# gsrun %s --dry-run (nothing is started); the settings:\n#  ", PACKAGE_VERSION);
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        if (!(k->fronts & GS_FRONT_GSRUN) || !k->valued || k->format == NULL) {
            continue;
        }
        k->format(cfg, value, sizeof(value));
        fprintf(f, " --%s=%s", k->option, value);
    }
    fprintf(f, " --verbose=%d\n", cfg->verbose);
    if (cfg->share_auto) {
        fprintf(f, "# --mps-share=auto is %s here (%s)\n", cfg->share_node ? "node" : "job",
                cfg->share_node ? "not inside a Slurm job step" : "inside a Slurm job step");
    }
}

/* Where the job's files would go: its run directory, and with a shared
 * share the user's base that holds the shared servers. */
static void print_dirs(FILE *f, const gs_config_t *cfg)
{
    char node[64];
    const char *tmp = getenv("TMPDIR");
    gs_rundir_node_name(node, sizeof(node));
    fprintf(f, "# run directory: %s/gsrun.XXXXXX (%s), removed at the job's end\n",
            gs_rundir_tmpdir(), tmp != NULL && tmp[0] != '\0' && strcmp(tmp, "/tmp") != 0
                                    ? "from TMPDIR"
                                    : "TMPDIR unset or /tmp: /dev/shm where usable");
    if (cfg->share_node) {
        fprintf(f, "# the user's shared MPS servers: %s/gsrun-%u/mps-share/%s, up %s after the "
                   "user's last job on the node (gsrun stop ends them)\n",
                gs_rundir_tmpdir(), (unsigned)getuid(), node,
                cfg->linger_auto ? "60 s (auto)" : cfg->linger_s == 0 ? "0 s" : "--mps-linger");
    }
}

/* The plan the node agent would make for ranks ranks on this node's GPUs
 * (the same function, gs_policy_plan_packed); the user's other jobs and
 * the ranks' programs can still change it when the job runs. */
static void print_plan(FILE *f, const gs_config_t *cfg, int ranks)
{
    static gs_gpu_list_t gpus;
    static gs_plan_t plan;
    gs_error_t err;
    char node[64], control[PATH_MAX];

    gs_rundir_node_name(node, sizeof(node));
    if (ranks <= 0) {
        fprintf(f, "# plan: the command line gives no rank count (-np N): gsrun plans when the "
                   "ranks come\n");
        return;
    }
    if (gs_gpu_discover(&gpus, &err) != 0) {
        fprintf(f, "# plan on this node (%s): the GPUs cannot be listed: %s\n", node, err.text);
        return;
    }
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (vis != NULL && gs_gpu_filter_visible(&gpus, vis, &err) != 0) {
        gpus.count = 0;
        snprintf(gpus.reason, sizeof(gpus.reason), "%s", err.text);
    }
    int have_control = gs_config_find_executable(cfg->control, GS_CONTROL_SEARCH_DIRS,
                                                 "MPS control program", control, sizeof(control),
                                                 &err) == 0;
    fprintf(f, "# plan on this node (%s) for %d rank%s: ", node, ranks, ranks == 1 ? "" : "s");
    if (gpus.count == 0) {
        fprintf(f, "no NVIDIA GPU, so the ranks would run without MPS: %s\n", gpus.reason);
        return;
    }
    int per_server = gs_policy_clients_per_server(cfg->clients_per_server, gpus.cuda_version);
    /* Blocks of ranks (counts NULL) as for a job alone on the node; with
     * the user's shared servers a rank alone on its GPU is a client too. */
    if (gs_policy_plan_packed(cfg, ranks, gpus.count, NULL, have_control,
                              have_control ? "" : err.text, per_server, &plan, &err) != 0) {
        fprintf(f, "the job would not start: %s\n", err.text);
        return;
    }
    if (!plan.use_mps) {
        fprintf(f, "without MPS: %s\n", plan.reason);
        return;
    }
    fprintf(f, "MPS on %d of %d GPU%s (%s)\n", plan.nused, gpus.count, gpus.count == 1 ? "" : "s",
            have_control ? control : "control program not found");
    for (int s = 0; s < plan.nservers; s++) {
        const gs_server_share_t *x = &plan.server[s];
        fprintf(f, "#   GPU %d (%s, %s), MPS server %d of %d: local ranks %d-%d, ",
                gpus.gpu[x->gpu].index, gpus.gpu[x->gpu].name, gpus.gpu[x->gpu].uuid,
                x->server + 1, x->gpu_servers, x->first_rank, x->first_rank + x->nranks - 1);
        if (x->pct_set) {
            fprintf(f, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s each\n", x->pct_text);
        } else {
            fprintf(f, "no CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\n");
        }
    }
}

void gs_dryrun_print(FILE *f, const gs_config_t *cfg, int ranks_at_most)
{
    print_settings(f, cfg);
    print_dirs(f, cfg);
    print_plan(f, cfg, ranks_at_most);
}
