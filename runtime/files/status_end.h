/* SPDX-License-Identifier: BSD-3-Clause */
/* How the job ended, in what a node agent says at its end. An agent does
 * not know the job's exit status (its ranks are the launcher's children,
 * not its own); gsrun does, once mpirun has exited, and prints the agents'
 * reports then. So the agent's words that depend on the status carry a
 * mark, filled in where the report is delivered: by gsrun with mpirun's
 * status, by the agent itself (status unknown) for the launchers that take
 * its lines on a descriptor. Advice given for a job that failed would be
 * wrong: a program that never reached CUDA because it could not start
 * (a missing library: 127) is no program without CUDA. */
#ifndef GS_FILES_STATUS_END_H
#define GS_FILES_STATUS_END_H

#include <stddef.h>

/* Filled with " (the job ended with status S: see its output)" for S != 0,
 * nothing otherwise. */
#define GS_END_MARK_STATUS "{job-status}"
/* The same for S != 0; for 0 the advice for a program without CUDA; for
 * an unknown status that advice for a job that ended well. */
#define GS_END_MARK_ADVICE "{job-status-advice}"

/* line with its marks filled for the job's status (exit status, 128+N for
 * signal N; -1 unknown), into out (len bytes; cut to fit). */
void gs_status_end_fill(const char *line, int status, char *out, size_t len);

#endif
