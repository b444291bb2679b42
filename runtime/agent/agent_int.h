/* SPDX-License-Identifier: BSD-3-Clause */
/* What both of gsrun-agent's programs share, seen only by the agent's
 * parts. gsrun-agent runs one of two programs over what both use
 * (runtime/agent/: the loop, set-up and end, the run of a program's table,
 * the node state and status, GPU faults): a job's agent (runtime/job/,
 * its struct and parts in job_int.h) or the user's node service
 * (runtime/service/, service_int.h). Each program's struct begins with the
 * gs_agent_t below; the shared code sees only that part and hands each
 * program its behaviour as data (a gs_agent_program_t's hooks, a table of
 * messages, each wait's watches), never as a mode to test. The parts below
 * them each own their state and know nothing of these structs:
 *
 *   report.c   what happened, delivered once         (uses nothing)
 *   ranks.c    the rank table                        (uses nothing)
 *   guard.c    cleans up if the agent is killed      (ranks, report)
 *   daemons.c  the MPS daemons of the node           (guard, report)
 *
 * The order, the rooms and the state tables are in doc/architecture.md;
 * tests/layers.sh checks the order and the rooms. */
#ifndef GS_AGENT_INT_H
#define GS_AGENT_INT_H

#include <poll.h>
#include <sys/types.h>

#include "runtime/agent/agent.h"
#include "runtime/agent/daemons.h"
#include "runtime/agent/guard.h"
#include "runtime/agent/ranks.h"
#include "runtime/agent/report.h"
#include "runtime/core/limits.h"
#include "runtime/files/state.h"
#include "runtime/files/status.h"
#include "runtime/gpu/gpu.h"
#include "runtime/plan/policy.h"

typedef enum {
    GS_AGENT_DISCOVERING, /* listening (early, job-long); GPUs, control program */
    GS_AGENT_PRESTARTING, /* early: MPS on every visible GPU while mpirun launches */
    GS_AGENT_SIZING,      /* early: waiting for the node's first rank to say the size */
    GS_AGENT_PLANNING,    /* shares per GPU for the node's ranks */
    GS_AGENT_STARTING,    /* MPS where the plan wants it; the node state published */
    GS_AGENT_SERVING,     /* ranks register and run; until they are gone or the launcher is */
    GS_AGENT_HOLDING,     /* job-long: MPS up until "stop" or a signal */
    GS_AGENT_STOPPING,    /* MPS quit, daemons reaped */
    GS_AGENT_FAILED,      /* node-wide error published (or nobody to serve): report, then
                           * wait for the launcher, whose ranks read the state and exit */
    GS_AGENT_DONE,        /* directories removed, report delivered, guard released */
    GS_AGENT_NSTATES
} gs_agent_state_t;

/* What a wait may watch of its own besides its messages (a service's
 * leases at most). */
#define GS_AGENT_EXTRA_MAX 64

typedef struct gs_agent_program gs_agent_program_t;

/* What both programs share, the first member of each one's own struct
 * (gs_job_t: runtime/job/job_int.h; gs_service_t:
 * runtime/service/service_int.h): the shared code sees only this part and
 * reaches a program's own through its hooks. */
typedef struct gs_agent {
    const gs_agent_opts_t *o;
    const gs_agent_program_t *prog; /* the job's agent, or the node service */
    gs_agentcmd_mode_t mode;
    gs_agent_state_t state;
    int code; /* the agent's exit status */
    char node_dir[256];
    char sock[256]; /* the registration socket */
    int listen_fd, sig_fd;
    int watch_fd;    /* the launcher: pidfd, or gsrun's pipe (early) */
    pid_t watch_pid; /* the launcher's PID (early: from the size message) */
    int gsrun_fd;    /* pidfd of gsrun on this node */
    int ready_fd;    /* "ok"/"error" (early: "listening", "error") to the starter */
    int local_size;
    long long started_ms; /* wall clock, for `gsrun status` */
    long long t_start;    /* monotonic: when the agent started */

    gs_gpu_list_t gpus;
    /* What the daemons, the placer and the published state are indexed by:
     * with MPS, the GPU of each server of the plan (server-major, so entry
     * g < gpus.count is GPU g's first server); without, the GPUs. */
    gs_gpu_list_t servers;
    char control[GS_PATH_MAX];
    int have_control;
    char control_error[GS_ERROR_LEN];
    gs_plan_t plan;
    char warning[GS_ERROR_LEN]; /* told to the ranks with MPS on (node leader prints it) */
    int nstates;           /* node states published: the last one's generation is nstates - 1 */
    const char *loop_end;  /* why the current wait ends (agent_loop.c), NULL: it goes on */

    /* GPU faults on the servers (agent_fault.c): when the daemons' logs are
     * read again (a fault's client list not yet whole), and each entry's
     * fault as `gsrun status` shows it. */
    long long fault_due_ms;
    char fault_note[GS_MAX_GPUS][512];
    int fault_held[GS_MAX_GPUS]; /* the retired server's clients when the note was made */
    /* Each entry's control daemon's word on the fault its log began to
     * tell: asked at the fault's first line, while its clients live (MPS
     * says ACTIVE again once they have gone), and kept for its list. */
    struct {
        int asked; /* 1: asked since the fault's first line */
        int fault; /* as gs_mps_word_t; -2: no answer */
        int n;
        pid_t clients[GS_MPS_HEALTH_PIDS]; /* the faulted server's clients */
    } fault_word[GS_MAX_GPUS];
    /* Each entry's server process's own GPU memory at the last look (-1
     * unknown): the service's from its listing, a job's from its looks. */
    long long server_mib[GS_MAX_GPUS];
    /* MPS that does not answer (agent_stuck.c, agent_share_wedge.c): how
     * many wedged daemons each entry has had ended, and the last wedge, for
     * `gsrun status`. */
    int stuck_ended[GS_MAX_GPUS];
    char stuck_note[GS_MAX_GPUS][320];

    gs_report_t report;
    gs_guard_t guard;
    gs_daemons_t daemons;
} gs_agent_t;

/* agent_setup.c: before the loop (0, or -1 when another agent holds the node
 * dir) and after it. */
void gs_agent_init_report(gs_agent_t *a);
int gs_agent_setup(gs_agent_t *a, int *lockfd);
void gs_agent_teardown(gs_agent_t *a, int lockfd);

/* One program's table of states (agent.c: the job's agent;
 * agent_service.c: the node service), indexed by state: the states each
 * may go to (1u << state each) and its step, which does the state's work
 * and names the next (NULL: not a state of this program). */
typedef struct {
    unsigned next;
    gs_agent_state_t (*step)(gs_agent_t *a);
} gs_agent_step_t;

/* A program of gsrun-agent: its table of states, its process name (NULL:
 * the program's), its struct (made zeroed with its own part set up, the
 * shared part first: NULL out of memory; and freed at the very end), what
 * it does before the shared end (NULL: nothing), its own part of the node
 * state and of the status file (the rows' count, who holds them), how it
 * tells a GPU fault its control daemon confirmed on server g (who: the
 * clients MPS ended, as the user knows them), what follows a fresh server
 * in g's place (NULL: nothing), and its rank table (NULL: it has none; the
 * loop follows their exits, a fault's clients are named by it). */
struct gs_agent_program {
    const gs_agent_step_t *states;
    const char *comm;
    gs_agent_t *(*create)(void);
    void (*destroy)(gs_agent_t *a);
    void (*before_end)(gs_agent_t *a);
    void (*state)(const gs_agent_t *a, gs_state_t *st);
    void (*status)(const gs_agent_t *a, gs_status_t *s);
    void (*fault)(gs_agent_t *a, int g, const char *label, const char *uuid, const char *at,
                  const pid_t *hit, int nhit, const char *who);
    void (*renewed)(gs_agent_t *a, int g);
    gs_ranks_t *(*ranks)(const gs_agent_t *a);
};

/* agent_run.c: what both programs share to run. */
const char *gs_agent_state_name(gs_agent_state_t s);
/* 1 if table has state from and allows from -> to. */
int gs_agent_transition_ok(const gs_agent_step_t *table, gs_agent_state_t from,
                           gs_agent_state_t to);
/* Sets the agent up from o as program prog, runs its table from
 * DISCOVERING to DONE, and ends (the node dir removed, the report
 * delivered); the exit status. */
int gs_agent_run(const gs_agent_opts_t *o, const gs_agent_program_t *prog);
/* A node-wide error: published for the ranks (publish: they exit with
 * code), the agent's status code; FAILED. */
gs_agent_state_t gs_agent_fail(gs_agent_t *a, int code, const char *msg, int publish);
/* The MPS control program found (or why not: control_error), and the
 * daemons' table set up for it. */
void gs_agent_find_control(gs_agent_t *a);

/* agent_loop.c: the one event loop over the socket, the signals, the ranks'
 * exits and the launcher, for every state that waits. */
/* A connection whose line is whole (the loop reads it without blocking). */
typedef struct {
    int fd;
    pid_t pid; /* the peer (SO_PEERCRED): a process of the job's user or root */
    uid_t uid;
    long long deadline;
    size_t len;
    char line[GS_LINE_MAX];
} gs_agent_conn_t;
/* One message the socket takes: its verb (the line's first word), the
 * states that take it (1u << state each; other states answer an error),
 * and its handler, which keeps the connection or closes it. */
typedef struct {
    const char *verb;
    unsigned states;
    void (*handle)(gs_agent_t *a, gs_agent_conn_t *c);
} gs_agent_msg_t;
/* What a waiting state watches besides its messages and signals. */
typedef struct {
    int launcher;                          /* the launcher's end ends the wait */
    int (*listening)(const gs_agent_t *a); /* NULL: whenever a message is taken */
    int (*timeout)(gs_agent_t *a);         /* ms to the state's next timed check, -1 */
    void (*check)(gs_agent_t *a);          /* after each wake-up */
    void (*ranks_dropped)(gs_agent_t *a);  /* ranks exited */
    /* Descriptors of the state's own to watch (up to max; returns how
     * many), and what came on them. */
    int (*extra)(gs_agent_t *a, struct pollfd *p, int max);
    void (*extra_ready)(gs_agent_t *a, const struct pollfd *p, int n);
    /* The daemons' logs grew (or a fault's list is due): NULL, not followed. */
    void (*faults)(gs_agent_t *a);
} gs_agent_wait_t;
/* Runs until a handler, a check, a signal or the launcher ends the wait
 * (gs_agent_loop_end); returns why. */
const char *gs_agent_loop(gs_agent_t *a, const gs_agent_msg_t *msgs, const gs_agent_wait_t *w);
/* Ends the current wait with why (the first reason stays). */
void gs_agent_loop_end(gs_agent_t *a, const char *why);
/* Reads the signalfd: SIGCHLD is a child of ours (a daemon, the guard) and
 * is noted; anything else tells the agent to stop (returns why). */
const char *gs_agent_read_signals(gs_agent_t *a);
int gs_agent_listen(gs_agent_t *a, gs_error_t *err);

/* agent_fault.c: a GPU fault on a server this agent runs (the node
 * service's, a job's own, a batch job's): read from the daemons' logs (the
 * loop's `faults`); the fault told once by the program's fault hook (a
 * job's report; the service's leases: "fault S <time> <PIDs>"), the server
 * retired and a fresh one in its place before any job or rank is given it;
 * the status's notes. */
void gs_agent_faults(gs_agent_t *a);
/* The PIDs MPS listed, as the user knows them: "this job's ranks 0-1, job
 * gsrun.X's rank 0 (prog, pid P), a process of the user's (prog, pid Q)";
 * named: this job's ranks too each with its program and PID. */
void gs_agent_fault_who(const gs_agent_t *a, const pid_t *pids, int n, int named, char *buf,
                        size_t len);
/* agent_fault_word.c: whether a fault entry g's log tells of is one. Asks
 * g's control daemon now (its FAULT kept for the fault's whole list). */
void gs_agent_fault_ask(gs_agent_t *a, int g);
/* Once the fault's list is whole: the clients it ended that the daemon
 * bears out into hit (GS_MPS_HEALTH_PIDS), how many; or -1 when it is no
 * fault (told with -v as "not taken", the log's fault forgotten). */
int gs_agent_fault_confirm(gs_agent_t *a, int g, const char *label, pid_t *hit);

/* agent_publish.c: the entry whose server process pid is (one its daemon
 * named, or the daemon's child: a server the user's node service started
 * for a lease after the job read its PIDs; MPS's control daemon starts
 * it), or -1; and each entry's servers' own GPU memory from listing l into
 * server_mib (l NULL: not known): 1 when a figure changed. */
int gs_agent_server_entry(const gs_agent_t *a, int pid);
int gs_agent_servers_memory(gs_agent_t *a, const gs_gpu_list_t *l);

/* agent_publish.c: the node state (for the ranks) and status (gsrun status). */
/* A plan without GPUs where the node has more than gsrun takes: the limit
 * named in err (the plan failed) or in the plan's reason (MPS off). */
void gs_agent_explain_no_gpu(gs_agent_t *a, gs_error_t *err);
void gs_agent_publish_on(gs_agent_t *a);
void gs_agent_publish_without_mps(gs_agent_t *a, gs_state_kind_t kind, int notice, int code,
                                  const char *msg, int with_socket);
/* "ok"/"error" on the ready pipe, once. */
void gs_agent_signal_ready(gs_agent_t *a, const char *word);
void gs_agent_write_status(const gs_agent_t *a);
/* Each of the first n servers told how many of them share its GPU (its
 * daemon's entry and the plan's): after one was added, or failed to be. */
void gs_agent_count_servers(gs_agent_t *a, int n);
/* Job-long: those of daemons first.. (added for a step when first > 0). */
void gs_agent_confirm_servers_from(gs_agent_t *a, int first);
/* Daemon g's alone, its line saying whom it serves ("the job's tasks",
 * "the user's jobs on this node"). */
void gs_agent_confirm_server(gs_agent_t *a, int g, const char *whose);
#endif
