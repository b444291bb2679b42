/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "affinity.h"
#include "agent_int.h"
#include "proc.h"
#include "rundir.h"

/* What MPS itself logged as errors, for the user to see, each with the
 * local rank of the process it names. In the foreground the daemon prints
 * its and its server's log lines to control.out; the log files are read
 * only where that is empty. */
static void report_log_errors(gs_agent_t *a, int g)
{
    static const char *const out_only[] = {"control.out", NULL};
    static const char *const files[] = {"server.log", "control.log", NULL};
    const gs_mps_daemon_t *d = &a->daemon[g];
    char probe[4200];
    struct stat sb;

    snprintf(probe, sizeof(probe), "%s/control.out", d->log_dir);
    const char *const *logs = stat(probe, &sb) == 0 && sb.st_size > 0 ? out_only : files;
    for (const char *const *f = logs; *f != NULL; f++) {
        char lines[8][256];
        int n = gs_mps_scan_log(d->log_dir, *f, lines, 8);
        for (int i = 0; i < n; i++) {
            const char *p = strstr(lines[i], "PID: ");
            int r = p != NULL ? gs_agent_rank_of_pid(a, (pid_t)atoi(p + 5)) : -1;
            if (r >= 0) {
                gs_agent_report(a, 1, "GPU %d: local rank %d: %s: %s", g, r, *f, lines[i]);
            } else {
                gs_agent_report(a, 1, "GPU %d: %s: %s", g, *f, lines[i]);
            }
        }
    }
}

void gs_agent_stop_mps(gs_agent_t *a)
{
    gs_agent_stop_mps_from(a, 0);
}

void gs_agent_stop_mps_from(gs_agent_t *a, int first)
{
    long long t0 = gs_now_ms();
    /* Every GPU's daemon is told first, so that their servers end together. */
    for (int g = first; g < a->ndaemons; g++) {
        gs_mps_daemon_t *d = &a->daemon[g];
        gs_error_t ignored;
        if (!a->prestart && d->daemon_pid > 0) {
            /* Servers the clients started: known only now, for the escalation. */
            gs_mps_record_servers(d, a->control, 1000, &ignored);
        }
        gs_mps_quit_begin(d, a->control, GS_AGENT_QUIT_TIMEOUT_MS);
    }
    for (int g = first; g < a->ndaemons; g++) {
        gs_mps_daemon_t *d = &a->daemon[g];
        char note[512];
        int was_running = d->daemon_pid > 0;
        int esc = gs_mps_stop(d, a->control, GS_AGENT_QUIT_TIMEOUT_MS, note, sizeof(note));
        if (esc) {
            gs_agent_report(a, 1, "GPU %d (%s): %s", g, d->uuid, note);
        } else if (was_running) {
            gs_agent_report(a, 0, "GPU %d: MPS shut down in %lld ms", g, gs_now_ms() - t0);
        }
        report_log_errors(a, g);
        gs_rundir_remove(d->pipe_dir);
        gs_rundir_remove(d->log_dir);
    }
    if (first < a->ndaemons) {
        a->ndaemons = first;
    }
}

/* Prepares GPU g's directories and spawns its daemon, pinned near the GPU. */
static int spawn_one(gs_agent_t *a, int g, gs_error_t *err)
{
    gs_mps_daemon_t *d = &a->daemon[g];
    const gs_gpu_t *gpu = &a->gpus.gpu[g];
    cpu_set_t cpus;
    int rc;

    memset(d, 0, sizeof(*d));
    d->gpu = g;
    snprintf(d->uuid, sizeof(d->uuid), "%s", gpu->uuid);
    if ((size_t)snprintf(d->pipe_dir, sizeof(d->pipe_dir), "%s/g%d", a->node_dir, g) >=
            sizeof(d->pipe_dir) ||
        !gs_rundir_socket_fits(d->pipe_dir)) {
        return gs_error_set(err, ENAMETOOLONG,
                            "MPS socket directory '%s' is too long for a unix socket (108 "
                            "bytes); set TMPDIR to a shorter directory",
                            d->pipe_dir);
    }
    snprintf(d->log_dir, sizeof(d->log_dir), "%s/g%d.log", a->node_dir, g);
    if ((rc = gs_rundir_ensure(d->pipe_dir, err)) != 0 ||
        (rc = gs_rundir_ensure(d->log_dir, err)) != 0) {
        return rc;
    }
    cpu_set_t taken; /* one core per daemon while cores allow */
    CPU_ZERO(&taken);
    for (int o = 0; o < g; o++) {
        CPU_OR(&taken, &taken, &a->daemon_cpus[o]);
    }
    int pin = gs_affinity_pick_core(gpu->have_cpumask ? gpu->cpumask : NULL, GS_GPU_CPUMASK_WORDS,
                                    &taken, &cpus, a->pinned[g], sizeof(a->pinned[g]));
    a->daemon_cpus[g] = cpus;
    a->ndaemons = g + 1;
    rc = gs_mps_spawn(d, a->control, pin == 0 || pin == -ENOENT ? &cpus : NULL, err);
    if (rc == 0) {
        gs_agent_guard_tell(a, "mps", d->daemon_pid);
    }
    return rc;
}

int gs_agent_start_mps(gs_agent_t *a, int n, gs_error_t *err)
{
    long long deadline = gs_now_ms() + (long long)a->o->cfg.timeout_s * 1000;
    int rc = 0, first = a->ndaemons;

    for (int g = first; rc == 0 && g < n; g++) {
        rc = spawn_one(a, g, err);
    }
    /* All daemons start in parallel; now wait for each to serve. */
    for (int g = first; rc == 0 && g < a->ndaemons; g++) {
        gs_mps_daemon_t *d = &a->daemon[g];
        rc = gs_mps_wait_socket(d, deadline, err);
        if (rc == 0 && a->prestart) {
            rc = gs_mps_start_server(d, a->control, getuid(), deadline, err);
        } else if (rc == 0) {
            d->ready_ms = gs_now_ms(); /* the first client starts the server */
        }
        if (rc != 0) {
            char why[GS_ERROR_LEN];
            snprintf(why, sizeof(why), "GPU %d (%s): %s", g, d->uuid, err->text);
            snprintf(err->text, sizeof(err->text), "%s", why);
        }
    }
    if (rc != 0) {
        gs_agent_stop_mps(a);
    }
    return rc;
}

int gs_agent_start_servers(gs_agent_t *a, int n, gs_error_t *err)
{
    long long deadline = gs_now_ms() + (long long)a->o->cfg.timeout_s * 1000;
    for (int g = 0; g < n && g < a->ndaemons; g++) {
        int rc = gs_mps_start_server(&a->daemon[g], a->control, getuid(), deadline, err);
        if (rc != 0) {
            char why[GS_ERROR_LEN];
            snprintf(why, sizeof(why), "GPU %d (%s): %s", g, a->daemon[g].uuid, err->text);
            snprintf(err->text, sizeof(err->text), "%s", why);
            gs_agent_stop_mps(a);
            return rc;
        }
    }
    return 0;
}

void gs_agent_note_child_exits(gs_agent_t *a)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid == a->guard_pid) {
            a->guard_pid = 0;
            gs_agent_report(a, 1, "the agent's guard exited early; the agent goes on without it");
            continue;
        }
        for (int g = 0; g < a->ndaemons; g++) {
            gs_mps_daemon_t *d = &a->daemon[g];
            if (d->daemon_pid == pid) {
                d->daemon_reaped = 1;
                d->daemon_status = st;
                d->daemon_pid = 0;
                gs_agent_report(a, 1,
                                "GPU %d (%s): the MPS control daemon exited while the job ran (%s "
                                "%d); ranks on this GPU lost MPS",
                                g, d->uuid, WIFSIGNALED(st) ? "signal" : "status",
                                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            }
        }
    }
}
