/* SPDX-License-Identifier: BSD-3-Clause */
/* Slurm's srun under gsrun (launcher/srun_cmd.c). */
#ifndef GS_SRUN_CMD_H
#define GS_SRUN_CMD_H

/* Whether the launcher is Slurm's srun (by its name). */
int gs_srun_is(const char *launcher);

/* launcher --task-prolog=<prolog> <args>, NULL-terminated; a task prolog of
 * the user's (SLURM_TASK_PROLOG) is passed on to ours. NULL when out of
 * memory. */
char **gs_srun_command(char *launcher, const char *prolog, char **args, int nargs);

#endif
