/* SPDX-License-Identifier: BSD-3-Clause */
/* The batch-system subcommands: gsrun prolog, gsrun epilog, gsrun
 * task-prolog (a node provisioned with MPS for a whole job). */
#ifndef GS_BATCH_MAIN_H
#define GS_BATCH_MAIN_H

/* argv[0] is the subcommand. Returns the exit status. */
int gs_batch_main(int argc, char **argv);

#endif
