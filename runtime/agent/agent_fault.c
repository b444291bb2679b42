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
 *   - tells it once: in the job's report (a job's own servers), or to each
 *     job leasing it (the shared agent: "fault S <time> <PIDs>" on the
 *     lease; agent_lease_watch.c hands the line to gs_agent_fault_told);
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
#include "runtime/wire/lease.h"

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
    for (int r = 0; r < a->ranks.size && a->mode != GS_MODE_SHARED && nown < n; r++) {
        pid_t p = gs_ranks_pid_of_rank(&a->ranks, r);
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
        name_process(buf, len, &used, text, gs_ranks_pid_of_rank(&a->ranks, own[i]));
    }
    for (int i = 0; i < n; i++) {
        if (a->mode != GS_MODE_SHARED && gs_ranks_rank_of_pid(&a->ranks, pids[i]) >= 0) {
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
        gs_attach_env_t id = {.uid = -1, .euid = -1};
        gs_attach_read_uid(pids[i], "/proc", &id);
        long uid = id.uid;
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
        return 0; /* its note is the one the job was told (gs_agent_fault_told) */
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

/* The ranks whose context a fault ended that still run (their context's
 * process lives), as "0-1,4" into buf: how many. A rank that went on
 * after the fault in a process of its own, or exited, holds nothing up. */
int gs_agent_fault_running(const gs_agent_t *a, char *buf, size_t len)
{
    int n = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < a->attach.n; r++) {
        const gs_attach_rank_t *x = &a->attach.r[r];
        if (x->state != GS_ATTACH_FAULTED || x->gone ||
            (x->ctx_pid > 0 && x->ctx_pid != x->pid &&
             gs_attach_rank_of(&a->attach, x->ctx_pid, "/proc") != r)) {
            continue;
        }
        int w = snprintf(buf + used, used < len ? len - used : 0, "%s%d", n ? "," : "", r);
        used += w > 0 ? (size_t)w : 0;
        n++;
    }
    return n;
}

/* What the fault grace will do, for the line that tells a fault. */
static void grace_note(const gs_agent_t *a, char *buf, size_t len)
{
    char ranks[128], opt[64];
    int g = a->o->cfg.fault_grace_s, n = gs_agent_fault_running(a, ranks, sizeof(ranks));
    buf[0] = '\0';
    if (g > 0 && n > 0) {
        snprintf(buf, len,
                 ". gsrun ends the job if rank%s %s still run%s %d s from now (%s=%d; a program "
                 "that goes on without the GPU after a fault: 0)",
                 n > 1 ? "s" : "", ranks, n > 1 ? "" : "s", g,
                 gs_config_opt(&a->o->cfg, "mps-fault-grace", opt, sizeof(opt)), g);
    }
}

/* MPS ended these clients' contexts: their ranks are marked (agent_watch.c
 * tells the grace from fault_at_ms). 1 when any was this job's. */
static int mark_faulted(gs_agent_t *a, const pid_t *pids, int n)
{
    int hit = 0;
    for (int i = 0; i < n; i++) {
        int r = gs_attach_rank_named(&a->attach, pids[i], "/proc");
        hit |= r >= 0 && gs_attach_set(&a->attach, r, GS_ATTACH_FAULTED, pids[i], -1);
    }
    if (hit && a->fault_at_ms <= 0) {
        a->fault_at_ms = gs_proc_now_ms();
    }
    return hit;
}

/* Entry g's server faulted and MPS listed the clients it ended. */
static void on_fault(gs_agent_t *a, int g)
{
    gs_daemons_t *ds = &a->daemons;
    const gs_mps_health_t *h = &ds->health[g];
    char label[48], who[400], line[GS_MPS_HEALTH_PIDS * 12 + 64], uuid[96];
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
    if (a->mode == GS_MODE_SHARED) {
        gs_report_add(&a->report, 1,
                      "%s (%s): the shared MPS server hit a fatal GPU fault at %s; MPS ended "
                      "every client on it: %s",
                      label, uuid, h->at, who);
    } else {
        /* Told now, while the job runs: its ranks may hang on it. */
        char grace[300];
        mark_faulted(a, hit, nhit);
        grace_note(a, grace, sizeof(grace));
        gs_report_tell(&a->report,
                       "%s (%s): this job's MPS server hit a fatal GPU fault at %s; MPS ended "
                       "every client on it: %s%s",
                       label, uuid, h->at, who, grace);
    }
    if (a->mode == GS_MODE_SHARED) {
        /* Told first: a job whose ranks the fault ended is ending now. */
        int n = gs_lease_fmt_fault(line, sizeof(line), g, h->at, hit, nhit);
        gs_agent_tell_leases(a, g, line, n);
    }
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
    if (a->mode == GS_MODE_SHARED) {
        /* Its PIDs and core too, before the jobs read them at "renew"
         * (else they take the retired daemon's). */
        gs_agent_write_status(a);
        gs_agent_tell_leases(a, g, line, gs_lease_fmt_renew(line, sizeof(line), g));
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

/* The shared servers' logs read up to now (a job's lease). */
static void follow_shared(gs_agent_t *a)
{
    gs_daemons_t *ds = &a->daemons;
    char path[GS_PATH_MAX];
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS && ds->borrowed; e++) {
        gs_mps_health_t *h = &ds->health[e];
        gs_mps_out_path(&ds->daemon[e], path, sizeof(path));
        gs_mps_health_follow(h, path);
        gs_mps_health_settle(h); /* whole: the shared agent or the job's end says so */
    }
}

int gs_agent_fault_untold(gs_agent_t *a)
{
    follow_shared(a);
    for (int e = 0; e < a->daemons.n && e < GS_MAX_GPUS && a->daemons.borrowed; e++) {
        if (a->daemons.health[e].faults > a->fault_told[e]) {
            return 1;
        }
    }
    return 0;
}

void gs_agent_fault_told(gs_agent_t *a, const char *line)
{
    gs_daemons_t *ds = &a->daemons;
    char who[400];
    pid_t pids[GS_MPS_HEALTH_PIDS];
    gs_lease_fault_t f;
    int changed = 0;
    if (!ds->borrowed || gs_lease_parse_fault(line, &f, pids, GS_MPS_HEALTH_PIDS) != 0) {
        return;
    }
    const int s = f.server, n = f.npids;
    const char *at = f.at;
    follow_shared(a);
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS; e++) {
        if (a->share_server[e] != s) {
            continue;
        }
        a->fault_told[e] = ds->health[e].faults; /* its log's fault: told */
        /* Only a job whose ranks MPS ended; once for the shared server. */
        int mine = 0;
        for (int i = 0; i < n; i++) {
            mine += gs_attach_rank_named(&a->attach, pids[i], "/proc") >= 0;
        }
        if (mine == 0 || changed) {
            continue;
        }
        gs_agent_fault_who(a, pids, n, 0, who, sizeof(who));
        char label[48];
        gs_daemons_label(ds, e, label, sizeof(label));
        /* Once, without -v, now: the job may hang on it, or end of it. */
        char grace[300];
        mark_faulted(a, pids, n);
        grace_note(a, grace, sizeof(grace));
        gs_report_tell(&a->report,
                       "%s (%s): the MPS server this job shared with the user's other jobs hit a "
                       "fatal GPU fault at %s; MPS ended every client on it: %s%s",
                       label, ds->daemon[e].uuid, at, who, grace);
        snprintf(a->fault_note[e], sizeof(a->fault_note[e]),
                 "GPU fault at %s on the user's shared MPS server %d: MPS ended %s; the server "
                 "was replaced",
                 at, s, who);
        changed = 1;
    }
    if (changed) {
        gs_agent_write_status(a);
    }
}
