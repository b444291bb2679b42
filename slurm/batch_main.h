/* SPDX-License-Identifier: BSD-3-Clause */
/* The batch-system subcommands: gsrun prolog, gsrun epilog, gsrun
 * task-prolog (a node provisioned with MPS for a whole job). */
#ifndef GS_BATCH_MAIN_H
#define GS_BATCH_MAIN_H

/* Whether argv[1] names one of them. */
int gs_batch_is_command(const char *word);

/* argv[0] is the subcommand. Returns the exit status. */
int gs_batch_main(int argc, char **argv);

#endif
