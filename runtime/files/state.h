/* SPDX-License-Identifier: BSD-3-Clause */
/* The node state file: what the node agent tells every rank of its node.
 *
 * The agent writes <node dir>/state once (write to a temporary name, then
 * rename, so a reader never sees half of it); each gsrun-shim waits for it
 * with inotify, reads it, and finds its GPU by local rank. Text, one
 * "key value" per line; values run to the end of the line. */
#ifndef GS_STATE_H
#define GS_STATE_H

#include <stddef.h>

#include "runtime/core/gs_error.h"
#include "runtime/files/record.h"
#include "runtime/plan/policy.h"

#define GS_STATE_FILE "state"

typedef enum { GS_STATE_OFF = 0, GS_STATE_ON, GS_STATE_ERROR } gs_state_kind_t;

/* One MPS server (with MPS on; one GPU each without): a GPU with more ranks
 * than one server takes has several entries, one per server. */
typedef struct {
    int first_rank;
    int nranks;
    int pct_set;
    char pct[24];
    char uuid[96];
    char pipe_dir[256];
    char log_dir[256];
    int gpu;       /* the GPU it is on (index among the visible GPUs) */
    int server;    /* which of that GPU's servers, from 0 */
    int gpu_servers; /* that GPU's servers (0 in files without the line: 1) */
    int gpu_ranks; /* that GPU's ranks, all its servers together */
} gs_state_server_t;

typedef struct {
    gs_state_kind_t kind;
    int notice;          /* message is worth printing without -v */
    int exit_code;       /* with GS_STATE_ERROR */
    char message[512];   /* why MPS is off, or the error */
    char socket[256];    /* the agent's socket, when on */
    char placed[640];    /* the job's entry in the user's placement record: each rank
                          * holds a shared flock on it while it lives, "" none */
    long long mem_limit_mb; /* pinned device memory per client under MPS, 0: none */
    int clients_per_server; /* clients one server takes here, 0: not said */
    int generation;      /* how often the agent published it before (0: the first): a
                          * rank's registration answer names the one it holds for */
    int nservers;        /* with MPS on, the servers of the plan; off, the
                          * GPUs the ranks are given one each (no pipe dirs) */
    gs_state_server_t server[GS_MAX_GPUS];
} gs_state_t;

/* The rows of the file (runtime/files/record.h): the node's, then each
 * server's after its "gpu <index>" line. A new field is a row here. */
extern const gs_rec_field_t gs_state_fields[];
extern const gs_rec_field_t gs_state_server_fields[];

/* The plan's part of the node state, the one way from a plan to what the
 * ranks read: each server's ranks, GPU and share, and the client limit.
 * What only the agent knows (UUIDs, pipe and log dirs) is left as it is. */
void gs_state_from_plan(gs_state_t *st, const gs_plan_t *plan);

int gs_state_format(const gs_state_t *st, char *buf, size_t len);
int gs_state_parse(const char *text, gs_state_t *st, gs_error_t *err);

/* Atomic write into dir (temporary file + rename). */
int gs_state_write(const char *dir, const gs_state_t *st, gs_error_t *err);
int gs_state_read(const char *dir, gs_state_t *st, gs_error_t *err);

/* Waits until dir/state exists or the deadline passes (-ETIMEDOUT). If
 * abort_fd >= 0, its becoming readable also ends the wait (-EPIPE). An
 * agent that is gone without a state ends it at once (-ECHILD, err says
 * so): dir removed, or its socket there and its lock free. */
int gs_state_wait(const char *dir, long long deadline_ms, int abort_fd, gs_error_t *err);

/* The server entry of a local rank, or NULL. */
const gs_state_server_t *gs_state_server_of_rank(const gs_state_t *st, int local_rank);

#endif
