/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's place on a node the user's other jobs share: the load of each GPU
 * the job may use (the user's running jobs from the placement record, other
 * processes from NVML), the packing (runtime/plan/pack.c, pure) and the
 * job's own entry in the record; the entries' read, the packing and the
 * entry under the record's lock, so that jobs starting at once decide one
 * after another. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/job/job_int.h"
#include "runtime/files/ledger.h"
#include "runtime/files/rundir.h"
#include "runtime/gpu/usage.h"
#include "runtime/plan/pack.h"

/* How long a job waits for the jobs deciding before it: each holds the
 * record for a few ms (nothing slow is done under it). Past it the job
 * says so, reads the entries without the lock and is entered all the same. */
#define PACK_LOCK_MS 5000

/* Puts the GPUs in the packing's order: emptiest first. */
static void reorder(gs_agent_t *a, const gs_pack_t *pk)
{
    gs_job_t *j = gs_job(a);
    gs_gpu_list_t *old = malloc(sizeof(*old));
    if (old == NULL) {
        return; /* the GPUs' own order: a plan all the same */
    }
    *old = a->gpus;
    for (int k = 0; k < pk->ngpus; k++) {
        a->gpus.gpu[k] = old->gpu[pk->order[k]];
        j->gpu_pos[k] = pk->order[k];
    }
    free(old);
}

/* Whether the order moves a GPU the early daemons were started on. */
static int moves(const gs_pack_t *pk, int ndaemons)
{
    for (int k = 0; k < pk->ngpus && k < ndaemons; k++) {
        if (pk->order[k] != k) {
            return 1;
        }
    }
    return 0;
}

int gs_agent_pack(gs_agent_t *a, int *counts, int *packed)
{
    gs_job_t *j = gs_job(a);
    int load[GS_MAX_GPUS] = {0}, ours[GS_MAX_GPUS], foreign[GS_MAX_GPUS], n = a->gpus.count;
    gs_pack_t pk;
    gs_error_t err;

    *packed = 0;
    for (int g = 0; g < GS_MAX_GPUS; g++) {
        j->gpu_pos[g] = g;
    }
    if (n < 1 || (a->o->cfg.mps == GS_MPS_OFF && !a->o->cfg.gpu_bind)) {
        return 0; /* the ranks get no GPU of gsrun's choosing */
    }
    if (!gs_ledger_applies(a->o->args.job_dir)) {
        return 0; /* a batch-provisioned step: the scheduler placed it */
    }
    int jobs = 0;
    memset(ours, 0, sizeof(ours));
    /* The GPUs' other processes first, outside the record's lock (a look
     * at /proc for each process NVML listed): the lock covers only the
     * entries' read, the packing and the job's own entry. */
    for (int g = 0; g < n; g++) {
        foreign[g] = gs_usage_foreign(&a->gpus.gpu[g], getuid(), "/proc", gs_rundir_tmpdir());
    }
    if (gs_ledger_lock(&j->ledger, a->o->args.node_name, PACK_LOCK_MS, &err) == 0 ||
        j->ledger.stuck) {
        jobs = gs_ledger_load(&j->ledger, a->gpus.gpu, n, ours);
    }
    gs_agent_tell_base(a, j->ledger.taken, j->ledger.top);
    if (j->ledger.stuck) {
        /* Held by a process of the user's, not a deciding job: the job is
         * placed by the entries as they are and entered without the lock. */
        gs_report_add(&a->report, 1,
                      "the user's placement record %s stayed locked for %d s (a process of the "
                      "user's holds it: 'fuser -v %s' names it): this job is placed by the "
                      "entries as they are, without waiting longer",
                      j->ledger.dir, PACK_LOCK_MS / 1000, j->ledger.dir);
    } else if (j->ledger.lock_fd < 0) {
        /* No record: the GPUs' other processes (NVML) still count. */
        gs_report_add(&a->report, 1,
                      "the job is placed without the user's other jobs: %s; the GPUs' other "
                      "processes still count",
                      err.text);
    }
    for (int g = 0; g < n; g++) {
        load[g] = ours[g] + foreign[g];
    }
    if (gs_pack_compute(a->local_size, n, load, &pk) != 0) {
        return 0;
    }
    if (pk.loaded) {
        char seen[512] = "", used[256] = "";
        size_t len = 0, ulen = 0;
        for (int g = 0; g < n && len < sizeof(seen); g++) {
            len += (size_t)snprintf(seen + len, sizeof(seen) - len, "%s%d+%d", g ? " " : "",
                                    ours[g], foreign[g]);
        }
        for (int k = 0; k < pk.nused && ulen < sizeof(used); k++) {
            ulen += (size_t)snprintf(used + ulen, sizeof(used) - ulen, "%s%d:%d", k ? " " : "",
                                     pk.order[k], pk.counts[k]);
        }
        gs_report_add(&a->report, 0,
                      "placed beside %d other job%s of the user: load per GPU (their ranks + "
                      "other processes) %s; this job's ranks (GPU:ranks) %s",
                      jobs, jobs == 1 ? "" : "s", seen, used);
        if (a->mode == GS_MODE_EARLY && a->daemons.n > 0 && !a->daemons.borrowed &&
            moves(&pk, a->daemons.n)) {
            /* The early daemons sit on the GPUs in their own order: started
             * again where the job goes, once the record's lock is free
             * (gs_agent_pack_unlock: stopping a daemon can take seconds). */
            j->pack_moved = 1;
        }
        reorder(a, &pk);
        memcpy(counts, pk.counts, sizeof(pk.counts));
        *packed = 1;
    }
    return 0;
}

void gs_agent_pack_record(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    int ranks[GS_MAX_GPUS] = {0};
    gs_error_t err;

    if (j->ledger.lock_fd < 0 && !j->ledger.stuck) {
        return; /* no record */
    }
    if (a->plan.nservers > 0 && (a->plan.use_mps || a->o->cfg.gpu_bind)) {
        /* The plan's GPUs, also where MPS is off: the ranks get them. */
        for (int s = 0; s < a->plan.nservers; s++) {
            ranks[a->plan.server[s].gpu] += a->plan.server[s].nranks;
        }
    } else if (a->o->cfg.gpu_bind && a->gpus.count > 0) {
        /* --mps=off: one GPU a rank, the first ones in the order. */
        int used = a->local_size < a->gpus.count ? a->local_size : a->gpus.count;
        for (int g = 0; g < used; g++) {
            ranks[g] = (int)((long)(g + 1) * a->local_size / used) -
                       (int)((long)g * a->local_size / used);
        }
    }
    if (gs_ledger_record(&j->ledger, gs_rundir_job_name(a->o->args.job_dir), a->gpus.gpu,
                         a->gpus.count, ranks, &err) != 0) {
        gs_report_add(&a->report, 0, "the user's later jobs on this node will not see this one: %s",
                      err.text);
    }
    gs_ledger_unlock(&j->ledger);
}

void gs_agent_pack_unlock(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_ledger_unlock(&j->ledger);
    if (j->pack_moved) {
        j->pack_moved = 0;
        gs_daemons_stop_from(&a->daemons, 0, NULL, NULL);
        j->early_rc = 0;
        j->early_ready_ms = 0;
    }
}

void gs_agent_pack_release(gs_agent_t *a)
{
    gs_job_t *j = gs_job(a);
    gs_ledger_close(&j->ledger);
}

void gs_agent_tell_base(gs_agent_t *a, const char *taken, const char *used)
{
    gs_job_t *j = gs_job(a);
    if (taken[0] == '\0' || j->base_told) {
        return;
    }
    j->base_told = 1;
    char base[GS_PATH_MAX];
    const char *slash = strrchr(used, '/'); /* <base>/place, <base>/mps-share */
    snprintf(base, sizeof(base), "%.*s", slash != NULL ? (int)(slash - used) : (int)strlen(used),
             used);
    gs_report_add(&a->report, 0, "the user's files on this node are in %s: %s", base, taken);
}
