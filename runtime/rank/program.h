/* SPDX-License-Identifier: BSD-3-Clause */
/* What a rank's program is, for the default share: a program that links no
 * MPI library cannot be coupled to the other ranks on its GPU (it runs on
 * its own), and the share MPS gives coupled ranks (200/n) only slows it. */
#ifndef GS_PROGRAM_H
#define GS_PROGRAM_H

#include <stddef.h>

/* The program exec would run for name (a path, or a name looked up in
 * PATH as execvp does), into out. 0 or -ENOENT. */
int gs_program_resolve(const char *name, char *out, size_t len);

/* Execs argv[0] (a path, or a name looked up in PATH) as Open MPI's orted
 * starts a rank: an executable file the kernel cannot run (no "#!" line,
 * not ELF) fails with ENOEXEC, where execvp would run it through /bin/sh.
 * Returns only on failure, with the errno of the exec that decided. */
int gs_program_exec(char *const argv[]);

/* Whether the executable at path links an MPI library, from its dynamic
 * section (DT_NEEDED: libmpi*, libmpich*, libmpifort*, libmpicxx*,
 * libmpi_*): 1 it does, 0 it is a dynamic ELF executable that does not,
 * -1 unknown (a script, an interpreter or a wrapper that runs another
 * program: python, bash, env, numactl, ... by name; a static executable,
 * an ELF class or byte order not this machine's, unreadable). The program's
 * own entries only: an MPI library reached through another library of its
 * own counts as none. */
int gs_program_links_mpi(const char *path);

#endif
