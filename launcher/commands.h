/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun's sub-commands, one table: what `gsrun <word> ...` runs instead of
 * a job. Each entry point is in launcher/<name>_main.c. */
#ifndef GS_COMMANDS_H
#define GS_COMMANDS_H

typedef int (*gs_command_fn)(int argc, char **argv);

typedef struct {
    const char *name;  /* the word after gsrun */
    gs_command_fn run; /* argv[0] is the word; returns the exit status */
    const char *what;  /* one line, for people reading the table */
} gs_command_t;

/* The sub-command that word names, or NULL (then gsrun runs a job). */
const gs_command_t *gs_command_find(const char *word);

#endif
