/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether an MPS control daemon and its servers answer, and the end of one
 * that does not.
 *
 * No CUDA variable bounds a client's wait for its daemon: a control daemon
 * or server that accepts connections and never replies (seen stopped with
 * SIGSTOP on an H200, driver 580) holds every rank that starts CUDA on it
 * for as long as the rank runs. So gsrun bounds every exchange with MPS,
 * and a daemon or server that does not answer within the bound is wedged:
 * its agent ends it and starts a fresh one. */
#ifndef GS_MPS_PROBE_H
#define GS_MPS_PROBE_H

#include <stddef.h>

#include "runtime/gpu/mps.h"

/* The bound on one control command that gsrun waits for (get_server_list,
 * get_client_list, start_server). A healthy daemon answered get_server_list
 * in 4-6 ms idle and 5-91 ms while 48 clients started, 257 ms while a new
 * server set up its GPU context (H100, H200, driver 580; doc/benchmarks.md,
 * "MPS's answer"): 2 s is 8 times the slowest seen and leaves a job that
 * waits on a wedged one told within 5 s of its start. */
#define GS_MPS_ANSWER_MS 2000

typedef enum {
    GS_MPS_PROBE_OK = 0, /* the daemon answered, no process of it stopped */
    GS_MPS_PROBE_WEDGED, /* it or a server of it did not answer, or is stopped */
    GS_MPS_PROBE_GONE,   /* no daemon runs there */
} gs_mps_probe_result_t;

/* Asks d's control daemon for its servers (get_server_list, bounded by
 * bound_ms) and looks at each process: a daemon or server stopped (state
 * T, still so 200 ms later: it cannot answer) or a daemon that does not
 * answer in time is wedged,
 * why saying which process and how ("the MPS control daemon 1234 is
 * stopped (state T)"). bound_ms 0: the processes alone (it answered a
 * moment ago; its children where its servers are not known yet), no
 * command. */
int gs_mps_probe(gs_mps_daemon_t *d, const char *control, int bound_ms, char *why, size_t len);

/* Ends a wedged daemon and the servers it recorded: SIGKILL at once (it
 * answered nothing within the bound: a quit would get no answer either;
 * the processes are the user's own), the daemon reaped when it is our
 * child (bounded). Its directories stay, for a fresh daemon in them. */
void gs_mps_end_wedged(gs_mps_daemon_t *d);

#endif
