/* SPDX-License-Identifier: BSD-3-Clause */
/* An MPS server's health, read from its log as the log is written.
 *
 * On Volta and later a fatal GPU fault in one client ends every client of
 * that server, and the server then refuses new clients (807,
 * cudaErrorMpsServerNotReady) until every client it had has exited. The
 * control daemon run in the foreground prints its server's lines (the
 * agent keeps them in control.out); measured with driver 580 (doc/
 * design, A15 and issue 51):
 *
 *   [T Server S] Client {PID: P, Context: 1} encountered a fatal GPU error.
 *   [T Server S] Server is handling a fatal GPU error.
 *   [T Server S] The following client process have a sticky error set:
 *   [T Server S] 560                      (one line per client, every client)
 *   ...
 *   [T Server S] Client process 560 disconnected
 *
 * The PID named first is not reliably the one that faulted: MPS names
 * whichever client it noticed first. */
#ifndef GS_MPS_HEALTH_H
#define GS_MPS_HEALTH_H

#include <stddef.h>
#include <sys/types.h>

#define GS_MPS_HEALTH_PIDS 64

/* What the log says of its clients, as they come (driver 580, an H200):
 *
 *   [T Server S] Status of client {PID: P, Context ID: 1} is ACTIVE
 *   [T Client P] Client requested 1 which is not a valid GPU ID in the MPS
 *                visible set of devices   (its CUDA_VISIBLE_DEVICES)
 *   [T Server S] Client process P disconnected
 *
 * A client in a PID namespace of its own is named by its PID here. The
 * events wait in the health's queue for the agent (gs_mps_health_take). */
typedef enum {
    GS_MPS_CLIENT_ACTIVE = 1, /* a context of P is the server's client */
    GS_MPS_CLIENT_NODEVICE,   /* P's CUDA_VISIBLE_DEVICES names no device of the server */
    GS_MPS_CLIENT_GONE,       /* P disconnected */
} gs_mps_client_ev_t;
#define GS_MPS_HEALTH_EVENTS 128

/* What a line (or a follow) changed: bits. */
#define GS_MPS_EV_FAULT 1     /* a fault began (its client list may still come) */
#define GS_MPS_EV_LISTED 2    /* the fault's client list is whole */
#define GS_MPS_EV_RECOVERED 4 /* the last client that held the fault exited */

typedef struct {
    int fault;        /* in FAULT: a fault was logged and a client of it lives */
    int faults;       /* faults seen so far */
    char at[32];      /* the log's time of the last fault, "2026-11-27 10:43:03.409" */
    pid_t named;      /* the PID MPS named first ("encountered a fatal GPU error"), 0 */
    pid_t held[GS_MPS_HEALTH_PIDS]; /* the fault's clients still connected */
    int nheld;
    pid_t hit[GS_MPS_HEALTH_PIDS]; /* every client MPS listed for the last fault */
    int nhit;
    int listing; /* reading the list of clients with a sticky error */
    int listed;  /* that list is whole */
    /* client events not yet taken (the oldest first); those past the
     * queue's room are dropped and counted */
    pid_t ev_pid[GS_MPS_HEALTH_EVENTS];
    unsigned char ev_kind[GS_MPS_HEALTH_EVENTS];
    int nev, ev_dropped;
    /* following a file */
    long long offset;
    char part[512]; /* a line not yet whole */
    size_t npart;
} gs_mps_health_t;

void gs_mps_health_init(gs_mps_health_t *h);
/* Takes one log line (without its newline); returns GS_MPS_EV_* bits. */
int gs_mps_health_line(gs_mps_health_t *h, const char *line);
/* Reads what was written to path since the last call (a regular file, not
 * followed through a link) and takes each whole line; returns the bits. */
int gs_mps_health_follow(gs_mps_health_t *h, const char *path);
/* The fault's client list is whole though nothing ended it (the log went
 * quiet after its last PID): GS_MPS_EV_LISTED when it was open, else 0. */
int gs_mps_health_settle(gs_mps_health_t *h);
/* The fault taken last was none (its server's daemon denies it): forgotten,
 * as if its lines had not been read. */
void gs_mps_health_dismiss(gs_mps_health_t *h);
/* Drops held clients that no longer exist (a client killed before MPS
 * logged its end); GS_MPS_EV_RECOVERED when none is left. */
int gs_mps_health_prune(gs_mps_health_t *h, int (*alive)(pid_t pid));
/* Moves the client events queued so far into pids/kinds (room max); how
 * many. The queue is then empty. */
int gs_mps_health_take(gs_mps_health_t *h, pid_t *pids, int *kinds, int max);
/* Skips what the log at path holds now (a shared server's log, followed
 * from a job's lease on: earlier lines are other jobs'). */
void gs_mps_health_skip(gs_mps_health_t *h, const char *path);

#endif
