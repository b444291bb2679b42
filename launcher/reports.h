/* SPDX-License-Identifier: BSD-3-Clause */
/* After the launcher: waiting for the node agents of gsrun's node to finish
 * (their node dir locks) and printing every node's report. */
#ifndef GS_REPORTS_H
#define GS_REPORTS_H

/* How long gsrun waits, after mpirun, for node agents to stop MPS: their
 * own bounds (quit, SIGTERM, SIGKILL) add up to less. */
#define GS_AGENT_WAIT_MS 20000
/* How long gsrun waits for its adopted children to exit after that. */
#define GS_REAP_WAIT_MS 2000
/* How long gsrun keeps ending what the ranks left running. */
#define GS_LEFTOVER_KILL_MS 1000

/* Waits until every node agent of the job has released its node dir: a
 * blocking lock, interrupted by an alarm at the deadline. */
void gs_wait_for_agents(const char *job_dir, int timeout_ms);

/* Prints the agents' reports: always with -v, otherwise those with
 * problems; their words on how the job ended say job_status (mpirun's
 * exit status, 128+N for signal N; -1 unknown: status_end.h). Returns the
 * number of problems; *fault_end (may be NULL) 1 when an agent ended the
 * job after a GPU fault (--mps-fault-grace). */
int gs_print_reports(const char *job_dir, int verbose, int job_status, int *fault_end);

#endif
