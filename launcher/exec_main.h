/* SPDX-License-Identifier: BSD-3-Clause */
/* `gsrun exec`: the rank prefix, for launchers gsrun does not start. */
#ifndef GS_EXEC_MAIN_H
#define GS_EXEC_MAIN_H

/* argv[0] is "exec". Execs the program (through gsrun-shim), or returns an
 * exit status. */
int gs_exec_main(int argc, char **argv);

#endif
