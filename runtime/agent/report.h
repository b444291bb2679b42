/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's report: what happened on this node, collected during the job
 * (problems always shown, the rest with -v) with the -vv timeline, and
 * delivered once, to one of four places (gs_sink_t, agentcmd.h). The lowest of
 * the agent's parts: it uses nothing of the others. */
#ifndef GS_AGENT_REPORT_H
#define GS_AGENT_REPORT_H

#include <sys/types.h>

#include "runtime/wire/agentcmd.h" /* gs_sink_t */

typedef struct {
    char node_name[64];
    int verbose; /* lines beyond the problems are delivered (-v) */
    char text[16384];
    size_t len;
    int problems;
    char timeline[512]; /* "agent 612, discovered 620, ...": -vv shows it */
    long long t0_ms;    /* wall clock the timeline counts from */
    gs_sink_t sink;
    char job_dir[256]; /* GS_SINK_FILE */
    int fd;            /* the FD sinks, -1 until known */
    int delivered;
    int told;      /* lines told while the job ran (gs_report_tell) */
    int fault_end; /* the agent ended the job after a GPU fault (the file says so) */
} gs_report_t;

void gs_report_init(gs_report_t *r, const char *node_name, int verbose, long long t0_ms);
/* One line; "problem: " in front when problem. */
void gs_report_add(gs_report_t *r, int problem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One problem line told now, while the job runs, where the user reads the
 * job's output: the FD sinks' descriptor, or with the file sink gsrun's
 * stderr (passed to the agent as its report descriptor). Where nothing can
 * be told now, it goes into the report as a problem. 1 when told now. */
int gs_report_tell(gs_report_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forgets what was collected (the guard reports only its own cleanup). */
void gs_report_clear(gs_report_t *r);
/* A step of the timeline, reached now. */
void gs_report_mark(gs_report_t *r, const char *step);
/* Where to deliver: the file in job_dir, or an FD sink with fd (-1: not
 * open yet, or nowhere). */
void gs_report_to_file(gs_report_t *r, const char *job_dir);
void gs_report_to_fd(gs_report_t *r, gs_sink_t sink, int fd);
/* Delivers once (later calls do nothing) and closes the FD. The lines to an
 * FD are filtered as gsrun filters: everything with -v, else the problems;
 * one write per line keeps them whole among the job's output. */
void gs_report_deliver(gs_report_t *r);
/* Its lines written (once), the descriptor kept open: a waiter may take the
 * agent's dir being gone for its end, so the lines go before the dir; the
 * descriptor (the leader's stderr, which lets the launcher finish that
 * rank) is closed after, by gs_report_deliver. */
void gs_report_write(gs_report_t *r);
/* Closes this process's copy of the FD without delivering (the guard, once
 * the agent has delivered). */
void gs_report_close(gs_report_t *r);
/* GS_SINK_RANK0: tries to open /proc/<pid>/fd/2 (rank 0's stderr; pid 0:
 * rank 0 has not registered yet). Returns the poll timeout in ms to try
 * again, or -1 when done trying (opened, gone, or past give_up_ms). */
int gs_report_open_rank0(gs_report_t *r, pid_t pid, long long now_ms, long long give_up_ms);

/* The report file of a node in a job dir. */
void gs_report_file_path(const char *job_dir, const char *node_name, char *buf, size_t len);
/* Removes the job dir (its report file and owner file first): the last step
 * of the agent, or of its guard, when gsrun does not run on this node. */
void gs_report_drop_job_dir(const char *job_dir, const char *node_name);

#endif
