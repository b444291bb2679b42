/* SPDX-License-Identifier: BSD-3-Clause */
/* Process helpers: bounded waits, signals only to PIDs we started, and
 * environments built from scratch for the processes we spawn. */
#ifndef GS_PROC_H
#define GS_PROC_H

#include <sys/types.h>

#include "runtime/core/gs_error.h"

/* Monotonic clock in milliseconds. */
long long gs_proc_now_ms(void);
/* Wall-clock time in ms since the epoch (for times shown to people). */
long long gs_proc_wall_ms(void);

/* A pidfd for pid, or -1 (errno set) where the kernel has none. */
int gs_proc_pidfd_open(pid_t pid);

/* Waits up to timeout_ms for our child pid to exit and reaps it.
 * Returns 0 (status filled if not NULL) or -ETIMEDOUT. */
int gs_proc_wait(pid_t pid, int timeout_ms, int *status);

/* Reaps every child, waiting up to timeout_ms for those still running (a
 * subreaper's adopted daemons). Returns 0 once none is left, or
 * -ETIMEDOUT. */
int gs_proc_reap_all(int timeout_ms);
/* The same, but waits only while waiting(ctx) says a child it cares about
 * is left (NULL: any); exited children are reaped either way. */
int gs_proc_reap_while(int (*waiting)(void *ctx), void *ctx, int timeout_ms);

/* Stops our child: SIGTERM, up to term_wait_ms, then SIGKILL, and reaps it.
 * Refuses pid <= 1. Returns 0 once reaped. */
int gs_proc_stop_child(pid_t pid, int term_wait_ms, int *status);

/* Sends sig to a process we recorded: through its pidfd when we have one
 * (so a recycled PID is never hit), else by PID. Refuses pid <= 1. */
int gs_proc_signal(pid_t pid, int pidfd, int sig);

/* Fields of /proc/<pid>/stat by their number in proc(5), counted from 1. */
enum {
    GS_STAT_STATE = 3,
    GS_STAT_PPID = 4,
    GS_STAT_PGRP = 5,
    GS_STAT_SESSION = 6,
    GS_STAT_STARTTIME = 22,
};

/* The fields of <proc_root>/<pid>/stat after the command name (which may
 * hold spaces and parentheses), from the state (field 3) on, into buf.
 * proc_root NULL: /proc. 0, or -1 when the process is gone. */
int gs_proc_stat_fields(const char *proc_root, pid_t pid, char *buf, size_t len);

/* The command name of <proc_root>/<pid> (proc_root NULL: /proc), its
 * newline gone, into buf: 0, or -1 with buf "" when the process is gone.
 * Anyone's to set: a caller that shows it cleans it. */
int gs_proc_comm(const char *proc_root, pid_t pid, char *buf, size_t len);

/* How many threads <proc_root>/<pid>/task lists (proc_root NULL: /proc):
 * more than one for a process in state Z means its leader has exited while
 * the rest of its thread group runs (and may fork): it is not a zombie. */
int gs_proc_threads(const char *proc_root, pid_t pid);

/* The real and effective uids of <proc_root>/<pid> (proc_root NULL:
 * /proc): 0, or -1 with both left as they were when it is gone. */
int gs_proc_uids(const char *proc_root, pid_t pid, long *uid, long *euid);

/* Starts a daemon: a grandchild in a session of its own (not our child, so
 * the program we exec later does not inherit it, and a launcher that kills
 * our process group misses it), which runs child(ctx, ready_w) and must exec
 * or _exit there. ready_w is the write end of a pipe (close-on-exec: pass it
 * on with F_DUPFD) whose read end goes to *ready_rd, for the daemon's "I am
 * up" line. The intermediate child is reaped before this returns. 0, or
 * -errno with err. */
int gs_proc_spawn_daemon(void (*child)(void *ctx, int ready_w), void *ctx, int *ready_rd,
                         gs_error_t *err);

/* As gs_proc_spawn_daemon, but our own child (*pid), which we reap: for a
 * caller that must be able to end the daemon and know it has gone. */
int gs_proc_spawn_child(void (*child)(void *ctx, int ready_w), void *ctx, int *ready_rd,
                        pid_t *pid, gs_error_t *err);

/* Whether a process exists (through its pidfd when given). */
int gs_proc_alive(pid_t pid, int pidfd);

/* A copy of this process's environment without the variables whose names
 * start with one of strip (NULL-terminated), plus set ("NAME=VALUE",
 * NULL-terminated, overriding). Free with gs_proc_env_free. */
char **gs_proc_env_build(const char *const *strip, const char *const *set);
void gs_proc_env_free(char **env);

/* Reads one line (up to and with '\n', or to end of file) into buf, NUL
 * terminated, waiting until the deadline. Returns its length or -errno. For
 * an answer on a connection the peer keeps open. */
long gs_proc_read_line(int fd, char *buf, size_t len, long long deadline_ms);

/* Reads all of fd into buf (NUL-terminated) until EOF or the deadline.
 * Returns bytes read, or -ETIMEDOUT. */
long gs_proc_read_all(int fd, char *buf, size_t len, long long deadline_ms);

/* Writes all of buf to fd (which may be non-blocking) by the deadline.
 * 0, or -errno (-ETIMEDOUT: a peer that reads nothing). */
int gs_proc_write_all(int fd, const char *buf, size_t len, long long deadline_ms);

#endif
