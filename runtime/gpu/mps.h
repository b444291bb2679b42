/* SPDX-License-Identifier: BSD-3-Clause */
/* One MPS control daemon per GPU: start, readiness, commands, shutdown.
 *
 * The daemon runs in the foreground (-f) as our child, so we hold its PID,
 * reap it, and it gets SIGKILL if the process that started it dies. */
#ifndef GS_MPS_H
#define GS_MPS_H

#include <sched.h>
#include <stddef.h>
#include <sys/types.h>

#include "runtime/core/gs_error.h"

#define GS_MPS_MAX_SERVERS 8

typedef struct {
    int gpu;                  /* index in the plan */
    char uuid[96];            /* CUDA_VISIBLE_DEVICES for the daemon */
    char pipe_dir[256];      /* CUDA_MPS_PIPE_DIRECTORY */
    char log_dir[256];       /* CUDA_MPS_LOG_DIRECTORY */
    pid_t daemon_pid;         /* our child, 0 when none */
    int daemon_status;        /* wait status once reaped */
    int daemon_reaped;
    pid_t server_pid[GS_MPS_MAX_SERVERS]; /* servers it reported */
    int server_pidfd[GS_MPS_MAX_SERVERS];
    int nservers;
    long long start_ms;       /* spawn time */
    long long ready_ms;       /* time a server was confirmed */
    int quit_sent, quit_rc;   /* gs_mps_quit_begin's quit, and its outcome */
    gs_error_t quit_err;
} gs_mps_daemon_t;

/* Where d's daemon and its servers write their lines (GS_MPS_CONTROL_OUT
 * in its log dir): the file the fault and client watches follow. */
void gs_mps_out_path(const gs_mps_daemon_t *d, char *buf, size_t len);

/* The file in a daemon's log dir that takes the control daemon's own
 * output (its stdout and stderr), beside MPS's control.log and server.log. */
#define GS_MPS_CONTROL_OUT "control.out"

/* Starts the control daemon in the foreground with a clean environment
 * (no inherited CUDA_MPS_* or CUDA_VISIBLE_DEVICES), pinned to cpus if not
 * NULL. Its output goes to <log_dir>/control.out. */
int gs_mps_spawn(gs_mps_daemon_t *d, const char *control, const cpu_set_t *cpus,
                 gs_error_t *err);

/* Waits until <pipe_dir>/control exists, the daemon dying or the deadline
 * ending the wait with an error (looked for every 1-2 ms). */
int gs_mps_wait_socket(gs_mps_daemon_t *d, long long deadline_ms, gs_error_t *err);
/* The same look once, without waiting: 1 once the socket is there, 0 not
 * yet, or -errno with err (the daemon exited, or the deadline passed). */
int gs_mps_socket_ready(gs_mps_daemon_t *d, long long deadline_ms, gs_error_t *err);

/* Runs one control command through the client mode of the control binary.
 * cmd must be a single line of printable characters. */
int gs_mps_command(const char *control, const char *pipe_dir, const char *cmd, char *reply,
                   size_t replylen, int timeout_ms, gs_error_t *err);

/* start_server -uid <uid>: the daemon accepted the command, so it serves;
 * clients that arrive before the server is up are queued by the daemon. */
int gs_mps_start_server(gs_mps_daemon_t *d, const char *control, uid_t uid, long long deadline_ms,
                        gs_error_t *err);

/* get_server_list: records the server PIDs (for teardown) and confirms
 * that a server runs. */
int gs_mps_record_servers(gs_mps_daemon_t *d, const char *control, int timeout_ms,
                          gs_error_t *err);

/* What a control daemon itself says of its servers, read at one moment:
 * which processes are their clients, and whether one of them is in FAULT.
 * Its servers' log can be written by any process of the user's; the daemon
 * cannot: every state gsrun tells of a rank or acts on comes from here or
 * from NVML, a log line only says when to ask. */
#define GS_MPS_CLIENTS_MAX 1024
typedef struct {
    /* 1: a server said FAULT (get_server_status <PID>: "FAULT" while the
     * clients of a fatal GPU fault live, "ACTIVE" before and after;
     * measured on an H200, driver 580); 0: every server ACTIVE; -1: the
     * daemon tells no status (an older driver's "Unknown command"). */
    int fault;
    /* get_client_list of the FAULT server when fault is 1, else of every
     * server (a client in a PID namespace of its own by its PID here) */
    pid_t clients[GS_MPS_CLIENTS_MAX];
    int nclients;
} gs_mps_word_t;

/* Asks d's daemon (with status: get_server_status of each server too) for
 * its word, bounded by timeout_ms in all: 0, or -errno with err (no answer,
 * no daemon). */
int gs_mps_ask_word(gs_mps_daemon_t *d, const char *control, int status, int timeout_ms,
                    gs_mps_word_t *w, gs_error_t *err);
/* Whether pid is among the word's clients. */
int gs_mps_word_lists(const gs_mps_word_t *w, pid_t pid);

/* Sends quit without waiting for the daemon to go, so that the daemons of
 * several GPUs (and their servers) end at the same time; gs_mps_stop then
 * waits. */
void gs_mps_quit_begin(gs_mps_daemon_t *d, const char *control, int timeout_ms);

/* quit (unless gs_mps_quit_begin sent it), then bounded waits: the daemon
 * gets SIGTERM, then SIGKILL, and the servers it reported the same, only
 * through the PIDs recorded. Idempotent. Returns 0 when quit alone
 * sufficed, 1 when escalation was needed (note says why). */
int gs_mps_stop(gs_mps_daemon_t *d, const char *control, int quit_timeout_ms, char *note,
                size_t notelen);

/* Whether our child daemon has exited (reaps it, keeping its status). */
int gs_mps_daemon_exited(gs_mps_daemon_t *d);

/* Parses get_server_list's reply: one PID per line. Returns the count. */
int gs_mps_parse_server_list(const char *reply, pid_t *pids, int max);

/* 0 if cmd is one line of printable ASCII, -EINVAL otherwise. */
int gs_mps_validate_command(const char *cmd);

/* Copies up to max lines of <log_dir>/<file> that report errors into out
 * (each at most linelen). Returns the number of lines. */
int gs_mps_scan_log(const char *log_dir, const char *file, char (*out)[256], int max);

/* Whether a log line reports an error (unit-tested on captured lines). */
int gs_mps_log_line_is_error(const char *line);

#endif
