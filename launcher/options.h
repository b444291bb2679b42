/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun's own command line: [gsrun options] [--] <launcher arguments>.
 *
 * gsrun options come first and all are long options that mpirun does not
 * have (plus -v, -h, -V); the first word that is not one starts the
 * launcher's arguments, which are passed on unchanged and never parsed. If
 * that word names a launcher (mpirun, mpiexec, orterun, srun, or a path to
 * one), it is taken as --launcher: `gsrun mpirun -np 4 ./app` works. */
#ifndef GS_OPTIONS_H
#define GS_OPTIONS_H

#include <stdio.h>

#include "runtime/core/config.h"
#include "runtime/core/gs_error.h"

typedef struct {
    gs_config_t cfg;
    int help;
    int version;
    int control_given;  /* --mps-control or GSRUN_MPS_CONTROL was set */
    int launcher_given; /* --launcher, GSRUN_LAUNCHER or a launcher word was given */
    int launcher_word;  /* the launcher came as the first word (gsrun mpirun ...) */
    char launcher_origin[40]; /* where the launcher came from, for messages */
    char control_origin[40];  /* where the control program came from */
    int first_arg;     /* index in argv of the first launcher argument */
} gs_opts_t;

/* Environment first (GSRUN_*), then the command line. Returns 0, or
 * -EINVAL with a one-line message in err. */
int gs_opts_parse(int argc, char **argv, gs_opts_t *o, gs_error_t *err);

/* gsrun --help: its options from the settings table (gs_config_keys). */
void gs_usage_print(FILE *f);

/* The options of the rank prefix (gsrun exec -h): gsrun's valued settings
 * but the launcher, and -v, from the same table and in the same form. */
void gs_usage_exec_options(FILE *f);

#endif
