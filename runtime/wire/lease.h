/* SPDX-License-Identifier: BSD-3-Clause */
/* The lease: every line a job's agent and the user's node service
 * (--mps-share=node, "gsrun-share") exchange, written and read here only,
 * so that the two programs cannot drift apart on a byte. All lines end in
 * "\n"; each is written in one write, short enough to be read whole.
 *
 *   job -> service      lease <linger s> <job> <n> <GPU UUID> <clients>...
 *   service -> job      ok <server>...   |  error <why>   (the refusal)
 *   job -> service      gpus
 *   service -> job      gpus <count> <CUDA version> <beyond> <why none|->,
 *                       then <count> device lines (gs_gpu_to_line, gpu layer)
 *   gsrun stop -> service   stop | retire
 *   service -> job, on a lease   lost <S> signal|status|wedged <N>
 *                                fault <S> <time, spaces as T> <PID>...
 *                                renew <S>
 *                                wedged <text for the job's user>
 *   job -> service, on its lease wedged <S>
 *
 * Formats return the line's length, or -ENOSPC when buf is too small (or
 * -EINVAL for a field the line cannot carry); parses return 0, or -EINVAL
 * for a line that is not the message. */
#ifndef GS_LEASE_H
#define GS_LEASE_H

#include <stddef.h>
#include <sys/types.h>

#include "runtime/core/limits.h"

/* The verbs the service's message table answers (its rows' first word). */
#define GS_LEASE_VERB_LEASE "lease"
#define GS_LEASE_VERB_GPUS "gpus"
#define GS_LEASE_VERB_RETIRE "retire"
/* `gsrun stop --now`: the same line a job-long agent takes from gsrun
 * epilog (GS_PROTO_STOP); its connection then carries the report. */
#define GS_LEASE_STOP "stop\n"
/* `gsrun stop`: no new lease; the service ends once its jobs have. */
#define GS_LEASE_RETIRE "retire\n"
/* A job asks for the node's GPUs as the service lists them. */
#define GS_LEASE_GPUS_ASK "gpus\n"

/* Which message a line from the service on a lease is. */
typedef enum {
    GS_LEASE_OTHER,  /* none of these */
    GS_LEASE_LOST,   /* lost S how N */
    GS_LEASE_FAULT,  /* fault S time PIDs */
    GS_LEASE_RENEW,  /* renew S */
    GS_LEASE_WEDGED, /* wedged ... (a number one way, a text the other) */
} gs_lease_kind_t;
/* By its first word and the space after it. */
gs_lease_kind_t gs_lease_kind(const char *line);

/* "lease ...": a job's agent asks for a server with room for <clients>
 * ranks on each GPU of its plan, in the plan's order. <job> names the job
 * for `gsrun status` (no spaces); the lease lasts while the connection
 * stays open. Parse: 0 when 1 <= n <= max, every count 1..2^20, linger
 * 0..2^20. */
typedef struct {
    int linger_s;
    char job[96];
    int n;
    char uuid[GS_MAX_GPUS][96];
    int clients[GS_MAX_GPUS];
} gs_lease_req_t;
int gs_lease_fmt_lease(char *buf, size_t len, const gs_lease_req_t *l);
int gs_lease_parse_lease(const char *line, int max, gs_lease_req_t *l);

/* "ok <server>...": each plan entry's server, an index into the service's
 * state. Parse reads n entries, each 0..max-1. */
int gs_lease_fmt_leased(char *buf, size_t len, int n, const int *server);
int gs_lease_parse_leased(const char *line, int n, int max, int *server);

/* "error <why>": the service refuses a lease, a listing or a stop. Parse
 * sets *why to the text after the word (up to the line's end). */
int gs_lease_fmt_refusal(char *buf, size_t len, const char *why);
int gs_lease_parse_refusal(const char *line, const char **why);

/* The "gpus" answer's first line; the device lines follow it. A listing
 * with GPUs says "-" for the reason. Parse: 0 when 0 <= count <=
 * GS_MAX_GPUS; *reason_at is the offset of the reason in line, which ends
 * at the first "\n"; *body is the first "\n" (the device lines follow it),
 * NULL when none. */
int gs_lease_fmt_gpus(char *buf, size_t len, int count, int cuda, int beyond, const char *reason);
int gs_lease_parse_gpus(const char *buf, int *count, int *cuda, int *beyond, char *reason,
                        size_t reasonlen, const char **body);

/* "lost S how N": shared server S's control daemon died (of signal N, or
 * with status N), or was ended wedged with no fresh one in its place. */
typedef enum { GS_LEASE_LOST_SIGNAL, GS_LEASE_LOST_STATUS, GS_LEASE_LOST_WEDGED } gs_lease_lost_t;
const char *gs_lease_lost_word(gs_lease_lost_t how);
int gs_lease_fmt_lost(char *buf, size_t len, int server, gs_lease_lost_t how, int code);
int gs_lease_parse_lost(const char *line, int *server, gs_lease_lost_t *how, int *code);

/* "fault S <time> <PIDs>": server S hit a GPU fault its control daemon
 * confirmed at <time> ("?" when unknown; its spaces travel as 'T', one
 * word), which ended the clients named. Parse gives the time back with
 * its spaces, and at most max PIDs (a PID <= 1 ends the list). */
typedef struct {
    int server;
    char at[32];
    int npids;
} gs_lease_fault_t;
int gs_lease_fmt_fault(char *buf, size_t len, int server, const char *at, const pid_t *pids, int n);
int gs_lease_parse_fault(const char *line, gs_lease_fault_t *f, pid_t *pids, int max);

/* "renew S": a fresh server took server S's place in its dirs. */
int gs_lease_fmt_renew(char *buf, size_t len, int server);
int gs_lease_parse_renew(const char *line, int *server);

/* "wedged S", job -> service: the job's ranks wait on server S, which does
 * not answer them; the service probes it itself. */
int gs_lease_fmt_wedged(char *buf, size_t len, int server);
int gs_lease_parse_wedged(const char *line, int *server);
/* "wedged <text>", service -> job: a wedged server was replaced for the
 * job; the text is the job's to tell. Parse sets *text after the word. */
int gs_lease_fmt_wedged_told(char *buf, size_t len, const char *text);
int gs_lease_parse_wedged_told(const char *line, const char **text);

#endif
