/* SPDX-License-Identifier: BSD-3-Clause */
/* The rank table: the node's ranks that registered, how each is followed
 * (a pidfd, or the connection it keeps across exec), who is still alive, and
 * ending the ones left when the job ends early. Knows nothing of GPUs,
 * sockets' contents or MPS. */
#ifndef GS_AGENT_RANKS_H
#define GS_AGENT_RANKS_H

#include <sys/types.h>

/* How long ranks get to exit after SIGTERM before SIGKILL when the agent
 * (or its guard) ends them: the whole teardown of a node fits in 2 s. */
#define GS_RANKS_TERM_MS 1000

typedef struct {
    int fd; /* pidfd, or the rank's connection */
    int is_pidfd;
    int conn; /* the registration, while its answer waits; else -1 */
    pid_t pid;
    int rank; /* local rank, -1 for a process the guard follows */
} gs_rank_t;

typedef struct {
    int size;        /* local ranks expected */
    gs_rank_t *live; /* registered and not yet exited */
    int nlive;
    gs_rank_t *seen; /* every registration, in order (naming PIDs in MPS's logs) */
    int registered;
} gs_ranks_t;

/* 0 or -ENOMEM. */
int gs_ranks_init(gs_ranks_t *t, int size);
/* Closes what is still open and frees. */
void gs_ranks_free(gs_ranks_t *t);
/* The PID that registered local rank `rank` already (alive or not), or 0. */
pid_t gs_ranks_holder(const gs_ranks_t *t, int rank);
/* Whether another registration can be taken for this local rank. */
int gs_ranks_accepts(const gs_ranks_t *t, int rank);
/* Records a registration of pid for local rank `rank` on connection conn:
 * with a pidfd the pidfd follows the process (the connection goes once
 * answered), else the connection, which the rank keeps across exec and the
 * kernel closes when it exits. Returns the live entry. */
gs_rank_t *gs_ranks_add(gs_ranks_t *t, pid_t pid, int rank, int conn);
/* The live entry i has exited: closes its descriptors, forgets it. */
void gs_ranks_drop(gs_ranks_t *t, int i);
/* Whether every expected rank has registered. */
int gs_ranks_complete(const gs_ranks_t *t);
/* The local rank that registered as pid, or -1. */
int gs_ranks_rank_of_pid(const gs_ranks_t *t, pid_t pid);
/* The PID local rank r registered as, 0 if it has not. */
pid_t gs_ranks_pid_of_rank(const gs_ranks_t *t, int r);
/* poll events that say a live entry's process exited: a pidfd becomes
 * readable; a connection kept across exec only hangs up (its read side is
 * at end of file from the start: POLLIN would see every rank gone). */
short gs_ranks_events(const gs_rank_t *r);

/* Ends the given processes: SIGTERM, up to term_ms for them to exit,
 * SIGKILL. Returns how many needed SIGKILL. */
int gs_ranks_end(gs_rank_t *ranks, int n, int term_ms);
/* A process to follow by PID only (the guard): a pidfd where there is one. */
void gs_ranks_follow(gs_rank_t *r, pid_t pid);

/* The process a registration speaks for: the peer, or with parent the
 * peer's parent (a Slurm task prolog speaks for its task), which must be
 * ours too. 0 if not acceptable. */
pid_t gs_ranks_registered_pid(pid_t peer, int parent);

#endif
