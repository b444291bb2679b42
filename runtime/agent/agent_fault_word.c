/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether a GPU fault a server's log tells of is one: its control daemon's
 * word.
 *
 * The log is the user's to write (any process of theirs can append a
 * fault's lines); the control daemon is not. So the agent that runs the
 * server asks it at the fault's first line, while the clients the fault
 * ended still live (MPS says FAULT then, ACTIVE again once they have gone;
 * measured on an H200, driver 580), and keeps a FAULT for when the fault's
 * list is whole. A fault is taken when the daemon said FAULT, or when it
 * says ACTIVE and every process the lines named has ended (most clients a
 * fault ends exit at once, before the daemon is asked). Of the processes
 * named, those the daemon lists as the faulted server's clients and those
 * that have ended count; a live process it does not list (a stray writer's
 * sleep, a rank's wrapper shell, PID 1) was no client. Anything else is
 * told with -v and changes nothing. */
#include "gs_autoconf.h"

#include <stdio.h>

#include "runtime/agent/agent_int.h"
#include "runtime/core/proc.h"

/* How long the control daemon is given to answer (it answered at once
 * during a fault on an H200). */
#define FAULT_ASK_MS 2000

/* Asks entry g's control daemon for its word on the fault its log tells
 * (kept: a FAULT is not forgotten for a later ACTIVE). */
void gs_agent_fault_ask(gs_agent_t *a, int g)
{
    gs_daemons_t *ds = &a->daemons;
    gs_mps_word_t w;
    gs_error_t err;
    if (a->fault_word[g].asked && a->fault_word[g].fault == 1) {
        return;
    }
    int rc = gs_mps_ask_word(&ds->daemon[g], ds->control, 1, FAULT_ASK_MS, &w, &err);
    a->fault_word[g].asked = 1;
    a->fault_word[g].fault = rc != 0 ? -2 : w.fault;
    a->fault_word[g].n = 0;
    for (int i = 0; rc == 0 && i < w.nclients && i < GS_MPS_HEALTH_PIDS; i++) {
        a->fault_word[g].clients[a->fault_word[g].n++] = w.clients[i];
    }
}

/* Whether process pid has ended (gone, or a zombie). */
static int ended(pid_t pid)
{
    char buf[64];
    return gs_proc_stat_fields(NULL, pid, buf, sizeof(buf)) != 0 || buf[0] == 'Z';
}

/* Whether entry g's daemon named pid among its faulted server's clients. */
static int word_lists(const gs_agent_t *a, int g, pid_t pid)
{
    for (int j = 0; j < a->fault_word[g].n; j++) {
        if (a->fault_word[g].clients[j] == pid) {
            return 1;
        }
    }
    return 0;
}

/* The clients of entry g's fault that its daemon bears out: those of the
 * log's list it names as the faulted server's clients, and those that have
 * ended since (a client the fault ended often exits at once, before the
 * daemon is asked; a live process it does not list was no client), or,
 * when that leaves none, every client it names (MPS ends them all). */
static int confirmed_hits(const gs_agent_t *a, int g, pid_t *out)
{
    const gs_mps_health_t *h = &a->daemons.health[g];
    int n = 0, k = a->fault_word[g].n;
    for (int i = 0; i < h->nhit; i++) {
        if (word_lists(a, g, h->hit[i]) || ended(h->hit[i])) {
            out[n++] = h->hit[i];
        }
    }
    for (int j = 0; n == 0 && j < k; j++) {
        out[j] = a->fault_word[g].clients[j];
    }
    return n > 0 ? n : k;
}

/* Entry g's log tells a fault its daemon does not bear out: told with -v,
 * nothing retired, no rank marked; the log's fault forgotten. */
static void not_taken(gs_agent_t *a, int g, const char *label)
{
    const gs_mps_health_t *h = &a->daemons.health[g];
    int w = a->fault_word[g].fault;
    gs_report_add(&a->report, 1,
                  "%s (%s): its MPS log says a fatal GPU fault at %s, but %s: not taken as a "
                  "fault (nothing retired, no rank ended; lines another process wrote there?)",
                  label, a->daemons.daemon[g].uuid, h->at[0] ? h->at : "?",
                  w == 0    ? "the MPS control daemon reports its server ACTIVE and a process the "
                              "lines name still runs"
                  : w == -1 ? "the MPS control daemon tells no server status (an older driver)"
                            : "the MPS control daemon did not answer");
    gs_mps_health_dismiss(&a->daemons.health[g]);
    a->fault_word[g].asked = a->fault_word[g].fault = 0;
}

int gs_agent_fault_confirm(gs_agent_t *a, int g, const char *label, pid_t *hit)
{
    const gs_mps_health_t *h = &a->daemons.health[g];
    gs_agent_fault_ask(a, g);
    int over = a->fault_word[g].fault == 0 && h->nhit > 0;
    for (int i = 0; i < h->nhit && over; i++) {
        over = ended(h->hit[i]) && !word_lists(a, g, h->hit[i]);
    }
    if (a->fault_word[g].fault != 1 && !over) {
        not_taken(a, g, label);
        return -1;
    }
    int n = confirmed_hits(a, g, hit);
    a->fault_word[g].asked = a->fault_word[g].fault = 0; /* the next fault is asked anew */
    return n;
}
