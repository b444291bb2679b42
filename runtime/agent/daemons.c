/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/agent/daemons.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/gpu/affinity.h"

void gs_daemons_init(gs_daemons_t *ds, const char *node_dir, const char *control, int prestart,
                     int timeout_s, gs_report_t *report, gs_guard_t *guard)
{
    memset(ds, 0, sizeof(*ds));
    snprintf(ds->node_dir, sizeof(ds->node_dir), "%s", node_dir);
    snprintf(ds->control, sizeof(ds->control), "%s", control);
    ds->prestart = prestart;
    ds->timeout_s = timeout_s;
    ds->report = report;
    ds->guard = guard;
    ds->log_fd = -1;
    for (int g = 0; g < GS_MAX_GPUS; g++) {
        gs_daemons_set_server(ds, g, g, 0, 1);
    }
}

void gs_daemons_set_server(gs_daemons_t *ds, int g, int gpu, int server, int nservers)
{
    if (g >= 0 && g < GS_MAX_GPUS) {
        ds->gpu_of[g] = gpu;
        ds->server_of[g] = server;
        ds->servers_on[g] = nservers;
    }
}

void gs_daemons_unborrow(gs_daemons_t *ds)
{
    if (!ds->borrowed) {
        return;
    }
    for (int e = 0; e < ds->n && e < GS_MAX_GPUS; e++) {
        memset(&ds->daemon[e], 0, sizeof(ds->daemon[e]));
        gs_mps_health_init(&ds->health[e]);
        ds->pinned[e][0] = '\0';
    }
    ds->n = 0;
    ds->borrowed = 0;
}

void gs_daemons_label(const gs_daemons_t *ds, int g, char *buf, size_t len)
{
    if (ds->servers_on[g] > 1) {
        snprintf(buf, len, "GPU %d server %d", ds->gpu_of[g], ds->server_of[g]);
    } else {
        snprintf(buf, len, "GPU %d", ds->gpu_of[g]);
    }
}

/* What MPS itself logged as errors, for the user to see, each with the
 * local rank of the process it names. In the foreground the daemon prints
 * its and its server's log lines to control.out; the log files are read
 * only where that is empty. */
static void report_log_errors(gs_daemons_t *ds, int g, gs_rank_of_pid_fn rank_of_pid,
                              const void *ctx)
{
    static const char *const out_only[] = {GS_MPS_CONTROL_OUT, NULL};
    static const char *const files[] = {"server.log", "control.log", NULL};
    const gs_mps_daemon_t *d = &ds->daemon[g];
    char probe[GS_PATH_MAX];
    struct stat sb;

    gs_mps_out_path(d, probe, sizeof(probe));
    const char *const *logs = stat(probe, &sb) == 0 && sb.st_size > 0 ? out_only : files;
    for (const char *const *f = logs; *f != NULL; f++) {
        char lines[8][256];
        int n = gs_mps_scan_log(d->log_dir, *f, lines, 8);
        for (int i = 0; i < n; i++) {
            const char *p = strstr(lines[i], "PID: ");
            int r = p != NULL && rank_of_pid != NULL ? rank_of_pid(ctx, (pid_t)atoi(p + 5)) : -1;
            char who[48];
            gs_daemons_label(ds, g, who, sizeof(who));
            if (r >= 0) {
                gs_report_add(ds->report, 1, "%s: local rank %d: %s: %s", who, r, *f, lines[i]);
            } else {
                gs_report_add(ds->report, 1, "%s: %s: %s", who, *f, lines[i]);
            }
        }
    }
}

void gs_daemons_stop_from(gs_daemons_t *ds, int first, gs_rank_of_pid_fn rank_of_pid,
                          const void *ctx)
{
    long long t0 = gs_proc_now_ms();
    if (ds->borrowed) {
        ds->n = first < ds->n ? first : ds->n; /* the shared agent's to stop, not ours */
        return;
    }
    for (int g = first; g < ds->n; g++) {
        gs_mps_daemon_t *d = &ds->daemon[g];
        gs_error_t ignored;
        if (!ds->prestart && d->daemon_pid > 0) {
            /* Servers the clients started: known only now, for the escalation. */
            gs_mps_record_servers(d, ds->control, 1000, &ignored);
        }
        gs_mps_quit_begin(d, ds->control, GS_DAEMON_QUIT_TIMEOUT_MS);
    }
    for (int g = first; g < ds->n; g++) {
        gs_mps_daemon_t *d = &ds->daemon[g];
        char note[512];
        int was_running = d->daemon_pid > 0;
        char who[48];
        gs_daemons_label(ds, g, who, sizeof(who));
        int esc = gs_mps_stop(d, ds->control, GS_DAEMON_QUIT_TIMEOUT_MS, note, sizeof(note));
        if (esc) {
            gs_report_add(ds->report, 1, "%s (%s): %s", who, d->uuid, note);
        } else if (was_running) {
            gs_report_add(ds->report, 0, "%s: MPS shut down in %lld ms", who,
                          gs_proc_now_ms() - t0);
        }
        report_log_errors(ds, g, rank_of_pid, ctx);
        gs_rundir_remove(d->pipe_dir);
        gs_rundir_remove(d->log_dir);
    }
    if (first == 0) {
        /* The retired: quit long since sent; bounded like the rest. */
        for (int i = 0; i < ds->nretired; i++) {
            gs_mps_daemon_t *d = &ds->retired[i];
            char note[512], who[48];
            gs_daemons_label(ds, ds->retired_of[i], who, sizeof(who));
            if (gs_mps_stop(d, ds->control, GS_DAEMON_QUIT_TIMEOUT_MS, note, sizeof(note))) {
                gs_report_add(ds->report, 1, "%s (%s): the faulted MPS server: %s", who, d->uuid,
                              note);
            }
            gs_rundir_remove(d->pipe_dir);
            gs_rundir_remove(d->log_dir);
        }
        ds->nretired = 0;
        if (ds->log_fd >= 0) {
            close(ds->log_fd);
            ds->log_fd = -1;
        }
    }
    if (first < ds->n) {
        ds->n = first;
    }
}

/* Follows entry g's control.out from its start (gs_mps_spawn made it
 * empty): its server's lines say when it faults. Without inotify its
 * faults go unseen, and nothing else changes. */
static void watch_log(gs_daemons_t *ds, int g)
{
    char path[GS_PATH_MAX];
    gs_mps_health_init(&ds->health[g]);
    ds->listing_ms[g] = 0;
    if (ds->log_fd < 0) {
        ds->log_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    }
    gs_mps_out_path(&ds->daemon[g], path, sizeof(path));
    if (ds->log_fd >= 0) {
        inotify_add_watch(ds->log_fd, path, IN_MODIFY);
    }
}

/* Prepares GPU g's directories and spawns its daemon, pinned near the GPU. */
static int spawn_one(gs_daemons_t *ds, const gs_gpu_t *gpu, int g, gs_error_t *err)
{
    gs_mps_daemon_t *d = &ds->daemon[g];
    cpu_set_t cpus;
    int rc;

    memset(d, 0, sizeof(*d));
    d->gpu = g;
    snprintf(d->uuid, sizeof(d->uuid), "%s", gpu->uuid);
    /* An entry's later daemons (after a GPU fault) get dirs of their own:
     * the retired one may still hold its clients in g<N>. */
    char name[sizeof(ds->node_dir) + 32];
    if (ds->gen[g] == 0) {
        snprintf(name, sizeof(name), "%s/g%d", ds->node_dir, g);
    } else {
        snprintf(name, sizeof(name), "%s/g%d.%d", ds->node_dir, g, ds->gen[g]);
    }
    if ((size_t)snprintf(d->pipe_dir, sizeof(d->pipe_dir), "%s", name) >=
            sizeof(d->pipe_dir) ||
        !gs_rundir_socket_fits(d->pipe_dir)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "MPS socket directory '%s' is too long for a unix socket (108 "
                            "bytes); set TMPDIR to a shorter directory",
                            d->pipe_dir);
    }
    snprintf(d->log_dir, sizeof(d->log_dir), "%s.log", name);
    /* Made new: a dead daemon's socket left there (its agent and guard
     * killed together) would pass for the new one's readiness. */
    gs_rundir_remove(d->pipe_dir);
    if ((rc = gs_rundir_ensure(d->pipe_dir, err)) != 0 ||
        (rc = gs_rundir_ensure(d->log_dir, err)) != 0) {
        return rc;
    }
    cpu_set_t taken; /* one core per daemon while cores allow */
    CPU_ZERO(&taken);
    for (int o = 0; o < g; o++) {
        CPU_OR(&taken, &taken, &ds->cpus[o]);
    }
    int pin = gs_affinity_pick_core(gpu->have_cpumask ? gpu->cpumask : NULL, GS_GPU_CPUMASK_WORDS,
                                    &taken, &cpus, ds->pinned[g], sizeof(ds->pinned[g]));
    ds->cpus[g] = cpus;
    ds->n = g + 1 > ds->n ? g + 1 : ds->n;
    rc = gs_mps_spawn(d, ds->control, pin == 0 || pin == -ENOENT ? &cpus : NULL, err);
    if (rc == 0 && ds->guard != NULL) {
        gs_guard_tell(ds->guard, "mps", d->daemon_pid);
    }
    if (rc == 0) {
        watch_log(ds, g);
    }
    return rc;
}

static void name_gpu(const gs_daemons_t *ds, gs_error_t *err, int g, const char *uuid)
{
    char why[GS_ERROR_LEN], who[48];
    gs_daemons_label(ds, g, who, sizeof(who));
    snprintf(why, sizeof(why), "%s (%s): %s", who, uuid, err->text);
    snprintf(err->text, sizeof(err->text), "%s", why);
}

/* Daemon g, its socket there: its server started (prestart; the daemon
 * answers at once), else ready for its first client. err names the GPU. */
static int serve_one(gs_daemons_t *ds, int g, long long deadline, gs_error_t *err)
{
    gs_mps_daemon_t *d = &ds->daemon[g];
    int rc = 0;
    if (ds->prestart) {
        /* Bounded by the start's own deadline (--mps-timeout): a GPU's
         * first set-up, without persistence mode, may take seconds. */
        rc = gs_mps_start_server(d, ds->control, getuid(), deadline, err);
    } else {
        d->ready_ms = gs_proc_now_ms(); /* the first client starts the server */
    }
    if (rc != 0) {
        name_gpu(ds, err, g, d->uuid);
    }
    return rc;
}

/* Daemons ds->n .. count-1, started and waited for; not stopped on error. */
static int start_from(gs_daemons_t *ds, const gs_gpu_list_t *gpus, int count, gs_error_t *err)
{
    long long deadline = gs_proc_now_ms() + (long long)ds->timeout_s * 1000;
    int rc = 0, first = ds->n;

    for (int g = first; rc == 0 && g < count && g < GS_MAX_GPUS; g++) {
        rc = spawn_one(ds, &gpus->gpu[g], g, err);
    }
    /* All daemons start in parallel; now wait for each to serve. */
    for (int g = first; rc == 0 && g < ds->n; g++) {
        rc = gs_mps_wait_socket(&ds->daemon[g], deadline, err);
        if (rc != 0) {
            name_gpu(ds, err, g, ds->daemon[g].uuid);
        }
        rc = rc == 0 ? serve_one(ds, g, deadline, err) : rc;
    }
    return rc;
}

int gs_daemons_start(gs_daemons_t *ds, const gs_gpu_list_t *gpus, int count, gs_error_t *err)
{
    int rc = start_from(ds, gpus, count, err);
    if (rc != 0) {
        gs_daemons_stop_from(ds, 0, NULL, NULL);
    }
    return rc;
}

int gs_daemons_add(gs_daemons_t *ds, const gs_gpu_list_t *gpus, int count, gs_error_t *err)
{
    int first = ds->n;
    int rc = start_from(ds, gpus, count, err);
    if (rc != 0) {
        gs_daemons_stop_from(ds, first, NULL, NULL);
    }
    return rc;
}

int gs_daemons_begin(gs_daemons_t *ds, const gs_gpu_list_t *gpus, gs_error_t *err)
{
    int e = ds->n;
    if (e >= GS_MAX_GPUS || e >= gpus->count) {
        return gs_error_set(err, ENOSPC, "no GPU for daemon %d", e);
    }
    int rc = spawn_one(ds, &gpus->gpu[e], e, err);
    if (rc != 0) {
        name_gpu(ds, err, e, gpus->gpu[e].uuid);
        gs_daemons_stop_from(ds, e, NULL, NULL);
    }
    return rc;
}

int gs_daemons_begun(gs_daemons_t *ds, long long deadline_ms, gs_error_t *err)
{
    int e = ds->n - 1;
    gs_mps_daemon_t *d = &ds->daemon[e];
    int rc = gs_mps_socket_ready(d, deadline_ms, err);
    if (rc == 0) {
        return 1;
    }
    if (rc < 0) {
        name_gpu(ds, err, e, d->uuid);
    }
    rc = rc > 0 ? serve_one(ds, e, deadline_ms, err) : rc;
    if (rc != 0) {
        gs_daemons_stop_from(ds, e, NULL, NULL);
    }
    return rc;
}

int gs_daemons_start_servers(gs_daemons_t *ds, int count, gs_error_t *err)
{
    long long deadline = gs_proc_now_ms() + (long long)ds->timeout_s * 1000;
    for (int g = 0; g < count && g < ds->n; g++) {
        int rc = gs_mps_start_server(&ds->daemon[g], ds->control, getuid(), deadline, err);
        if (rc != 0) {
            name_gpu(ds, err, g, ds->daemon[g].uuid);
            gs_daemons_stop_from(ds, 0, NULL, NULL);
            return rc;
        }
    }
    return 0;
}

void gs_daemons_record_servers(gs_daemons_t *ds, int g)
{
    gs_mps_daemon_t *d = &ds->daemon[g];
    gs_error_t err;
    if (d->daemon_pid <= 0 || ds->borrowed) {
        return; /* gone, and reported so; or the shared agent's */
    }
    if (gs_mps_record_servers(d, ds->control, GS_MPS_ANSWER_MS, &err) != 0) {
        char who[48];
        gs_daemons_label(ds, g, who, sizeof(who));
        gs_report_add(ds->report, 1, "%s (%s): %s", who, d->uuid, err.text);
    }
    for (int i = 0; ds->guard != NULL && i < d->nservers; i++) {
        gs_guard_tell(ds->guard, "mps", d->server_pid[i]);
    }
}

int gs_daemons_reaped(gs_daemons_t *ds, pid_t pid, int st)
{
    for (int i = 0; i < ds->nretired; i++) {
        gs_mps_daemon_t *d = &ds->retired[i];
        if (d->daemon_pid == pid) {
            char who[48];
            gs_daemons_label(ds, ds->retired_of[i], who, sizeof(who));
            d->daemon_reaped = 1;
            d->daemon_status = st;
            d->daemon_pid = 0;
            gs_report_add(ds->report, 0, "%s: the faulted MPS server ended (its last client exited)",
                          who);
            gs_rundir_remove(d->pipe_dir);
            gs_rundir_remove(d->log_dir);
            ds->retired[i] = ds->retired[ds->nretired - 1];
            ds->retired_health[i] = ds->retired_health[ds->nretired - 1];
            ds->retired_of[i] = ds->retired_of[ds->nretired - 1];
            ds->nretired--;
            return 1;
        }
    }
    for (int g = 0; g < ds->n; g++) {
        gs_mps_daemon_t *d = &ds->daemon[g];
        if (d->daemon_pid == pid) {
            char who[48];
            gs_daemons_label(ds, g, who, sizeof(who));
            d->daemon_reaped = 1;
            d->daemon_status = st;
            d->daemon_pid = 0;
            gs_report_add(ds->report, 1,
                          "%s (%s): the MPS control daemon exited while the job ran (%s %d); "
                          "ranks on this %s lost MPS",
                          who, d->uuid, WIFSIGNALED(st) ? "signal" : "status",
                          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                          ds->servers_on[g] > 1 ? "server" : "GPU");
            return 1;
        }
    }
    return 0;
}

void gs_daemons_avoid(gs_daemons_t *ds, const gs_gpu_list_t *gpus, const cpu_set_t *ranks)
{
    for (int g = 0; g < ds->n && !ds->borrowed; g++) {
        cpu_set_t avoid = *ranks, to, both;
        const gs_gpu_t *gpu = &gpus->gpu[g];
        char desc[96];
        CPU_AND(&both, &ds->cpus[g], ranks);
        if (CPU_COUNT(&both) == 0 || ds->daemon[g].daemon_pid <= 0) {
            continue;
        }
        for (int o = 0; o < ds->n; o++) {
            if (o != g) {
                CPU_OR(&avoid, &avoid, &ds->cpus[o]);
            }
        }
        gs_affinity_pick_core(gpu->have_cpumask ? gpu->cpumask : NULL, GS_GPU_CPUMASK_WORDS, &avoid,
                              &to, desc, sizeof(desc));
        CPU_AND(&both, &to, ranks);
        if (CPU_COUNT(&both) != 0 || CPU_EQUAL(&to, &ds->cpus[g])) {
            char who[48];
            gs_daemons_label(ds, g, who, sizeof(who));
            gs_report_add(ds->report, 0, "%s: MPS daemon stays on %s (shared with a rank: no "
                          "free core near the GPU)", who, ds->pinned[g]);
            continue;
        }
        gs_affinity_move(ds->daemon[g].daemon_pid, &to);
        for (int i = 0; i < ds->daemon[g].nservers; i++) {
            gs_affinity_move(ds->daemon[g].server_pid[i], &to);
        }
        char who[48];
        gs_daemons_label(ds, g, who, sizeof(who));
        gs_report_add(ds->report, 0, "%s: MPS daemon and server moved from %s to %s (a rank "
                      "is bound there)", who, ds->pinned[g], desc);
        ds->cpus[g] = to;
        snprintf(ds->pinned[g], sizeof(ds->pinned[g]), "%s", desc);
    }
}

static int pid_alive(pid_t pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
}

int gs_daemons_follow(gs_daemons_t *ds, int *ev)
{
    char buf[4096], path[GS_PATH_MAX];
    long long now = gs_proc_now_ms(), next = -1;
    if (ds->log_fd >= 0) {
        while (read(ds->log_fd, buf, sizeof(buf)) > 0) {
            /* drained: every log is read below */
        }
    }
    for (int g = 0; g < ds->n && g < GS_MAX_GPUS; g++) {
        gs_mps_health_t *h = &ds->health[g];
        ev[g] = 0;
        if (ds->borrowed || ds->daemon[g].log_dir[0] == '\0') {
            continue;
        }
        long long before = h->offset;
        gs_mps_out_path(&ds->daemon[g], path, sizeof(path));
        ev[g] = gs_mps_health_follow(h, path);
        if (!h->listing) {
            ds->listing_ms[g] = 0;
            continue;
        }
        if (h->offset != before || ds->listing_ms[g] == 0) {
            ds->listing_ms[g] = now; /* still growing */
        }
        long long left = ds->listing_ms[g] + GS_DAEMONS_SETTLE_MS - now;
        if (left <= 0) {
            ev[g] |= gs_mps_health_settle(h);
            ds->listing_ms[g] = 0;
        } else if (next < 0 || left < next) {
            next = left;
        }
    }
    for (int i = 0; i < ds->nretired; i++) {
        gs_mps_health_t *h = &ds->retired_health[i];
        gs_mps_out_path(&ds->retired[i], path, sizeof(path));
        gs_mps_health_follow(h, path);
        gs_mps_health_settle(h);
        gs_mps_health_prune(h, pid_alive); /* a client killed before MPS logged it */
        /* Its last client gone: quit now goes through at once (before, the
         * control daemon answered no quit: 1 s lost, then SIGKILL). */
        if (!h->fault && !ds->retired[i].quit_sent && ds->retired[i].daemon_pid > 0) {
            gs_mps_quit_begin(&ds->retired[i], ds->control, 1000);
        }
    }
    return (int)next;
}

int gs_daemons_retire(gs_daemons_t *ds, int g)
{
    if (ds->nretired == GS_DAEMONS_RETIRED_MAX) {
        return -ENOSPC;
    }
    int i = ds->nretired++;
    ds->retired[i] = ds->daemon[g];
    ds->retired_health[i] = ds->health[g];
    ds->retired_of[i] = g;
    /* No quit yet: the control daemon answers none while the fault's
     * clients live (1 s without an answer on an H200); gs_daemons_follow
     * sends it once they have gone. Nobody is given its pipe dir again. */
    memset(&ds->daemon[g], 0, sizeof(ds->daemon[g]));
    for (int k = 0; k < GS_MPS_MAX_SERVERS; k++) {
        ds->daemon[g].server_pidfd[k] = -1;
    }
    gs_mps_health_init(&ds->health[g]);
    return 0;
}

int gs_daemons_refill(gs_daemons_t *ds, const gs_gpu_list_t *gpus, int g, int same_dirs,
                      gs_error_t *err)
{
    long long deadline = gs_proc_now_ms() + (long long)ds->timeout_s * 1000;
    gs_mps_daemon_t *d = &ds->daemon[g];
    ds->gen[g] += !same_dirs;
    int rc = spawn_one(ds, &gpus->gpu[g], g, err);
    rc = rc == 0 ? gs_mps_wait_socket(d, deadline, err) : rc;
    if (rc != 0) {
        name_gpu(ds, err, g, d->uuid);
    }
    rc = rc == 0 ? serve_one(ds, g, deadline, err) : rc;
    if (rc != 0) {
        char note[512];
        if (d->daemon_pid > 0) {
            gs_mps_stop(d, ds->control, GS_DAEMON_QUIT_TIMEOUT_MS, note, sizeof(note));
        }
        gs_rundir_remove(d->pipe_dir);
        gs_rundir_remove(d->log_dir);
        d->daemon_pid = 0;
        return rc;
    }
    if (ds->prestart) {
        gs_daemons_record_servers(ds, g);
    }
    return 0;
}

const gs_mps_daemon_t *gs_daemons_retired_of(const gs_daemons_t *ds, int g,
                                              const gs_mps_health_t **health)
{
    for (int i = ds->nretired - 1; i >= 0; i--) {
        if (ds->retired_of[i] == g && ds->retired[i].daemon_pid > 0) {
            *health = &ds->retired_health[i];
            return &ds->retired[i];
        }
    }
    return NULL;
}
