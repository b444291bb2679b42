/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun-agent's state, seen only by its parts. gsrun-agent runs one of two
 * programs over what both use (runtime/agent/: the loop, set-up and end,
 * the run of a program's table, the node state and status, GPU faults): a
 * job's agent (runtime/job/: agent.c's table of states, agent_serve.c's
 * messages) or the user's node service (runtime/service/: agent_service.c,
 * agent_share.c). Each hands the shared code its behaviour as data (a
 * gs_agent_program_t, a table of messages, each wait's watches), never as
 * a mode to test. The parts below them each own their state and know
 * nothing of this struct:
 *
 *   report.c   what happened, delivered once         (uses nothing)
 *   ranks.c    the rank table                        (uses nothing)
 *   placer.c   which GPU each rank gets (pure)       (uses nothing)
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
#include "runtime/job/attach.h"
#include "runtime/agent/daemons.h"
#include "runtime/agent/guard.h"
#include "runtime/job/placer.h"
#include "runtime/agent/ranks.h"
#include "runtime/agent/report.h"
#include "runtime/core/limits.h"
#include "runtime/files/ledger.h"
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

/* --mps-share=node: a job agent's lease on the user's shared agent, as the
 * shared agent keeps it (agent_share.c). */
#define GS_AGENT_LEASES_MAX 64
typedef struct {
    int fd; /* the job agent's connection: the lease ends with it */
    pid_t pid;
    char job[96];
    int linger_s;
    int n;                   /* entries placed (all of them once answered) */
    int server[GS_MAX_GPUS]; /* each entry's server (an index into the daemons) */
    int clients[GS_MAX_GPUS];
    int want_n; /* the entries asked for: each one's GPU and clients */
    int want_gpu[GS_MAX_GPUS];
    int want_clients[GS_MAX_GPUS];
    int starting; /* the server begun for entry n (agent_share_place.c), -1 none */
    int waiting;  /* not answered yet: no line but the answer goes to fd */
    char wedged[400]; /* a wedged server replaced for it: told after the answer */
} gs_agent_lease_t;

/* Jobs whose "gpus" wait for a fresh listing (more are refused: they list
 * the GPUs themselves). */
#define GS_AGENT_GPUS_WAITING 64

typedef struct gs_agent_program gs_agent_program_t;

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
    int early_rc;               /* early: MPS failed before the size came, with early_err */
    gs_error_t early_err;
    long long early_ready_ms, size_ms;
    int stop_from; /* early: daemons from this GPU on stop once the ranks came */
    /* The servers are listed (and reported) once the ranks have their
     * answers: the control daemon answers nothing while a server it started
     * sets up its GPU context (get_server_list took 257 ms then on an H100,
     * 2 ms after), and the ranks must not wait for that. */
    int confirm_pending;
    int nstates;           /* node states published: the last one's generation is nstates - 1 */
    int answered;          /* ranks told their GPU (each answer holds for the state then) */
    const char *loop_end;  /* why the current wait ends (agent_loop.c), NULL: it goes on */
    long long last_change; /* serving: when a rank last came or went */
    int ended_whole;       /* serving: every rank came and went (nothing to end) */

    /* --mps-share=node. The shared agent: its leases, the clients leased on
     * each server, since when no job holds one and for how long it stays. */
    gs_agent_lease_t *leases;
    int nleases, ever_leased, linger_ms;
    int retiring; /* `gsrun stop`: no new lease; it ends with the last job's lease */
    int base_told; /* gs_agent_tell_base said it */
    int gpus_ask_told; /* why the shared agent told no GPUs was said */
    int leased[GS_MAX_GPUS];
    unsigned char lost_told[GS_MAX_GPUS];    /* a dead server's jobs were told */
    long long share_confirm_ms[GS_MAX_GPUS]; /* when a new server's PIDs are listed, 0 done */
    int share_starting;                      /* the server whose start is under way, -1 none */
    long long share_start_deadline;          /* its start's bound (--mps-timeout) */
    long long idle_since;
    struct gs_lister *lister; /* the GPUs listed in a thread of their own ("gpus": lister.h) */
    int lister_stuck;       /* its NVML call outlived the agent's end: _exit */
    gs_gpu_list_t *listing; /* the listing last told to a job */
    int gpus_waiting[GS_AGENT_GPUS_WAITING]; /* "gpus" asked while no listing was fresh */
    int ngpus_waiting;
    /* A job's agent: its lease (the connection, -1: none), the shared
     * agent's node dir and each plan server's index there. */
    int share_fd;
    int share_refused_own; /* its lease refused by the shared agent it started */
    int share_linger_s;    /* the linger its lease asked for (gs_policy_linger) */
    char share_dir[256];
    int share_server[GS_MAX_GPUS];

    /* GPU faults on the servers (agent_fault.c): when the daemons' logs are
     * read again (a fault's client list not yet whole), and each entry's
     * fault as `gsrun status` shows it. */
    long long fault_due_ms;
    char fault_note[GS_MAX_GPUS][512];
    int fault_held[GS_MAX_GPUS]; /* the retired server's clients when the note was made */
    int fault_told[GS_MAX_GPUS]; /* a job on shared servers: faults told of, each entry */
    /* Each entry's control daemon's word on the fault its log began to
     * tell: asked at the fault's first line, while its clients live (MPS
     * says ACTIVE again once they have gone), and kept for its list. */
    struct {
        int asked; /* 1: asked since the fault's first line */
        int fault; /* as gs_mps_word_t; -2: no answer */
        int n;
        pid_t clients[GS_MPS_HEALTH_PIDS]; /* the faulted server's clients */
    } fault_word[GS_MAX_GPUS];

    /* Each rank's MPS state as the driver shows it (agent_watch.c). */
    gs_attach_t attach;
    int watching;          /* serving with MPS: the ranks are watched */
    int watch_changed;     /* a state changed since the status was written */
    int watch_own_nvml;    /* the node service did not list the GPUs: this agent's NVML */
    long long watch_due_ms, nvml_due_ms; /* the next look, the next NVML listing */
    long long recheck_ms;  /* the next NVML look at the clients' trees (a worker without MPS) */
    /* Each entry's control daemon asked for its clients (a log line said a
     * rank's state): pending, and when it was asked last. */
    unsigned char watch_ask[GS_MAX_GPUS];
    int watch_final; /* the job's end: nothing is asked again later */
    long long watch_asked_ms[GS_MAX_GPUS];
    /* The ranks' GPU memory (agent_memory.c): the next look, and each
     * entry's server process's own memory at the last (-1 unknown). */
    long long memory_due_ms;
    long long server_mib[GS_MAX_GPUS];
    long long fault_at_ms; /* a GPU fault ended a rank's context (the grace runs) */
    char fault_end_why[400];
    /* MPS that does not answer (agent_stuck.c, agent_share_wedge.c): when
     * each entry's daemon is probed next while ranks wait on it, how many
     * wedged daemons it has had ended, and (the shared agent) when it last
     * answered. */
    long long stuck_next_ms[GS_MAX_GPUS];
    int stuck_ended[GS_MAX_GPUS];
    unsigned char stuck_told[GS_MAX_GPUS]; /* this wedge was told (once until it answers) */
    unsigned char share_shun[GS_MAX_GPUS]; /* given to no new job: 1 wedged and left running
                                            * (held by jobs, or replaced twice), 2 ended by
                                            * gsrun with none in its place */
    char stuck_note[GS_MAX_GPUS][320]; /* the last wedge, for `gsrun status` */
    long long share_answered_ms[GS_MAX_GPUS];

    gs_ledger_t ledger; /* the user's placement record of the node: this job's entry */
    int pack_moved;     /* early: the packing moved the early daemons' GPUs */
    int gpu_pos[GS_MAX_GPUS]; /* gpus.gpu[k]'s place among the visible GPUs (packing
                               * reorders them): its number in messages and status */

    gs_report_t report;
    gs_ranks_t ranks;
    gs_placer_t placer;
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
extern const gs_agent_step_t gs_agent_job_states[GS_AGENT_NSTATES];
extern const gs_agent_step_t gs_agent_service_states[GS_AGENT_NSTATES];

/* A program of gsrun-agent: its table of states, its process name (NULL:
 * the program's), what it does before the shared end (NULL: nothing), its
 * own part of the status file (the rows' count, who holds them), how it
 * tells a GPU fault its control daemon confirmed on server g (who: the
 * clients MPS ended, as the user knows them), and what follows a fresh
 * server in g's place (NULL: nothing). */
struct gs_agent_program {
    const gs_agent_step_t *states;
    const char *comm;
    void (*before_end)(gs_agent_t *a);
    void (*status)(const gs_agent_t *a, gs_status_t *s);
    void (*fault)(gs_agent_t *a, int g, const char *label, const char *uuid, const char *at,
                  const pid_t *hit, int nhit, const char *who);
    void (*renewed)(gs_agent_t *a, int g);
};
/* agent_status.c: the job's agent's status hook (its ranks and their rows). */
void gs_agent_job_status(const gs_agent_t *a, gs_status_t *s);
/* agent_fault_job.c: the job's agent's fault hook: the ranks MPS ended
 * marked faulted (the grace), told at once with what the grace will do. */
void gs_agent_job_fault(gs_agent_t *a, int g, const char *label, const char *uuid,
                        const char *at, const pid_t *hit, int nhit, const char *who);

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
/* local rank of pid (for MPS's log lines), a gs_rank_of_pid_fn. */
int gs_agent_rank_of_pid(const void *agent, pid_t pid);
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
/* agent_fault_job.c. The ranks whose context a fault ended that still run
 * ("0-1,4" into buf): how many. What the fault grace looks at
 * (agent_watch.c). */
int gs_agent_fault_running(const gs_agent_t *a, char *buf, size_t len);
/* A job's agent on the user's shared servers: whether their logs show a
 * fault the shared agent has not told yet (the
 * job's end waits a moment for its word: ranks the fault ended may end
 * the job before the line is read). */
int gs_agent_fault_untold(gs_agent_t *a);
/* "fault S <time> <PIDs>" from the shared agent on the lease: its server S
 * hit a fault its control daemon confirmed, which ended the clients named
 * (it names only those its daemon listed); this job's ranks among them
 * are told once in its report. */
void gs_agent_fault_told(gs_agent_t *a, const char *line);

/* agent_serve.c: the job agent's messages and its waiting states. */
extern const gs_agent_msg_t gs_agent_job_messages[];
/* SIZING: the node's size from its first rank; 0 if the launcher ended
 * first or the agent was told to stop. */
int gs_agent_wait_size(gs_agent_t *a);
/* SERVING: registrations and exits until every rank has exited, the
 * launcher is gone, or the agent is told to stop (the ranks still alive
 * are then ended). */
void gs_agent_serve(gs_agent_t *a);
/* HOLDING: until "stop" on the socket (its connection becomes the report's
 * way out) or a signal; a task prolog's request for servers is served
 * meanwhile. */
void gs_agent_hold(gs_agent_t *a);
/* FAILED: until the launcher is gone. */
void gs_agent_wait_launcher(gs_agent_t *a);
/* The ranks registered: answers held by placement, daemons the plan does
 * not use stopped, daemons moved off the ranks' cores, status. */
void gs_agent_ranks_came(gs_agent_t *a);

/* runtime/service/agent_share.c: the node service (--mps-share=node). */
/* The shared agent (GS_MODE_SHARED): no server until a job leases one. */
void gs_agent_share_open(gs_agent_t *a);
/* HOLDING: leases come and go (its own messages: lease, gpus, retire,
 * stop --now) until the last has gone and its linger is over, or a
 * signal. */
void gs_agent_share_hold(gs_agent_t *a);
extern const gs_agent_msg_t gs_agent_service_messages[];
/* Stops taking leases (its socket goes) before the servers stop. */
void gs_agent_share_close(gs_agent_t *a);
/* The lines on a lease (lost, fault, renew, wedged) are written and read
 * by runtime/wire/lease.h only. */
/* agent_share_wedge.c: whether shared server s may be handed out: 1 when
 * it answered (asked at most every second), or was wedged and a fresh one
 * took its place in its dirs (told then says so, for the job); 0 when it
 * has died, or is wedged and stays (other jobs' ranks hold it, or it was
 * replaced twice already: given to no new job), or no fresh one could
 * start (its jobs are told it is lost). mine: clients of s that the
 * asking job holds (they do not keep it from being replaced). */
int gs_agent_share_sound(gs_agent_t *a, int s, int force, int mine, char *told, size_t len);
/* A job said its ranks wait on shared server s: probed at once. */
void gs_agent_share_on_wedged(gs_agent_t *a, int lease, const char *line);
/* agent_stuck.c, a job's agent: ranks whose CUDA started a while ago and
 * that are no client yet: their daemon probed (bounded), and when it is
 * wedged the ranks are told, and it is replaced (the job's own) or its
 * shared agent asked to (a lease). The ms to its next look, -1 none. */
void gs_agent_stuck_check(gs_agent_t *a);
int gs_agent_stuck_timeout(const gs_agent_t *a);
/* agent_share_place.c: the GPU of a UUID among the agent's, or -1; the
 * waiting leases placed (each answered once its servers serve, or
 * refused); the start under way looked at (then the leases placed); how
 * soon to look again (ms, -1: no start under way). */
int gs_agent_share_gpu_by_uuid(const gs_agent_t *a, const char *uuid);
void gs_agent_share_place(gs_agent_t *a);
void gs_agent_share_starting(gs_agent_t *a);
int gs_agent_share_start_ms(const gs_agent_t *a);
/* Lease i ended: its clients given back, its connection closed, the last
 * lease moved into slot i; the last one gone, the service lingers
 * linger_ms from now. */
void gs_agent_share_end(gs_agent_t *a, int i, int linger_ms);
/* Lease i refused with why: its job told, the lease ended (serving no one,
 * the agent goes now). */
void gs_agent_share_refuse(gs_agent_t *a, int i, const char *why);

/* agent_lease.c, a job's agent. Leases the plan's servers on the user's
 * shared agent of this node (starting it when none runs) and takes them as
 * its daemons (borrowed). 0, or -errno with err. */
int gs_agent_share_join(gs_agent_t *a, gs_error_t *err);
/* A job agent's GPUs into a->gpus: where it will lease from the user's
 * node service, it takes them from the service when one runs (no NVML
 * loaded here), else lists them itself; then applies CUDA_VISIBLE_DEVICES.
 * (The service lists every GPU itself: agent_service.c.) 0, or -errno
 * with err. */
int gs_agent_share_list_gpus(gs_agent_t *a, gs_error_t *err);
/* Gives its lease back. */
void gs_agent_share_leave(gs_agent_t *a);
/* The lease to watch while the job runs, and what it hears there (a
 * server's death, the shared agent's end). */
int gs_agent_lease_fds(gs_agent_t *a, struct pollfd *p, int max);
void gs_agent_lease_ready(gs_agent_t *a, const struct pollfd *p, int n);
/* The same, looked at now without waiting (before a rank is answered). */
void gs_agent_lease_poll(gs_agent_t *a);
/* The shared agent's state and status, as a job takes its servers from
 * them (no status: no PIDs): 0, or a negative errno with err; the caller
 * frees both, also on error. */
int gs_agent_lease_read_service(const gs_agent_t *a, gs_state_t **st, gs_status_t **ss,
                                gs_error_t *err);
/* Entry e as the shared agent's server s (s < st->nservers): its GPU and
 * dirs from the state, its PIDs and core from the status (0: not listed). */
void gs_agent_lease_take(gs_agent_t *a, int e, int s, const gs_state_t *st,
                         const gs_status_t *ss);

/* agent_watch.c: whether each rank really is an MPS client (attach.h),
 * told at once when not; a GPU fault's grace. */
int gs_agent_watch_start(gs_agent_t *a);
void gs_agent_watch_registered(gs_agent_t *a, int rank, pid_t pid);
/* After each wake-up of the serving wait; the ms to its next look, -1. */
void gs_agent_watch_check(gs_agent_t *a);
int gs_agent_watch_timeout(const gs_agent_t *a);
/* Ranks left the table (exited): from now on nobody's (their PIDs may be
 * reused), and no fault of theirs holds the grace. */
void gs_agent_watch_dropped(gs_agent_t *a);
/* The last look at the job's end: the logs' last lines, each line that
 * waits for its daemon's word settled (a rank gone stands by its line). */
void gs_agent_watch_final(gs_agent_t *a);
/* "served 3 of 4 ranks as MPS clients; 1 ran on the GPU without MPS (rank
 * 2)", or that no rank used the GPU (-v: what was wrong was told while the
 * job ran). */
void gs_agent_watch_summary(const gs_agent_t *a, char *buf, size_t len);
/* agent_publish.c: the entry whose server process pid is (one its daemon
 * named, or the daemon's child: a server the user's node service started
 * for a lease after the job read its PIDs; MPS's control daemon starts
 * it), or -1; and each entry's servers' own GPU memory from listing l into
 * server_mib (l NULL: not known): 1 when a figure changed. */
int gs_agent_server_entry(const gs_agent_t *a, int pid);
int gs_agent_servers_memory(gs_agent_t *a, const gs_gpu_list_t *l);
/* agent_memory.c: each rank's GPU memory from NVML's listing (only read:
 * no state is taken from it), looked at this often while a rank has
 * started CUDA, and summed up at the job's end. */
#define GS_AGENT_MEMORY_EVERY_MS 1000
/* The node's GPUs and their processes now: the node service's listing where
 * the job leases its servers, else this agent's own NVML (kept started). */
int gs_agent_memory_listing(gs_agent_t *a, gs_gpu_list_t *l);
/* The ranks' and the servers' memory from listing l. */
void gs_agent_memory_take(gs_agent_t *a, const gs_gpu_list_t *l);
/* A look when one is due; the ms to the next one (-1 none). */
void gs_agent_memory_look(gs_agent_t *a, long long now);
int gs_agent_memory_timeout(const gs_agent_t *a, long long now);
/* Each GPU's ranks' peak memory, a line each into the report: with -v, and
 * always where the largest came within 10 % of --mps-memory-limit. */
void gs_agent_memory_summary(gs_agent_t *a);
/* agent_lease_gpus.c: the node's GPUs as the user's node service (the
 * shared agent) lists them now, with their processes; 0, or -errno. */
int gs_agent_share_listing(gs_agent_t *a, gs_gpu_list_t *l);
/* The shared agent's dirs and socket (runtime/files/share_dir.h), its node
 * dir into a->share_dir (make: the user's base made when missing, and where
 * other users took its name, said once). 0, or -errno with err. */
int gs_agent_share_socket(gs_agent_t *a, char *dir, size_t dlen, char *sock, size_t slen,
                          int make, gs_error_t *err);
/* agent_pack.c: says once (-v) why the user's base is not
 * <TMPDIR>/gsrun-<uid> (taken: "" says nothing), and what is used. */
void gs_agent_tell_base(gs_agent_t *a, const char *taken, const char *used);

/* agent_pack.c: the job's place among the user's jobs on the node. Locks
 * the node's placement record, counts each GPU's load and puts a->gpus in
 * the packing's order (emptiest first); *packed 1 with each GPU's ranks in
 * counts when other jobs or processes load a GPU (0: plan as alone). The
 * record stays locked until gs_agent_pack_record writes the job's entry
 * from the plan. 0 always: a job that cannot see the others plans by the
 * GPUs' other processes (NVML) alone, and says why. */
int gs_agent_pack(gs_agent_t *a, int *counts, int *packed);
void gs_agent_pack_record(gs_agent_t *a);
/* Ends the decision (the record's lock), then stops the early daemons the
 * packing moved off their GPUs (started again where the job goes). */
void gs_agent_pack_unlock(gs_agent_t *a);
/* The job ended: its entry goes. */
void gs_agent_pack_release(gs_agent_t *a);

/* agent_publish.c: the node state (for the ranks) and status (gsrun status). */
/* A plan without GPUs where the node has more than gsrun takes: the limit
 * named in err (the plan failed) or in the plan's reason (MPS off). */
void gs_agent_explain_no_gpu(gs_agent_t *a, gs_error_t *err);
void gs_agent_publish_on(gs_agent_t *a);
void gs_agent_publish_without_mps(gs_agent_t *a, gs_state_kind_t kind, int notice, int code,
                                  const char *msg, int with_socket);
/* "ok"/"error" on the ready pipe, once. */
void gs_agent_signal_ready(gs_agent_t *a, const char *word);
/* The node service: one line (wire/lease.h's, n bytes; nothing when n <= 0,
 * it did not fit) to every answered lease on server s, once each. */
void gs_agent_tell_leases(gs_agent_t *a, int s, const char *line, int n);
void gs_agent_write_status(const gs_agent_t *a);
/* Each daemon's servers recorded and reported as ready. */
void gs_agent_confirm_servers(gs_agent_t *a, int job_long);
/* Each of the first n servers told how many of them share its GPU (its
 * daemon's entry and the plan's): after one was added, or failed to be. */
void gs_agent_count_servers(gs_agent_t *a, int n);
/* Job-long: those of daemons first.. (added for a step when first > 0). */
void gs_agent_confirm_servers_from(gs_agent_t *a, int first);
/* Daemon g's alone, its line saying whom it serves ("the job's tasks",
 * "the user's jobs on this node"). */
void gs_agent_confirm_server(gs_agent_t *a, int g, const char *whose);
/* The same, where it waits for the ranks (confirm_pending), once. */
void gs_agent_confirm_pending(gs_agent_t *a);
#endif
