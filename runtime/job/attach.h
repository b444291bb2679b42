/* SPDX-License-Identifier: BSD-3-Clause */
/* Each rank's MPS state as the driver shows it, not as gsrun's environment
 * promised it: a rank counts as served once its server's log says one of
 * its contexts is an active client; NVML's listings tell a context on the
 * GPU without MPS; the client's own log line tells a CUDA_VISIBLE_DEVICES
 * that names no device of its server; a GPU fault's list tells whose
 * context MPS ended. The table is pure bookkeeping (layer 7: uses nothing
 * of the other parts); the agent feeds it (agent_watch.c).
 *
 * Measured on an H200, driver 580 (doc/tuning.md, "When a rank is not an
 * MPS client"): a client is listed by NVML in both the compute and the MPS
 * listing, a plain context and an MPS server in the compute listing only;
 * a client in a PID namespace of its own is named (by NVML and the log) by
 * its PID in the agent's namespace. */
#ifndef GS_AGENT_ATTACH_H
#define GS_AGENT_ATTACH_H

#include <stddef.h>
#include <sys/types.h>

typedef enum {
    GS_ATTACH_UNSEEN = 0, /* no context seen yet (or a program without CUDA) */
    GS_ATTACH_CLIENT,     /* an MPS client of the server it was given */
    GS_ATTACH_PLAIN,      /* a context on a GPU without MPS */
    GS_ATTACH_NODEVICE,   /* its CUDA found no device (CUDA_VISIBLE_DEVICES) */
    GS_ATTACH_FAULTED,    /* a GPU fault ended its context */
    /* An MPS client (NVML's MPS listing holds its context) that no control
     * daemon gsrun gave it lists: a client of an MPS server gsrun did not
     * give it (a wrapper's own CUDA_MPS_PIPE_DIRECTORY, a hand-started
     * daemon). NVML does not say whose server a client is: the daemons do. */
    GS_ATTACH_OTHER,
    /* blocked on a wedged MPS daemon or server (agent_stuck.c): no context
     * yet, its CUDA waiting for one that does not answer */
    GS_ATTACH_BLOCKED,
    GS_ATTACH_NSTATES
} gs_attach_state_t;

/* What the rank's program was started with, read while it could be read
 * (CUDA makes a process non-dumpable once it starts: its environ cannot be
 * read after, by its user). */
typedef struct {
    int taken;          /* read at least once */
    int has_pipe;       /* CUDA_MPS_PIPE_DIRECTORY was set */
    char pipe[256];     /* its value */
    int pipe_seen;      /* <pipe>/control existed in the process's own view: 1, 0; -1 unknown */
    int has_cvd;
    char cvd[128];      /* CUDA_VISIBLE_DEVICES */
    char prog[64];      /* its program (comm) */
    int container;      /* the container runtime that started it (gs_container_t) */
    long uid;           /* its real uid as the agent sees it (host uid); -1 unknown */
    long euid;          /* its effective uid (a set-uid program's owner); -1 unknown */
} gs_attach_env_t;

typedef struct {
    pid_t pid;          /* the registered process; 0 not yet */
    unsigned long long start; /* its start time (stat field 22): a reused PID is not it; 0 unknown */
    int state;
    int entry;          /* its server (the plan's entry), -1 none */
    int gpu;            /* PLAIN: where NVML saw the context (the agent's GPU number) */
    pid_t ctx_pid;      /* the process holding the context (the rank or one of its own) */
    long long cuda_ms;  /* when CUDA was first seen started in it (monotonic), 0 not yet */
    int told;           /* its line was told */
    int nplain, nctx;   /* its tree's contexts NVML listed last without MPS, and in all */
    /* What its server's log said of it last (GS_MPS_CLIENT_ACTIVE or
     * _NODEVICE; 0 none) and of which process, not yet borne out by the
     * server's control daemon: a log line only says when to ask. */
    int hint;
    pid_t hint_pid;
    int hint_entry;
    long long hint_ms;  /* when the line was read */
    int hint_left;      /* the log then said that process's context ended */
    int gone;           /* exited */
    long long since_ms; /* registration (monotonic) */
    /* Its processes' GPU memory (MiB) at NVML's last look, and the largest
     * of the looks while it ran; -1 where NVML could not tell (not looked
     * yet, a driver without the MPS listing). */
    long long mib, peak_mib;
    /* The largest single MPS client context of its at any look (MiB), the
     * figure --mps-memory-limit bounds (per client and device); 0 none. */
    long long peak_ctx_mib;
    gs_attach_env_t env;
} gs_attach_rank_t;

typedef struct {
    int n;
    gs_attach_rank_t *r;
} gs_attach_t;

int gs_attach_init(gs_attach_t *t, int n);
void gs_attach_free(gs_attach_t *t);
void gs_attach_registered(gs_attach_t *t, int rank, pid_t pid, int entry, long long now_ms);
/* Records the start time of rank's process from proc_root: from then on
 * only that process is the rank (its PID may be reused once it exits). */
void gs_attach_identify(gs_attach_t *t, int rank, const char *proc_root);
/* The rank whose process pid is, or whose process has pid among its
 * descendants (a wrapper's child), read from proc_root ("/proc"); -1. A
 * rank that exited (gone) or whose PID another process holds now is
 * nobody's. */
int gs_attach_rank_of(const gs_attach_t *t, pid_t pid, const char *proc_root);
/* The rank whose own registered process was pid and has exited (no
 * process holds pid now, in proc_root): -1 otherwise. What the log said
 * of it can no longer be asked of its daemon. */
int gs_attach_rank_exited(const gs_attach_t *t, pid_t pid, const char *proc_root);
/* gs_attach_rank_of, else gs_attach_rank_exited: the rank a PID that MPS
 * named was, alive or since ended. */
int gs_attach_rank_named(const gs_attach_t *t, pid_t pid, const char *proc_root);
/* A new state for rank r seen in ctx_pid (gpu for PLAIN) as the driver
 * shows it now (NVML, the control daemon); 1 when it changed. A fault (its
 * server's daemon said FAULT) stays; a context without MPS stays (NVML
 * listed it: the rank had one); BLOCKED is taken only by a rank without a
 * context yet (UNSEEN), and leaves for whatever is seen of it later; the
 * rest follow what is seen. */
int gs_attach_set(gs_attach_t *t, int r, int state, pid_t ctx_pid, int gpu);
/* Reads what process pid was started with into e (kept when it cannot be
 * read now); expected_pipe: the pipe dir gsrun gave it (its visibility is
 * looked up through the process's own root). */
void gs_attach_read_env(pid_t pid, const char *proc_root, const char *expected_pipe,
                        gs_attach_env_t *e);
/* Reads the real and effective uids of process pid into e (kept when it
 * is gone). */
void gs_attach_read_uid(pid_t pid, const char *proc_root, gs_attach_env_t *e);
/* Whether CUDA has started in process pid: the driver's library is mapped
 * (/proc/PID/maps), or the process made itself unreadable to its user as
 * CUDA does once it starts. 0 when neither, or gone. */
int gs_attach_cuda_started(pid_t pid, const char *proc_root);
/* The line for rank r's state (PLAIN, NODEVICE or OTHER), with its cause read
 * from its environment and what to do; pipe and cvd: what gsrun set. */
void gs_attach_explain(const gs_attach_rank_t *r, int rank, const char *pipe, const char *cvd,
                       char *buf, size_t len);
/* How many ranks are in each state. */
void gs_attach_counts(const gs_attach_t *t, int counts[GS_ATTACH_NSTATES]);
/* "0-1,4" of the ranks in state s (at most len). */
void gs_attach_ranks_in(const gs_attach_t *t, int s, char *buf, size_t len);
/* The same of the registered ranks i with pick[i] (t->n of them). */
void gs_attach_ranks_where(const gs_attach_t *t, const unsigned char *pick, char *buf, size_t len);
/* Server entry e's ranks (rank_entry[r]: rank r's entry, n ranks) for
 * `gsrun status`: "4/4", or with the others named "3/4 2:no-mps". */
void gs_attach_status(const gs_attach_t *t, const int *rank_entry, int n, int e, char *buf,
                      size_t len);
/* Whether a rank in state s was seen holding a context (an MPS client of
 * gsrun's server or another's, or a context without MPS). */
int gs_attach_has_context(int s);
/* The state's short name (status, JSON): "unseen", "client", ... */
const char *gs_attach_name(int s);

#endif
