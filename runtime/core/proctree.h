/* SPDX-License-Identifier: BSD-3-Clause */
/* The processes below this one, read from /proc: for a child subreaper
 * (gsrun, root's keeper of a batch job), whose orphans come back to it as
 * its children whatever they did (double fork, setsid), they are all that
 * it and its children started and left running. */
#ifndef GS_PROCTREE_H
#define GS_PROCTREE_H

#include <sys/types.h>

/* Field k of /proc/<pid>/stat (3 = state, 4 = ppid, 22 = start time), or
 * -1 when the process is gone. */
long long gs_proctree_stat_field(pid_t pid, int k);
/* Whether pid is stopped (SIGSTOP, a suspended session, a debugger's stop):
 * it still has connections queued to it, and answers none. */
int gs_proctree_stopped(pid_t pid);

/* 1 while pid is in its exit (the kernel's PF_EXITING, field 9 of its
 * stat): set before the process closes its files, so whoever sees a pipe
 * of a killed process close may still find it alive a moment before its
 * pidfd says it has exited. 0 otherwise (gone too). */
int gs_proctree_exiting(pid_t pid);
/* Whether a process that was ours to watch is gone: no PID (<= 1), exited
 * (its pidfd, or kill() without one), or in its exit. */
int gs_proctree_gone(pid_t pid, int pidfd);

/* SIGKILLs the running descendants of this process (stopped ones too, and
 * a thread group whose leader has exited while its other threads run) that
 * carry marker in their environment ("NAME=": a rank's variable, which what
 * a rank starts inherits; NULL: every one), except those whose command name
 * (/proc/<pid>/comm) is in spare (NULL-terminated; NULL: none) and, with
 * spare_exe, that run spare_exe (the same file), and what descends from them, reaping this process's exited children as it goes,
 * pass after pass, until a pass finds none running and no exited child to
 * reap (for the whole tree, marker and spare NULL: until this process has
 * no child left at all) or timeout_ms passes; then *left is how many the
 * last pass found running (0 when done). Signals go through pidfds, to
 * processes checked again after the pidfd was taken. Returns how many
 * processes it signalled, or -ENOMEM. */
int gs_proctree_kill(const char *const *spare, const char *spare_exe, const char *marker,
                     int timeout_ms, int *left);

/* Reaps this process's exited children until none of those named in names
 * is left (living or not yet reaped) or timeout_ms passes; other children
 * are reaped if they have exited, never waited for. 0, or -ETIMEDOUT. */
int gs_proctree_reap(const char *const *names, int timeout_ms);

#endif
