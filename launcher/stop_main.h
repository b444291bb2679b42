/* SPDX-License-Identifier: BSD-3-Clause */
/* The `gsrun stop` subcommand. */
#ifndef GS_STOP_MAIN_H
#define GS_STOP_MAIN_H

/* argv[0] is "stop". Returns the exit status. */
int gs_stop_main(int argc, char **argv);

#endif
