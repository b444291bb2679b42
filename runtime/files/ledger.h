/* SPDX-License-Identifier: BSD-3-Clause */
/* The user's placement record of a node: which of the user's running jobs
 * put how many ranks on which GPU, so that a job packs its ranks where the
 * node has room (runtime/plan/pack.h).
 *
 * Layout, in the user's private base (gs_rundir_user_base_any):
 *   <base>/place/<node>/               0700; its flock orders the node's decisions
 *   <base>/place/<node>/<job>.<pid>    one job's entry: "<UUID> <ranks>" lines
 * A job's agent holds a shared flock on its entry for as long as the job
 * runs, and so does each of its ranks (gs_ledger_hold: an agent killed with
 * its guard leaves the ranks' GPUs counted until they end); an entry whose
 * flock can be taken exclusively belongs to a job that is gone (ended, or
 * SIGKILLed: the kernel drops the flocks with the processes) and is removed
 * by whoever finds it. Decisions are made one at a time: under the
 * dir's flock a job reads the entries, plans and writes its own. */
#ifndef GS_LEDGER_H
#define GS_LEDGER_H

#include <stddef.h>

#include "runtime/core/gs_error.h"
#include "runtime/gpu/gpu.h"

#define GS_LEDGER_DIR "place"
#define GS_LEDGER_MAGIC "gsrun-place 1"
#define GS_LEDGER_ENTRY_MAX 4096 /* bytes an entry may hold (64 GPUs' lines) */

typedef struct {
    char top[512];  /* <base>/place */
    char dir[512];  /* <base>/place/<node> */
    int lock_fd;    /* the dir's flock while deciding, -1 */
    int entry_fd;   /* this job's entry, flocked while the job runs, -1 */
    char entry[640];
    char taken[512]; /* why the user's base is not <TMPDIR>/gsrun-<uid> ("": it is) */
    int stuck; /* the dir's flock stayed held past the wait (a process of the user's
                * holds it): the job is entered without it, and its end waits for
                * nothing */
} gs_ledger_t;

void gs_ledger_init(gs_ledger_t *l);

/* Whether a job of this run dir takes part: not a step or job a batch
 * system provisioned through root (dirs "slurm-<job>.<step>", "job-<id>":
 * the SPANK plugin, a prolog). Their GPUs are the scheduler's, and the batch
 * system ends a step's processes all at once (cgroups), leaving nobody to
 * remove the step's entry. */
int gs_ledger_applies(const char *job_dir);

/* The record of this node in the user's base (made when missing), locked
 * for a decision: waits up to timeout_ms for the jobs deciding before. 0,
 * or -errno with err; -ETIMEDOUT sets stuck: the entries can still be read
 * and the job's written, without the lock. */
int gs_ledger_lock(gs_ledger_t *l, const char *node, int timeout_ms, gs_error_t *err);

/* Sums the live entries' ranks on each of the gpus (by UUID) into load
 * (zeroed first); removes the entries of jobs that are gone. Returns the
 * number of live jobs. */
int gs_ledger_load(gs_ledger_t *l, const gs_gpu_t *gpus, int ngpus, int *load);

/* Writes this job's entry (ranks[g] on gpus[g], those with ranks only) and
 * keeps its flock until gs_ledger_close. 0, or -errno with err. */
int gs_ledger_record(gs_ledger_t *l, const char *job, const gs_gpu_t *gpus, int ngpus,
                     const int *ranks, gs_error_t *err);

/* A rank's shared flock on its job's entry, held across exec for the rank's
 * life: the descriptor, or -errno (the rank runs all the same). */
int gs_ledger_hold(const char *entry);

/* Ends the decision (the dir's flock); the entry stays. */
void gs_ledger_unlock(gs_ledger_t *l);

/* The job ended: its entry goes (its count freed at once), the flocks too. */
void gs_ledger_close(gs_ledger_t *l);

/* One live job's entry, for `gsrun status`. */
typedef struct {
    char job[96];
    int n;
    char uuid[GS_MAX_GPUS][96];
    int ranks[GS_MAX_GPUS];
} gs_ledger_job_t;

/* Calls fn for each live job's entry in dir (a node's record), without
 * taking the dir's lock or removing anything (a reader, maybe root);
 * returns how many. */
int gs_ledger_each(const char *dir, void (*fn)(void *ctx, const gs_ledger_job_t *job), void *ctx);

/* The record by GPU, for `gsrun status`: each GPU with ranks of the
 * user's jobs, their total and each job's ("gsrun.Ab12Cd:3 exec-...:1"). */
typedef struct {
    int n;
    struct {
        char uuid[96];
        int ranks, njobs;
        char jobs[4096];
        int more; /* jobs that did not fit in jobs (counted in njobs and ranks) */
    } gpu[GS_MAX_GPUS];
} gs_ledger_summary_t;
int gs_ledger_summarize(const char *dir, gs_ledger_summary_t *sum);

/* The caller's record of node, in the first of the caller's bases that
 * holds one (none is made); 1 with its path in dir, else 0. */
int gs_ledger_find(const char *node, char *dir, size_t len);

/* Removes the entries of jobs that are gone from the caller's record of
 * node, and the record when none is left (a killed agent's guard: its
 * entry no longer counts, and nothing of it may stay). Bounded. */
void gs_ledger_tidy(const char *node);

/* <base>/place/<node> of the user whose base is base, into out. */
int gs_ledger_path(const char *base, const char *node, char *out, size_t len);

#endif
