/* SPDX-License-Identifier: BSD-3-Clause */
/* The `gsrun status` subcommand. */
#ifndef GS_STATUS_MAIN_H
#define GS_STATUS_MAIN_H

/* argv[0] is "status". Returns the exit status. */
int gs_status_main(int argc, char **argv);

#endif
