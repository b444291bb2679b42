/* SPDX-License-Identifier: BSD-3-Clause */
/* What gsrun knows of the container runtimes a rank may run in: how to
 * tell which one started a process (the marker each puts in its
 * environment), and the option of each that binds a host directory into
 * the container at the same path, for the line that tells a rank whose
 * MPS pipe dir the container hides (doc/containers.md). */
#ifndef GS_CORE_CONTAINER_H
#define GS_CORE_CONTAINER_H

#include <stddef.h>

typedef enum {
    GS_CT_NONE = 0,     /* no marker: none, or one that leaves none (enroot, docker) */
    GS_CT_CHARLIECLOUD, /* ch-run: CH_RUNNING */
    GS_CT_APPTAINER,    /* Apptainer, Singularity: APPTAINER_CONTAINER, SINGULARITY_CONTAINER */
    GS_CT_PODMAN,       /* podman: container=podman */
} gs_container_t;

/* The runtime whose marker is in a process's environment block (NUL-
 * separated NAME=value entries, len bytes, as /proc/PID/environ holds). */
gs_container_t gs_container_of_environ(const char *block, size_t len);

/* Its name ("Charliecloud", ...; "" for none). */
const char *gs_container_name(gs_container_t ct);

/* The directory to bind for a pipe dir of gsrun's: the run dir that holds
 * it (<dir>/gsrun-<uid>, <dir>/gsrun.XXXXXX, <root base>/gsrun/<job>), so
 * that one bind serves the user's next jobs too; the pipe dir itself when
 * none is found. */
void gs_container_bind_dir(const char *pipe, char *out, size_t len);

/* "podman run -v DIR:DIR" and the like for ct; for none, every runtime's,
 * one after another. */
void gs_container_bind_hint(gs_container_t ct, const char *dir, char *out, size_t len);

#endif
