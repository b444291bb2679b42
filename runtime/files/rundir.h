/* SPDX-License-Identifier: BSD-3-Clause */
/* Private run directories for a job's MPS daemons.
 *
 * Layout (all 0700, owned by the job's user):
 *   <TMPDIR>/gsrun.XXXXXX/            job dir, made by gsrun with mkdtemp
 *   <job dir>/<node>/                 node dir: node agent lock, socket, state
 *   <job dir>/<node>/g<N>/            CUDA_MPS_PIPE_DIRECTORY of GPU N
 *   <job dir>/<node>/g<N>.log/        CUDA_MPS_LOG_DIRECTORY of GPU N
 *   <job dir>/<node>.report           the agent's summary, read by gsrun
 * MPS puts unix sockets in the pipe dir, so its path plus the longest socket
 * name must fit in sun_path (108 bytes). */
#ifndef GS_RUNDIR_H
#define GS_RUNDIR_H

#include <stddef.h>

#include "runtime/core/gs_error.h"

/* Room kept after a pipe dir for the names MPS creates in it
 * ("/control_privileged" and the like). */
#define GS_RUNDIR_SOCKET_ROOM 24
#define GS_SUN_PATH_MAX 108

/* Checks that dir can safely hold a job dir: a real directory (not a
 * symlink), owned by us or root, and if others may write to it, sticky. */
int gs_rundir_check_parent(const char *dir, gs_error_t *err);

/* Creates <tmpdir>/gsrun.XXXXXX (mode 0700, exclusive, unpredictable name). */
int gs_rundir_create_job(const char *tmpdir, char *out, size_t outlen, gs_error_t *err);

/* Creates dir with mode 0700, or accepts it if it exists and is a directory
 * owned by us with no group or other access; refuses symlinks. */
int gs_rundir_ensure(const char *dir, gs_error_t *err);
/* Whether dir is a directory of ours that no one else can enter (what
 * gs_rundir_ensure accepts when dir exists): 0, or -errno with err saying
 * why (-ENOENT: none there; -ENOTDIR; -EPERM: another's, or open to others). */
int gs_rundir_check_own(const char *dir, gs_error_t *err);

/* Opens dir (no link) and takes its exclusive flock, waiting up to
 * timeout_ms (polled every 5 ms). Returns the locked descriptor (close it
 * to unlock), -ENOENT and the like, or -ETIMEDOUT. */
int gs_rundir_lock_wait(const char *dir, int timeout_ms);

/* Opens path for reading only if it is a regular file (no link, FIFO or
 * device: what another user may have put there never blocks or misleads
 * the reader). Returns the descriptor or -errno (-EINVAL: not a file). */
int gs_rundir_open_regular(const char *path);

/* Whether a job dir can hold this node's dirs: no control character (the
 * state file is line-based) and short enough for the deepest unix socket
 * in it. Returns 0 or a negative errno with err saying what to do. */
int gs_rundir_check_usable(const char *job_dir, gs_error_t *err);

/* Whether dir + '/' + a socket name of GS_RUNDIR_SOCKET_ROOM bytes fits. */
int gs_rundir_socket_fits(const char *dir);

/* Removes a tree we made (or its user shaped: any depth and width), never
 * following symlinks, with two directories open at a time and bounded
 * memory and stack. Missing is success. 0, or a negative errno (what could
 * not be removed stays). */
int gs_rundir_remove(const char *path);

/* A job's name: its dir's last part ("gsrun.Ab12Cd"), the name the
 * placement record, the lease and the fault lines give it. */
const char *gs_rundir_job_name(const char *job_dir);

/* Opens (O_DIRECTORY, no symlinks) up to max node directories of a job dir,
 * putting descriptors in fds and names in names (may be NULL). A node agent
 * holds an exclusive flock on its node directory while it runs. Returns
 * the number opened. */
int gs_rundir_open_nodes(const char *job_dir, int *fds, char (*names)[64], int max);

/* This node's name for directory and report names: the host name up to its
 * first '.', letters, digits, '-' and '_' only, at most 32 characters. */
void gs_rundir_node_name(char *buf, size_t len);

/* Where gsrun keeps its dirs when TMPDIR does not say: /dev/shm where it is
 * a usable shared directory (sticky, root's, writable, GS_RUNDIR_SHM_MIN
 * free), else /tmp. Container runtimes start a rank with a /tmp of their
 * own (enroot, podman) or the host's $TMPDIR at its /tmp (Charliecloud),
 * but bind the host's /dev/shm at the same path (Charliecloud, enroot,
 * Apptainer, podman-hpc's MPI mode): a pipe dir there is where the rank
 * looks for it (doc/containers.md). */
#define GS_RUNDIR_SHM "/dev/shm"
#define GS_RUNDIR_SHM_MIN (16ULL << 20)
const char *gs_rundir_default_root(void);
/* Whether dir can be that root: what gs_rundir_check_parent accepts (a real
 * directory, ours or root's, sticky where others may write), writable by
 * us, with GS_RUNDIR_SHM_MIN free. */
int gs_rundir_root_usable(const char *dir);

/* The temporary directory gsrun uses: $TMPDIR if set, absolute and not
 * /tmp itself (the system's default, which Slurm sets for its tasks), else
 * gs_rundir_default_root(). */
const char *gs_rundir_tmpdir(void);

/* A user's own base for batch job dirs: dir, or /tmp/gsrun-<uid> without
 * one; made private (0700) or accepted only if it already is the caller's
 * private directory (never one another user made first). */
int gs_rundir_user_base(const char *dir, char *out, size_t len, gs_error_t *err);

/* Names tried after a user's base in a shared directory that another user
 * took first: <base>.1 to <base>.N. */
#define GS_RUNDIR_BASE_TRIES 16
/* The name tried k-th: dir, then dir.1 ... dir.N. */
int gs_rundir_base_name(const char *dir, int k, char *out, size_t len, gs_error_t *err);

/* The same where another user may have taken the name: dir, else, when
 * another user took that name first (a link, a file, a directory not ours
 * or not private, one that vanished as we looked), the first of dir.1 ...
 * dir.N that is ours or can be made, else one nobody can take first (below).
 * One of these names that is the
 * caller's private directory already is taken first, the lowest such, so
 * the user's jobs keep meeting in one place whatever another user does to
 * the names meanwhile. *taken gets why dir itself was not used ("" when it
 * was). */
int gs_rundir_user_base_any(const char *dir, char *out, size_t len, char *taken,
                            size_t taken_len, gs_error_t *err);
/* Where another user holds all of dir, dir.1 ... dir.N, the base is one no
 * other user can take first, dir.x<6 random characters> (mkdtemp), found
 * again by its owner: the first such private dir of the caller's in name
 * order. */
/* The caller's existing base of those names (no dir is made): 0 with it in
 * out, or -ENOENT. */
int gs_rundir_user_base_find(const char *dir, char *out, size_t len);

#endif
