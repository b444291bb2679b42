/* SPDX-License-Identifier: BSD-3-Clause */
/* A GPU fault on an MPS server this agent runs.
 *
 * On Volta and later a fatal fault in one client ends every client of its
 * server, and the server refuses new clients (807) until every client it
 * had has exited: on a server the user's jobs share, one job's fault ends
 * the others' ranks, and every later job would be handed a server that
 * refuses it while the faulting process lives. So the agent that runs the
 * server reads its log as it is written (daemons.c, mps_health.c) and, once
 * MPS has listed the clients it ended:
 *   - tells it once, through its program's fault hook: in the job's report
 *     (a job's own servers: agent_fault_job.c), or to each job leasing it
 *     (the node service: "fault S <time> <PIDs>" on the lease,
 *     agent_service.c; the job's agent_lease_watch.c hands the line to
 *     gs_agent_fault_told);
 *   - retires the server (never given out again; told to quit once its
 *     last client has gone: MPS answers no quit before) and starts a fresh
 *     one in new dirs in its place, published before any lease or rank is
 *     answered again;
 *   - keeps a note for `gsrun status`: since when, and who still holds
 *     the faulted server (the user can end it).
 * MPS does not reliably say which client faulted (it names whichever it
 * noticed first), so neither does gsrun: it names every client MPS ended. */
#include "gs_autoconf.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/agent/agent_int.h"
#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/files/status.h"

/* Jobs read at most for naming other jobs' PIDs. */
#define WHO_JOBS 64

/* printf onto buf at *used, bounded by len. */
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t len, size_t *used,
                                                         const char *fmt, ...)
{
    va_list ap;
    if (*used >= len) {
        return;
    }
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    *used += w > 0 ? (size_t)w : 0;
    if (*used >= len) {
        *used = len;
    }
}

/* The program of a live process (its comm), "" when gone. */
static void program(pid_t pid, char *buf, size_t len)
{
    gs_proc_comm(NULL, pid, buf, len);
    gs_status_clean(buf);
}

/* The local rank pid registered as in a job's status ("<rank>:<pid> ..."),
 * or -1. */
static int rank_in(const char *pids, pid_t pid)
{
    char key[24];
    int n = snprintf(key, sizeof(key), ":%d", (int)pid);
    for (const char *p = pids; (p = strstr(p, key)) != NULL; p += n) {
        if (p[n] != ' ' && p[n] != '\0') {
            continue;
        }
        const char *s = p;
        while (s > pids && s[-1] != ' ') {
            s--;
        }
        return atoi(s);
    }
    return -1;
}

/* "0-1,4": ascending ranks as ranges. */
static void ranges(const int *r, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1) {
            j++;
        }
        int w = j > i ? snprintf(buf + used, len - used, "%s%d-%d", i ? "," : "", r[i], r[j])
                      : snprintf(buf + used, len - used, "%s%d", i ? "," : "", r[i]);
        used += w > 0 ? (size_t)w : 0;
        i = j;
    }
}

/* ", who (prog, pid P)": a process named with its program while it lives. */
static void name_process(char *buf, size_t len, size_t *used, const char *who, pid_t pid)
{
    char prog[64];
    program(pid, prog, sizeof(prog));
    append(buf, len, used, "%s%s (%s%spid %d)", *used > 0 ? ", " : "", who, prog,
           prog[0] ? ", " : "", (int)pid);
}

void gs_agent_fault_who(const gs_agent_t *a, const pid_t *pids, int n, int named, char *buf,
                        size_t len)
{
    size_t used = 0;
    int own[GS_MPS_HEALTH_PIDS], nown = 0, njobs = -1;
    gs_status_t *jobs = NULL;
    char self[96], text[256];
    snprintf(self, sizeof(self), "%s", gs_rundir_job_name(a->o->args.job_dir));
    buf[0] = '\0';
    /* This job's ranks first, in rank order. */
    gs_ranks_t none = {0};
    const gs_ranks_t *t = a->prog->ranks != NULL ? a->prog->ranks(a) : &none; /* a job's */
    for (int r = 0; r < t->size && nown < n; r++) {
        pid_t p = gs_ranks_pid_of_rank(t, r);
        for (int i = 0; i < n && p > 0; i++) {
            if (pids[i] == p) {
                own[nown++] = r;
                break;
            }
        }
    }
    if (nown > 0 && !named) {
        ranges(own, nown, text, sizeof(text));
        append(buf, len, &used, "this job's rank%s %s", nown > 1 ? "s" : "", text);
    }
    for (int i = 0; i < nown && named; i++) {
        /* Each with its process: the user may have to end it. */
        snprintf(text, sizeof(text), "this job's rank %d", own[i]);
        name_process(buf, len, &used, text, gs_ranks_pid_of_rank(t, own[i]));
    }
    for (int i = 0; i < n; i++) {
        if (gs_ranks_rank_of_pid(t, pids[i]) >= 0) {
            continue;
        }
        if (njobs < 0) { /* read once, only when another job's PID is named */
            jobs = calloc(WHO_JOBS, sizeof(*jobs));
            njobs = jobs != NULL ? gs_status_scan(gs_rundir_tmpdir(), 0, jobs, WHO_JOBS) : 0;
        }
        int r = -1, j = 0;
        for (; j < njobs && r < 0; j++) {
            r = strcmp(jobs[j].job, self) != 0 ? rank_in(jobs[j].pids, pids[i]) : -1;
        }
        long uid = -1, euid = -1;
        gs_proc_uids(NULL, pids[i], &uid, &euid);
        if (r >= 0) {
            snprintf(text, sizeof(text), "job %s's rank %d", jobs[j - 1].job, r);
        } else if (uid == (long)getuid()) {
            snprintf(text, sizeof(text), "a process of the user's");
        } else if (uid >= 0) {
            snprintf(text, sizeof(text), "a process of uid %ld, not the user's", uid);
        } else {
            snprintf(text, sizeof(text), "a process that has ended");
        }
        name_process(buf, len, &used, text, pids[i]);
    }
    free(jobs);
    if (used == 0) {
        snprintf(buf, len, "no client");
    }
}

/* The note `gsrun status` shows for entry g while its faulted server still
 * runs (this agent's own servers); 1 when it changed. */
static int refresh_note(gs_agent_t *a, int g)
{
    const gs_mps_health_t *h = NULL;
    const gs_mps_daemon_t *d = gs_daemons_retired_of(&a->daemons, g, &h);
    char *note = a->fault_note[g], who[400];
    if (a->daemons.borrowed) {
        return 0; /* its note is the one the job was told (agent_fault_job.c) */
    }
    if (d == NULL) {
        int had = note[0] != '\0';
        note[0] = '\0';
        return had;
    }
    if (note[0] != '\0' && a->fault_held[g] == h->nheld) {
        return 0;
    }
    a->fault_held[g] = h->nheld;
    if (h->nheld > 0) {
        gs_agent_fault_who(a, h->held, h->nheld, 1, who, sizeof(who));
        snprintf(note, 512,
                 "GPU fault at %s: the faulted MPS server (control daemon %d) is retired and still "
                 "held by %s; it ends when they exit (new clients get a fresh server)",
                 h->at, (int)d->daemon_pid, who);
    } else {
        snprintf(note, 512,
                 "GPU fault at %s: the faulted MPS server (control daemon %d) is retired and "
                 "ending (new clients get a fresh server)",
                 h->at, (int)d->daemon_pid);
    }
    return 1;
}

/* Entry g's server faulted and MPS listed the clients it ended. */
static void on_fault(gs_agent_t *a, int g)
{
    gs_daemons_t *ds = &a->daemons;
    const gs_mps_health_t *h = &ds->health[g];
    char label[48], who[400], uuid[96];
    pid_t hit[GS_MPS_HEALTH_PIDS];
    gs_error_t err;

    gs_daemons_label(ds, g, label, sizeof(label));
    snprintf(uuid, sizeof(uuid), "%s", ds->daemon[g].uuid);
    /* The log is the user's to write; the control daemon is not. */
    int nhit = gs_agent_fault_confirm(a, g, label, hit);
    if (nhit < 0) {
        return;
    }
    gs_agent_fault_who(a, hit, nhit, 0, who, sizeof(who));
    /* Told before the server is retired: ranks may hang on it, and a job
     * whose ranks it ended is ending now. */
    a->prog->fault(a, g, label, uuid, h->at, hit, nhit, who);
    if (gs_daemons_retire(ds, g) != 0) {
        gs_report_add(&a->report, 1,
                      "%s (%s): %d faulted MPS servers still wait for their clients: this one "
                      "stays, refusing new clients until its clients exit",
                      label, uuid, GS_DAEMONS_RETIRED_MAX);
        return;
    }
    long long t0 = gs_proc_now_ms();
    if (gs_daemons_refill(ds, &a->servers, g, 0, &err) != 0) {
        gs_report_add(&a->report, 1, "%s: no fresh MPS server after the fault: %s", label,
                      err.text);
    } else {
        gs_report_add(&a->report, 0,
                      "%s: the faulted server retired; a fresh one (control daemon %d) ready in "
                      "%lld ms",
                      label, (int)ds->daemon[g].daemon_pid, gs_proc_now_ms() - t0);
    }
    /* The fresh server's dirs before anyone is answered again. */
    gs_agent_publish_on(a);
    if (a->prog->renewed != NULL) {
        a->prog->renewed(a, g);
    }
}

void gs_agent_faults(gs_agent_t *a)
{
    int ev[GS_MAX_GPUS] = {0}, changed = 0;
    int due = gs_daemons_follow(&a->daemons, ev);
    a->fault_due_ms = due >= 0 ? gs_proc_now_ms() + due : 0;
    for (int g = 0; g < a->daemons.n && g < GS_MAX_GPUS; g++) {
        if ((ev[g] & GS_MPS_EV_FAULT) && !(ev[g] & GS_MPS_EV_LISTED)) {
            gs_agent_fault_ask(a, g); /* now, while the fault's clients live */
        }
        if (ev[g] & GS_MPS_EV_LISTED) {
            on_fault(a, g);
            changed = 1;
        }
    }
    for (int g = 0; g < a->daemons.n && g < GS_MAX_GPUS; g++) {
        changed |= refresh_note(a, g);
    }
    if (changed) {
        gs_agent_write_status(a);
    }
}

