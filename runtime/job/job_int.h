/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's agent (runtime/job/): its struct over what both programs share
 * (agent_int.h), and what its parts give one another. Nothing of the
 * user's node service (runtime/service/) is seen here: the job reaches it
 * by its lease only (runtime/wire/lease.h). */
#ifndef GS_JOB_INT_H
#define GS_JOB_INT_H

#include <stddef.h>

#include "runtime/agent/agent_int.h"
#include "runtime/files/ledger.h"
#include "runtime/job/attach.h"
#include "runtime/job/placer.h"

/* A job's agent: what both programs share first, then its own. */
typedef struct {
    gs_agent_t agent;
    int early_rc; /* early: MPS failed before the size came, with early_err */
    gs_error_t early_err;
    long long early_ready_ms, size_ms;
    int stop_from; /* early: daemons from this GPU on stop once the ranks came */
    /* The servers are listed (and reported) once the ranks have their
     * answers: the control daemon answers nothing while a server it started
     * sets up its GPU context (get_server_list took 257 ms then on an H100,
     * 2 ms after), and the ranks must not wait for that. */
    int confirm_pending;
    int answered;          /* ranks told their GPU (each answer holds for the state then) */
    long long last_change; /* serving: when a rank last came or went */
    int ended_whole;       /* serving: every rank came and went (nothing to end) */
    int base_told;         /* gs_agent_tell_base said it */
    int gpus_ask_told;     /* why the shared agent told no GPUs was said */

    /* Its lease on the user's node service (the connection, -1: none), the
     * service's node dir and each plan server's index there. */
    int share_fd;
    int share_refused_own; /* its lease refused by the shared agent it started */
    int share_linger_s;    /* the linger its lease asked for (gs_policy_linger) */
    char share_dir[256];
    int share_server[GS_MAX_GPUS];
    int fault_told[GS_MAX_GPUS]; /* on shared servers: faults told of, each entry */

    /* Each rank's MPS state as the driver shows it (agent_watch.c). */
    gs_attach_t attach;
    int watching;          /* serving with MPS: the ranks are watched */
    int watch_changed;     /* a state changed since the status was written */
    int watch_own_nvml;    /* the node service did not list the GPUs: this agent's NVML */
    long long watch_due_ms, nvml_due_ms; /* the next look, the next NVML listing */
    long long recheck_ms;  /* the next NVML look at the clients' trees (a worker without MPS) */
    /* Each entry's control daemon asked for its clients (a log line said a
     * rank's state): pending, and when it was asked last. */
    unsigned char watch_ask[GS_MAX_GPUS];
    int watch_final; /* the job's end: nothing is asked again later */
    long long watch_asked_ms[GS_MAX_GPUS];
    long long memory_due_ms; /* the ranks' GPU memory's next look (agent_memory.c) */
    long long fault_at_ms; /* a GPU fault ended a rank's context (the grace runs) */
    char fault_end_why[400];
    /* Ranks that wait on a wedged daemon (agent_stuck.c): when each entry's
     * daemon is probed next, and whether this wedge was told (once until
     * it answers). */
    long long stuck_next_ms[GS_MAX_GPUS];
    unsigned char stuck_told[GS_MAX_GPUS];

    gs_ledger_t ledger; /* the user's placement record of the node: this job's entry */
    int pack_moved;     /* early: the packing moved the early daemons' GPUs */
    int gpu_pos[GS_MAX_GPUS]; /* gpus.gpu[k]'s place among the visible GPUs (packing
                               * reorders them): its number in messages and status */

    gs_ranks_t ranks;
    gs_placer_t placer;
} gs_job_t;

/* The job's own part of a (a job's agent's: its program's hooks and steps). */
static inline gs_job_t *gs_job(gs_agent_t *a)
{
    return (gs_job_t *)((char *)a - offsetof(gs_job_t, agent));
}
static inline const gs_job_t *gs_job_const(const gs_agent_t *a)
{
    return (const gs_job_t *)((const char *)a - offsetof(gs_job_t, agent));
}

/* agent.c: its table of states. */
extern const gs_agent_step_t gs_agent_job_states[GS_AGENT_NSTATES];

/* agent_status.c: the job's agent's hooks for the node state (its
 * placement record's entry; without MPS, each GPU's ranks) and the status
 * (its ranks and their rows). */
void gs_agent_job_state(const gs_agent_t *a, gs_state_t *st);
void gs_agent_job_status(const gs_agent_t *a, gs_status_t *s);
/* agent_fault_job.c: the job's agent's fault hook: the ranks MPS ended
 * marked faulted (the grace), told at once with what the grace will do. */
void gs_agent_job_fault(gs_agent_t *a, int g, const char *label, const char *uuid,
                        const char *at, const pid_t *hit, int nhit, const char *who);

/* local rank of pid (for MPS's log lines), a gs_rank_of_pid_fn. */
int gs_agent_rank_of_pid(const void *agent, pid_t pid);

/* agent_fault_job.c. The ranks whose context a fault ended that still run
 * ("0-1,4" into buf): how many. What the fault grace looks at
 * (agent_watch.c). */
int gs_agent_fault_running(const gs_agent_t *a, char *buf, size_t len);
/* A job's agent on the user's shared servers: whether their logs show a
 * fault the shared agent has not told yet (the
 * job's end waits a moment for its word: ranks the fault ended may end
 * the job before the line is read). */
int gs_agent_fault_untold(gs_agent_t *a);
/* "fault S <time> <PIDs>" from the shared agent on the lease: its server S
 * hit a fault its control daemon confirmed, which ended the clients named
 * (it names only those its daemon listed); this job's ranks among them
 * are told once in its report. */
void gs_agent_fault_told(gs_agent_t *a, const char *line);

/* agent_serve.c: the job agent's messages and its waiting states. */
extern const gs_agent_msg_t gs_agent_job_messages[];
/* SIZING: the node's size from its first rank; 0 if the launcher ended
 * first or the agent was told to stop. */
int gs_agent_wait_size(gs_agent_t *a);
/* SERVING: registrations and exits until every rank has exited, the
 * launcher is gone, or the agent is told to stop (the ranks still alive
 * are then ended). */
void gs_agent_serve(gs_agent_t *a);
/* HOLDING: until "stop" on the socket (its connection becomes the report's
 * way out) or a signal; a task prolog's request for servers is served
 * meanwhile. */
void gs_agent_hold(gs_agent_t *a);
/* FAILED: until the launcher is gone. */
void gs_agent_wait_launcher(gs_agent_t *a);
/* The ranks registered: answers held by placement, daemons the plan does
 * not use stopped, daemons moved off the ranks' cores, status. */
void gs_agent_ranks_came(gs_agent_t *a);

/* agent_stuck.c, a job's agent: ranks whose CUDA started a while ago and
 * that are no client yet: their daemon probed (bounded), and when it is
 * wedged the ranks are told, and it is replaced (the job's own) or its
 * shared agent asked to (a lease). The ms to its next look, -1 none. */
void gs_agent_stuck_check(gs_agent_t *a);
int gs_agent_stuck_timeout(const gs_agent_t *a);

/* agent_lease.c, a job's agent. Leases the plan's servers on the user's
 * shared agent of this node (starting it when none runs) and takes them as
 * its daemons (borrowed). 0, or -errno with err. */
int gs_agent_share_join(gs_agent_t *a, gs_error_t *err);
/* A job agent's GPUs into a->gpus: where it will lease from the user's
 * node service, it takes them from the service when one runs (no NVML
 * loaded here), else lists them itself; then applies CUDA_VISIBLE_DEVICES.
 * (The service lists every GPU itself: agent_service.c.) 0, or -errno
 * with err. */
int gs_agent_share_list_gpus(gs_agent_t *a, gs_error_t *err);
/* Gives its lease back. */
void gs_agent_share_leave(gs_agent_t *a);
/* The lease to watch while the job runs, and what it hears there (a
 * server's death, the shared agent's end). */
int gs_agent_lease_fds(gs_agent_t *a, struct pollfd *p, int max);
void gs_agent_lease_ready(gs_agent_t *a, const struct pollfd *p, int n);
/* The same, looked at now without waiting (before a rank is answered). */
void gs_agent_lease_poll(gs_agent_t *a);
/* The shared agent's state and status, as a job takes its servers from
 * them (no status: no PIDs): 0, or a negative errno with err; the caller
 * frees both, also on error. */
int gs_agent_lease_read_service(const gs_agent_t *a, gs_state_t **st, gs_status_t **ss,
                                gs_error_t *err);
/* Entry e as the shared agent's server s (s < st->nservers): its GPU and
 * dirs from the state, its PIDs and core from the status (0: not listed). */
void gs_agent_lease_take(gs_agent_t *a, int e, int s, const gs_state_t *st,
                         const gs_status_t *ss);

/* agent_watch.c: whether each rank really is an MPS client (attach.h),
 * told at once when not; a GPU fault's grace. */
int gs_agent_watch_start(gs_agent_t *a);
void gs_agent_watch_registered(gs_agent_t *a, int rank, pid_t pid);
/* After each wake-up of the serving wait; the ms to its next look, -1. */
void gs_agent_watch_check(gs_agent_t *a);
int gs_agent_watch_timeout(const gs_agent_t *a);
/* Ranks left the table (exited): from now on nobody's (their PIDs may be
 * reused), and no fault of theirs holds the grace. */
void gs_agent_watch_dropped(gs_agent_t *a);
/* The last look at the job's end: the logs' last lines, each line that
 * waits for its daemon's word settled (a rank gone stands by its line). */
void gs_agent_watch_final(gs_agent_t *a);
/* "served 3 of 4 ranks as MPS clients; 1 ran on the GPU without MPS (rank
 * 2)", or that no rank used the GPU (-v: what was wrong was told while the
 * job ran). */
void gs_agent_watch_summary(const gs_agent_t *a, char *buf, size_t len);

/* agent_memory.c: each rank's GPU memory from NVML's listing (only read:
 * no state is taken from it), looked at this often while a rank has
 * started CUDA, and summed up at the job's end. */
#define GS_AGENT_MEMORY_EVERY_MS 1000
/* The node's GPUs and their processes now: the node service's listing where
 * the job leases its servers, else this agent's own NVML (kept started). */
int gs_agent_memory_listing(gs_agent_t *a, gs_gpu_list_t *l);
/* The ranks' and the servers' memory from listing l. */
void gs_agent_memory_take(gs_agent_t *a, const gs_gpu_list_t *l);
/* A look when one is due; the ms to the next one (-1 none). */
void gs_agent_memory_look(gs_agent_t *a, long long now);
int gs_agent_memory_timeout(const gs_agent_t *a, long long now);
/* Each GPU's ranks' peak memory, a line each into the report: with -v, and
 * always where the largest came within 10 % of --mps-memory-limit. */
void gs_agent_memory_summary(gs_agent_t *a);
/* agent_lease_gpus.c: the node's GPUs as the user's node service (the
 * shared agent) lists them now, with their processes; 0, or -errno. */
int gs_agent_share_listing(gs_agent_t *a, gs_gpu_list_t *l);
/* The shared agent's dirs and socket (runtime/files/share_dir.h), its node
 * dir into a->share_dir (make: the user's base made when missing, and where
 * other users took its name, said once). 0, or -errno with err. */
int gs_agent_share_socket(gs_agent_t *a, char *dir, size_t dlen, char *sock, size_t slen,
                          int make, gs_error_t *err);
/* agent_pack.c: says once (-v) why the user's base is not
 * <TMPDIR>/gsrun-<uid> (taken: "" says nothing), and what is used. */
void gs_agent_tell_base(gs_agent_t *a, const char *taken, const char *used);

/* agent_pack.c: the job's place among the user's jobs on the node. Locks
 * the node's placement record, counts each GPU's load and puts a->gpus in
 * the packing's order (emptiest first); *packed 1 with each GPU's ranks in
 * counts when other jobs or processes load a GPU (0: plan as alone). The
 * record stays locked until gs_agent_pack_record writes the job's entry
 * from the plan. 0 always: a job that cannot see the others plans by the
 * GPUs' other processes (NVML) alone, and says why. */
int gs_agent_pack(gs_agent_t *a, int *counts, int *packed);
void gs_agent_pack_record(gs_agent_t *a);
/* Ends the decision (the record's lock), then stops the early daemons the
 * packing moved off their GPUs (started again where the job goes). */
void gs_agent_pack_unlock(gs_agent_t *a);
/* The job ended: its entry goes. */
void gs_agent_pack_release(gs_agent_t *a);

/* agent_confirm.c: each daemon's servers recorded and reported as ready
 * (job_long: through gs_agent_confirm_servers_from). */
void gs_agent_confirm_servers(gs_agent_t *a, int job_long);
/* The same, where it waits for the ranks (confirm_pending), once. */
void gs_agent_confirm_pending(gs_agent_t *a);
#endif
