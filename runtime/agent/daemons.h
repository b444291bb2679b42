/* SPDX-License-Identifier: BSD-3-Clause */
/* The node's MPS daemons, one per GPU in use, or several on a GPU with more
 * ranks than one server takes (each then named "GPU g server k"): start them (in parallel, each
 * pinned to a core near its GPU, one core each while cores allow), wait
 * until each serves, pre-start servers, notice one that dies, move one off
 * the ranks' cores, and quit them all with bounded waits. Knows nothing of
 * ranks: MPS log lines name PIDs, which the caller's rank_of_pid turns into
 * local ranks. */
#ifndef GS_AGENT_DAEMONS_H
#define GS_AGENT_DAEMONS_H

#include "runtime/core/limits.h"
#include <sched.h>
#include <sys/types.h>

#include "runtime/agent/guard.h"
#include "runtime/agent/report.h"
#include "runtime/gpu/gpu.h"
#include "runtime/gpu/mps.h"
#include "runtime/gpu/mps_health.h"
#include "runtime/gpu/mps_probe.h"

/* Bounded wait for a daemon's quit, before SIGTERM and SIGKILL. */
#define GS_DAEMON_QUIT_TIMEOUT_MS 5000
/* Daemons retired after a GPU fault that may still wait for their last
 * client at once (each is a daemon and a server holding its context). */
#define GS_DAEMONS_RETIRED_MAX 8
/* A fault's list of clients that stopped growing this long ago is whole. */
#define GS_DAEMONS_SETTLE_MS 30

typedef int (*gs_rank_of_pid_fn)(const void *ctx, pid_t pid);

typedef struct {
    char node_dir[256];        /* the daemons' dirs: <node_dir>/g<N>, g<N>.log */
    char control[GS_PATH_MAX]; /* nvidia-cuda-mps-control */
    int prestart;              /* start each server before any client */
    int timeout_s;             /* bound on a daemon's start */
    gs_report_t *report;
    gs_guard_t *guard; /* told each daemon's PID (NULL: none) */
    gs_mps_daemon_t daemon[GS_MAX_GPUS];
    char pinned[GS_MAX_GPUS][96]; /* where each runs, for the report and status */
    cpu_set_t cpus[GS_MAX_GPUS];
    int gpu_of[GS_MAX_GPUS];     /* daemon g serves this GPU (default g) */
    int server_of[GS_MAX_GPUS];  /* as its server number (default 0) */
    int servers_on[GS_MAX_GPUS]; /* of this many on that GPU (default 1) */
    int n;                       /* daemons started, GPUs 0..n-1 */
    int borrowed; /* the entries are a shared agent's servers (--mps-share=node), leased
                   * by the caller: never quit, moved or followed here */
    /* Each server's health, from its log as it is written (mps_health.h):
     * an inotify descriptor the caller polls, and the daemons that served
     * before a GPU fault, retired: never given out again, told to quit once
     * the last client of the fault has exited. */
    gs_mps_health_t health[GS_MAX_GPUS];
    int gen[GS_MAX_GPUS]; /* daemons this entry has had: their dirs' names */
    int log_fd;           /* inotify on the daemons' control.out, -1 none */
    long long listing_ms[GS_MAX_GPUS];
    gs_mps_daemon_t retired[GS_DAEMONS_RETIRED_MAX];
    gs_mps_health_t retired_health[GS_DAEMONS_RETIRED_MAX];
    int retired_of[GS_DAEMONS_RETIRED_MAX]; /* the entry it served */
    int nretired;
} gs_daemons_t;

void gs_daemons_init(gs_daemons_t *ds, const char *node_dir, const char *control, int prestart,
                     int timeout_s, gs_report_t *report, gs_guard_t *guard);
/* Daemon g serves GPU gpu as its server `server` of nservers: for the
 * messages and `gsrun status`. */
void gs_daemons_set_server(gs_daemons_t *ds, int g, int gpu, int server, int nservers);
/* "GPU 0", or "GPU 0 server 2" where a GPU has several. */
void gs_daemons_label(const gs_daemons_t *ds, int g, char *buf, size_t len);
/* Forgets the borrowed entries (their shared agent ended): the table is
 * empty and the caller's own again, each entry's GPU and server kept. */
void gs_daemons_unborrow(gs_daemons_t *ds);
/* Starts daemons on GPUs n..count-1 of gpus (those not running yet) and
 * waits until each serves (and runs its server, with prestart). On failure
 * every daemon is stopped and err names the GPU. */
int gs_daemons_start(gs_daemons_t *ds, const gs_gpu_list_t *gpus, int count, gs_error_t *err);
/* The same for daemons added while others serve (a job's step that needs
 * more servers): on failure only the new ones are stopped. */
int gs_daemons_add(gs_daemons_t *ds, const gs_gpu_list_t *gpus, int count, gs_error_t *err);
/* The same in steps, for a loop that must not wait (the shared agent): the
 * next entry's daemon spawned, 0 or -errno with err (nothing left); then,
 * each look at the last entry: 1 while its socket is not there yet, 0 once
 * it serves (its server started, with prestart), or -errno with err (the
 * entry stopped and gone; deadline_ms bounds the whole start). */
int gs_daemons_begin(gs_daemons_t *ds, const gs_gpu_list_t *gpus, gs_error_t *err);
int gs_daemons_begun(gs_daemons_t *ds, long long deadline_ms, gs_error_t *err);
/* start_server on the first count daemons (started without); on failure
 * stops every daemon. */
int gs_daemons_start_servers(gs_daemons_t *ds, int count, gs_error_t *err);
/* Records daemon g's servers (teardown, status, guard); a failure is a
 * problem in the report. */
void gs_daemons_record_servers(gs_daemons_t *ds, int g);
/* Quits the daemons of GPUs first and above (all told first, so that their
 * servers end together), reports escalations and MPS's own error lines, and
 * removes their directories. */
void gs_daemons_stop_from(gs_daemons_t *ds, int first, gs_rank_of_pid_fn rank_of_pid,
                          const void *ctx);
/* A child exited: 1 if it was a daemon (noted and reported), else 0. */
int gs_daemons_reaped(gs_daemons_t *ds, pid_t pid, int status);
/* Reads what the daemons' logs gained (the caller polls log_fd): ev[g] gets
 * GS_MPS_EV_* for entry g; a retired daemon's clients that exited are
 * dropped from its fault. Returns the ms until a fault's client list may be
 * taken as whole (call again then), or -1. */
int gs_daemons_follow(gs_daemons_t *ds, int *ev);
/* Entry g's daemon hit a GPU fault: it is kept among the retired (told to
 * quit once its last client has exited, by gs_daemons_follow); the entry has
 * no daemon until gs_daemons_refill. 0, or -ENOSPC when too many wait
 * already (the entry keeps its faulted daemon). */
int gs_daemons_retire(gs_daemons_t *ds, int g);
/* A fresh daemon (and, with prestart, its server) for entry g, which has
 * none, in dirs of a new name (after a fault: the retired one may still
 * hold clients in its own), or with same_dirs in the entry's own (after a
 * wedged one was ended: the ranks given its pipe dir that have not started
 * CUDA yet reach the fresh one): its GPU is gpus->gpu[g]. */
int gs_daemons_refill(gs_daemons_t *ds, const gs_gpu_list_t *gpus, int g, int same_dirs,
                      gs_error_t *err);
/* The retired daemon that served entry g last and still runs, or NULL. */
const gs_mps_daemon_t *gs_daemons_retired_of(const gs_daemons_t *ds, int g,
                                              const gs_mps_health_t **health);
/* Moves each daemon (and its servers) whose core is among ranks' to a free
 * core near its GPU, when there is one. */
void gs_daemons_avoid(gs_daemons_t *ds, const gs_gpu_list_t *gpus, const cpu_set_t *ranks);

#endif
