/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's messages, in one place: each line is written and read
 * through these functions, by the agent and by every front end (the shim,
 * the Open MPI component, the SPANK plugin, the task prolog, gsrun's
 * early start and epilog). All lines end in "\n".
 *
 *   rank -> agent   hello <local rank> <CPU list|-> [parent]
 *   agent -> rank   ok pidfd|socket gpu=<GPU index, -1: none>   |  error <why>
 *   first rank -> early agent   size <local ranks> <launcher PID>;  ok | error <why>
 *   gsrun epilog -> job-long agent   stop   (the report comes back on it)
 *   task prolog -> job-long agent   servers <n> <GPU of server 0> ... <GPU of server n-1>;
 *                                   ok | error <why>   (a step needs more servers)
 *   agent -> its starter (ready pipe)   ok | error;  early: listening 0 0 | error <code> 0
 */
#ifndef GS_PROTOCOL_H
#define GS_PROTOCOL_H

#include <stddef.h>

#include "runtime/core/limits.h"

#define GS_PROTO_SOCKET "agent.sock" /* in the node dir */
/* Bound on the agent's quit of one daemon (its teardown waits at most this,
 * then SIGTERM and SIGKILL); front ends waiting for the agent add to it. */
#define GS_PROTO_QUIT_TIMEOUT_MS 5000
#define GS_PROTO_STOP "stop\n"
/* The shared agent's dir in the user's private base: <base>/<this>/<node>. */
#define GS_PROTO_SHARE_DIR "mps-share"

/* "hello ...": cpus "" is sent as "-". Returns the length, or -1 if it
 * does not fit. */
int gs_protocol_hello_format(char *buf, size_t len, int local_rank, const char *cpus, int parent);
/* 0, or -1 for anything else. cpus gets "" for "-" (or none given); a
 * third word other than "parent" is ignored. */
int gs_protocol_hello_parse(const char *line, int *local_rank, char *cpus, size_t cpuslen,
                            int *parent);

/* "ok pidfd gpu=N state=G" / "ok socket gpu=N state=G": G is the node
 * state's generation the answer holds for (a rank that read another reads
 * the state again: its servers changed meanwhile). */
int gs_protocol_answer_format(char *buf, size_t len, int by_pidfd, int gpu, int generation);
/* 0 for an "ok" answer (by_pidfd, gpu and generation set; gpu -1 when it
 * names none; generation 0 when not said), -1 otherwise. */
int gs_protocol_answer_parse(const char *line, int *by_pidfd, int *gpu, int *generation);

int gs_protocol_size_format(char *buf, size_t len, int local_size, int launcher_pid);
/* 0 when the size is 1..2^20 (launcher_pid 0 when not given), else -1. */
int gs_protocol_size_parse(const char *line, int *local_size, int *launcher_pid);

/* The early agent's first line on the ready pipe. */
/* "servers <n> <gpu>...": the MPS servers a step's plan needs, in the
 * plan's order (server-major: the first of each GPU first). Formats: 0, or
 * -1 if it does not fit; parses: 0 when 1 <= n <= max and every GPU is
 * 0..max-1, else -1. */
int gs_protocol_servers_format(char *buf, size_t len, int n, const int *gpu);
int gs_protocol_servers_parse(const char *line, int max, int *n, int *gpu);

/* The lease between a job's agent and the user's node service: lease.h. */

int gs_protocol_ready_format(char *buf, size_t len, int code);
/* 0 for "listening", else the code of "error <code>" (1 if it names none). */
int gs_protocol_ready_parse(const char *line);

/* "error '<verb>' is not taken by the agent now": the loop's answer to a
 * message its state does not take (a service between its start and its
 * end; the verb cut at 32 bytes). The verb is line's first word, up to a
 * space or newline. Formats: the length, or -1 if it does not fit; parse:
 * 1 when line is that answer, else 0. */
int gs_protocol_not_now_format(char *buf, size_t len, const char *line);
int gs_protocol_not_now_parse(const char *line);

#endif
