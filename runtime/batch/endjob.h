/* SPDX-License-Identifier: BSD-3-Clause */
/* Root ends what root started for a job: the job's node agents and every
 * process in their sessions, whatever the job's user did to the agent's
 * socket, state file or the processes (a removed or replaced socket, a
 * stopped agent). Found from root's side, never from a file the user can
 * write: every process of the job's uid whose command line is gsrun-agent's
 * for that job directory, then every process of that uid in its session. */
#ifndef GS_ENDJOB_H
#define GS_ENDJOB_H

#include <sys/types.h>

/* SIGKILLs (a stopped process too) the agents of job_dir run by uid and
 * the processes of uid in their sessions, until none is left or
 * timeout_ms passes. Signals go through pidfds taken before the process
 * is checked, so a PID reused meanwhile is never hit. Returns how many
 * processes were ended, or -ETIMEDOUT when some were still there. */
int gs_endjob_kill(const char *proc_root, const char *job_dir, uid_t uid, int timeout_ms);

#endif
