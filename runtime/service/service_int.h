/* SPDX-License-Identifier: BSD-3-Clause */
/* The user's node service (runtime/service/): its struct over what both
 * programs share (agent_int.h), and what its parts give one another.
 * Nothing of a job's agent (runtime/job/) is seen here: jobs reach the
 * service by their leases only (runtime/wire/lease.h). */
#ifndef GS_SERVICE_INT_H
#define GS_SERVICE_INT_H

#include <stddef.h>

#include "runtime/agent/agent_int.h"

/* --mps-share=node: a job agent's lease on the user's shared agent, as the
 * shared agent keeps it (agent_share.c). */
#define GS_AGENT_LEASES_MAX GS_AGENT_EXTRA_MAX /* each one the wait's own */
typedef struct {
    int fd; /* the job agent's connection: the lease ends with it */
    pid_t pid;
    char job[96];
    int linger_s;
    int n;                   /* entries placed (all of them once answered) */
    int server[GS_MAX_GPUS]; /* each entry's server (an index into the daemons) */
    int clients[GS_MAX_GPUS];
    int want_n; /* the entries asked for: each one's GPU and clients */
    int want_gpu[GS_MAX_GPUS];
    int want_clients[GS_MAX_GPUS];
    int starting; /* the server begun for entry n (agent_share_place.c), -1 none */
    int waiting;  /* not answered yet: no line but the answer goes to fd */
    char wedged[400]; /* a wedged server replaced for it: told after the answer */
} gs_agent_lease_t;

/* Jobs whose "gpus" wait for a fresh listing (more are refused: they list
 * the GPUs themselves). */
#define GS_AGENT_GPUS_WAITING 64

/* The user's node service: what both programs share first, then its
 * leases, the clients leased on each server, since when no job holds one
 * and for how long it stays. */
typedef struct {
    gs_agent_t agent;
    gs_agent_lease_t *leases;
    int nleases, ever_leased, linger_ms;
    int retiring; /* `gsrun stop`: no new lease; it ends with the last job's lease */
    int leased[GS_MAX_GPUS];
    unsigned char lost_told[GS_MAX_GPUS];    /* a dead server's jobs were told */
    long long share_confirm_ms[GS_MAX_GPUS]; /* when a new server's PIDs are listed, 0 done */
    int share_starting;                      /* the server whose start is under way, -1 none */
    long long share_start_deadline;          /* its start's bound (--mps-timeout) */
    long long idle_since;
    struct gs_lister *lister; /* the GPUs listed in a thread of their own ("gpus": lister.h) */
    int lister_stuck;       /* its NVML call outlived the agent's end: _exit */
    gs_gpu_list_t *listing; /* the listing last told to a job */
    int gpus_waiting[GS_AGENT_GPUS_WAITING]; /* "gpus" asked while no listing was fresh */
    int ngpus_waiting;
    /* Wedged servers (agent_share_wedge.c): when each last answered. */
    unsigned char share_shun[GS_MAX_GPUS]; /* given to no new job: 1 wedged and left running
                                            * (held by jobs, or replaced twice), 2 ended by
                                            * gsrun with none in its place */
    long long share_answered_ms[GS_MAX_GPUS];
} gs_service_t;

/* The service's own part of a (its program's hooks and steps). */
static inline gs_service_t *gs_service(gs_agent_t *a)
{
    return (gs_service_t *)((char *)a - offsetof(gs_service_t, agent));
}
static inline const gs_service_t *gs_service_const(const gs_agent_t *a)
{
    return (const gs_service_t *)((const char *)a - offsetof(gs_service_t, agent));
}

/* agent_service.c: its table of states. */
extern const gs_agent_step_t gs_agent_service_states[GS_AGENT_NSTATES];

/* runtime/service/agent_share.c: the node service (--mps-share=node). */
/* The shared agent (GS_MODE_SHARED): no server until a job leases one. */
void gs_agent_share_open(gs_agent_t *a);
/* HOLDING: leases come and go (its own messages: lease, gpus, retire,
 * stop --now) until the last has gone and its linger is over, or a
 * signal. */
void gs_agent_share_hold(gs_agent_t *a);
extern const gs_agent_msg_t gs_agent_service_messages[];
/* Stops taking leases (its socket goes) before the servers stop. */
void gs_agent_share_close(gs_agent_t *a);
/* The lines on a lease (lost, fault, renew, wedged) are written and read
 * by runtime/wire/lease.h only. */
/* agent_share_wedge.c: whether shared server s may be handed out: 1 when
 * it answered (asked at most every second), or was wedged and a fresh one
 * took its place in its dirs (told then says so, for the job); 0 when it
 * has died, or is wedged and stays (other jobs' ranks hold it, or it was
 * replaced twice already: given to no new job), or no fresh one could
 * start (its jobs are told it is lost). mine: clients of s that the
 * asking job holds (they do not keep it from being replaced). */
int gs_agent_share_sound(gs_agent_t *a, int s, int force, int mine, char *told, size_t len);
/* A job said its ranks wait on shared server s: probed at once. */
void gs_agent_share_on_wedged(gs_agent_t *a, int lease, const char *line);

/* agent_share_place.c: the GPU of a UUID among the agent's, or -1; the
 * waiting leases placed (each answered once its servers serve, or
 * refused); the start under way looked at (then the leases placed); how
 * soon to look again (ms, -1: no start under way). */
int gs_agent_share_gpu_by_uuid(const gs_agent_t *a, const char *uuid);
void gs_agent_share_place(gs_agent_t *a);
void gs_agent_share_starting(gs_agent_t *a);
int gs_agent_share_start_ms(const gs_agent_t *a);
/* Lease i ended: its clients given back, its connection closed, the last
 * lease moved into slot i; the last one gone, the service lingers
 * linger_ms from now. */
void gs_agent_share_end(gs_agent_t *a, int i, int linger_ms);
/* Lease i refused with why: its job told, the lease ended (serving no one,
 * the agent goes now). */
void gs_agent_share_refuse(gs_agent_t *a, int i, const char *why);

/* The node service: one line (wire/lease.h's, n bytes; nothing when n <= 0,
 * it did not fit) to every answered lease on server s, once each. */
void gs_agent_tell_leases(gs_agent_t *a, int s, const char *line, int n);
#endif
