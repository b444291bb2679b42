/* SPDX-License-Identifier: BSD-3-Clause */
/* Placement in the agent: which GPU each rank gets (runtime/placement.c
 * decides; this file gathers the ranks' CPUs and answers them), and daemon
 * cores kept clear of the cores the ranks are bound to. */
#include "gs_autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "affinity.h"
#include "agent_int.h"
#include "placement.h"
#include "proc.h"

int gs_agent_place_init(gs_agent_t *a, int mps_on)
{
    int n = a->o->local_size;

    a->place_n = 0;
    if (mps_on) {
        a->place_n = a->plan.ngpus;
        for (int g = 0; g < a->place_n; g++) {
            a->place_target[g] = a->plan.gpu[g].nranks;
        }
    } else if (a->gpus.count > 0 && a->o->cfg.gpu_bind) {
        /* One GPU per rank: blocks when there are more ranks than GPUs (then
         * they share without MPS), else any GPU may take one rank. */
        a->place_n = a->gpus.count;
        for (int g = 0; g < a->place_n; g++) {
            int first = (int)((long)g * n / a->place_n), next = (int)((long)(g + 1) * n / a->place_n);
            a->place_target[g] = n >= a->place_n ? next - first : 1;
        }
    }
    /* Waiting for every rank would deadlock a launcher that starts each rank
     * only after the one before has exec'd. */
    a->by_locality = a->place_n > 1 && !a->o->in_sequence &&
                     gs_place_by_locality(a->gpus.gpu, a->place_n);
    a->place_deadline = gs_now_ms() + (long long)a->o->cfg.timeout_s * 1000;
    a->rank_gpu = malloc((size_t)n * sizeof(*a->rank_gpu));
    a->rank_cpus = calloc((size_t)n, sizeof(*a->rank_cpus));
    a->rank_known = calloc((size_t)n, 1);
    if (a->rank_gpu == NULL || a->rank_cpus == NULL || a->rank_known == NULL) {
        return -ENOMEM;
    }
    for (int r = 0; r < n; r++) {
        a->rank_gpu[r] = -1;
    }
    return 0;
}

void gs_agent_place_free(gs_agent_t *a)
{
    free(a->rank_gpu);
    free(a->rank_cpus);
    free(a->rank_known);
    a->rank_gpu = NULL;
    a->rank_cpus = NULL;
    a->rank_known = NULL;
}

/* Rank r's GPU in blocks of consecutive ranks (the targets in order). */
static int block_gpu(const gs_agent_t *a, int rank)
{
    for (int g = 0, first = 0; g < a->place_n; first += a->place_target[g], g++) {
        if (rank < first + a->place_target[g]) {
            return g;
        }
    }
    return -1;
}

/* A rank that came after placement: the first GPU with room. */
static int late_gpu(const gs_agent_t *a, int rank)
{
    int load[GS_MAX_GPUS] = {0};
    for (int r = 0; r < a->o->local_size; r++) {
        if (a->rank_gpu[r] >= 0) {
            load[a->rank_gpu[r]]++;
        }
    }
    for (int g = 0; g < a->place_n; g++) {
        if (load[g] < a->place_target[g]) {
            return g;
        }
    }
    return block_gpu(a, rank);
}

static void answer(gs_rank_t *r, int gpu)
{
    if (r->conn < 0) {
        return;
    }
    dprintf(r->conn, "ok %s gpu=%d\n", r->is_pidfd ? "pidfd" : "socket", gpu);
    if (r->is_pidfd) {
        close(r->conn);
    }
    r->conn = -1;
}

void gs_agent_place_rank(gs_agent_t *a, gs_rank_t *r, const cpu_set_t *cpus)
{
    if (cpus != NULL) {
        a->rank_cpus[r->rank] = *cpus;
        a->rank_known[r->rank] = 1;
    }
    if (a->place_n > 0 && (!a->by_locality || a->placed)) {
        a->rank_gpu[r->rank] = a->placed ? late_gpu(a, r->rank) : block_gpu(a, r->rank);
    }
    if (a->place_n == 0 || !a->by_locality || a->placed) {
        answer(r, a->rank_gpu[r->rank]);
    }
    /* else: held until every rank has come (gs_agent_place_flush) */
}

/* The ranks bound to fewer CPUs than the node has: their CPUs together. */
static int bound_cpus(const gs_agent_t *a, cpu_set_t *out)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_ZERO(out);
    for (int r = 0; r < a->o->local_size; r++) {
        if (a->rank_known[r] && CPU_COUNT(&a->rank_cpus[r]) < online) {
            CPU_OR(out, out, &a->rank_cpus[r]);
        }
    }
    return CPU_COUNT(out);
}

/* A daemon pinned to a core a rank is bound to moves to a free core near
 * its GPU, with its server, when there is one. */
static void move_daemons(gs_agent_t *a)
{
    cpu_set_t ranks;
    if (bound_cpus(a, &ranks) == 0) {
        return;
    }
    for (int g = 0; g < a->ndaemons; g++) {
        cpu_set_t avoid = ranks, to, both;
        const gs_gpu_t *gpu = &a->gpus.gpu[g];
        char desc[96];
        CPU_AND(&both, &a->daemon_cpus[g], &ranks);
        if (CPU_COUNT(&both) == 0 || a->daemon[g].daemon_pid <= 0) {
            continue;
        }
        for (int o = 0; o < a->ndaemons; o++) {
            if (o != g) {
                CPU_OR(&avoid, &avoid, &a->daemon_cpus[o]);
            }
        }
        gs_affinity_pick_core(gpu->have_cpumask ? gpu->cpumask : NULL, GS_GPU_CPUMASK_WORDS,
                              &avoid, &to, desc, sizeof(desc));
        CPU_AND(&both, &to, &ranks);
        if (CPU_COUNT(&both) != 0 || CPU_EQUAL(&to, &a->daemon_cpus[g])) {
            gs_agent_report(a, 0, "GPU %d: MPS daemon stays on %s (shared with a rank: no free "
                                  "core near the GPU)", g, a->pinned[g]);
            continue;
        }
        gs_affinity_move(a->daemon[g].daemon_pid, &to);
        for (int i = 0; i < a->daemon[g].nservers; i++) {
            gs_affinity_move(a->daemon[g].server_pid[i], &to);
        }
        gs_agent_report(a, 0, "GPU %d: MPS daemon and server moved from %s to %s (a rank is "
                              "bound there)", g, a->pinned[g], desc);
        a->daemon_cpus[g] = to;
        snprintf(a->pinned[g], sizeof(a->pinned[g]), "%s", desc);
    }
}

void gs_agent_place_ranks_text(const gs_agent_t *a, int g, char *buf, size_t len)
{
    size_t used = 0;
    int n = a->o->local_size;
    buf[0] = '\0';
    for (int r = 0; r < n && used < len; r++) {
        if (a->rank_gpu[r] != g) {
            continue;
        }
        int e = r;
        while (e + 1 < n && a->rank_gpu[e + 1] == g) {
            e++;
        }
        used += (size_t)snprintf(buf + used, len - used, e > r ? "%s%d-%d" : "%s%d",
                                 used ? "," : "", r, e);
        r = e;
    }
}

void gs_agent_place_flush(gs_agent_t *a)
{
    int n = a->o->local_size;

    gs_agent_mark(a, "registered");
    if (a->place_n > 0 && a->by_locality && !a->placed) {
        int idx[n], gpu[n], m = 0;
        unsigned char *near = calloc((size_t)n * (size_t)a->place_n, 1);
        if (near != NULL) {
            for (int r = 0; r < n; r++) {
                if (a->rank_known[r]) {
                    gs_place_near(&a->rank_cpus[r], a->gpus.gpu, a->place_n,
                                  near + (size_t)m * (size_t)a->place_n);
                    idx[m++] = r;
                }
            }
            int close_ones = gs_place_ranks(m, a->place_n, a->place_target, near, gpu);
            for (int i = 0; i < m; i++) {
                a->rank_gpu[idx[i]] = gpu[i];
            }
            gs_agent_report(a, 0, "placement by the ranks' cores: %d of %d ranks on a GPU near "
                                  "them",
                            close_ones, m);
            free(near);
        }
        a->placed = 1; /* late_gpu below and later arrivals place against this */
        for (int i = 0; i < a->nranks; i++) {
            int r = a->ranks[i].rank;
            answer(&a->ranks[i], a->rank_gpu[r] >= 0 ? a->rank_gpu[r] : late_gpu(a, r));
        }
    }
    if (a->stop_from >= 0) {
        gs_agent_stop_mps_from(a, a->stop_from);
        a->stop_from = -1;
    }
    for (int g = 0; g < a->place_n && a->o->cfg.verbose; g++) {
        char list[256];
        gs_agent_place_ranks_text(a, g, list, sizeof(list));
        gs_agent_report(a, 0, "GPU %d (%s): local ranks %s", g, a->gpus.gpu[g].uuid,
                        list[0] ? list : "none");
    }
    move_daemons(a);
    gs_agent_write_status(a);
}
