/* SPDX-License-Identifier: BSD-3-Clause */
/* Open MPI's mpirun under gsrun (launcher/mpirun_cmd.c). */
#ifndef GS_MPIRUN_CMD_H
#define GS_MPIRUN_CMD_H

#include <stddef.h>

#include "runtime/core/gs_error.h"

/* Takes a fork agent of the user's own out of args (--mca orte_fork_agent
 * X, Open MPI 5's name, or the OMPI_/PRTE_ variables) into agent: 1 if
 * there was one, to chain behind the shim. */
int gs_mpirun_take_fork_agent(char **args, int *nargs, char *agent, size_t len);

/* 0 if launcher's --version says Open MPI, else an error saying to use the
 * rank prefix with that launcher. */
int gs_mpirun_check(const char *launcher, gs_error_t *err);

/* The job's rank count as mpirun's arguments give it: the sum of every
 * app context's -np/-n/-c (contexts split by ':'), read up to each
 * context's program; 0 when a context names none or the arguments hold an
 * option not known here (the count is then unknown, never a guess). */
int gs_mpirun_count_ranks(char **args, int nargs);

/* launcher --mca <fork agent> <shim> ... -x <the ranks' variables> <args>:
 * NULL-terminated, NULL when out of memory. */
char **gs_mpirun_command(char *launcher, char *shim, char **args, int nargs);

#endif
