/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun status [--format=text|json|prometheus]: the gsrun jobs on this
 * node, read from the files their agents keep (runtime/files/status.c);
 * nothing is asked of the agents. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/status_main.h"
#include "runtime/core/config.h"
#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/files/ledger.h"
#include "runtime/files/rundir.h"
#include "runtime/files/status.h"
#include "runtime/gpu/gpu.h"

#define GS_STATUS_MAX_JOBS 64

static gs_gpu_list_t node_gpus;

/* A UUID's GPU number on the node as nvidia-smi shows it (NVML's index;
 * not the caller's CUDA_VISIBLE_DEVICES: the record is the node's). */
static int gpu_of(const char *uuid)
{
    for (int g = 0; g < node_gpus.count; g++) {
        if (strcmp(node_gpus.gpu[g].uuid, uuid) == 0) {
            return node_gpus.gpu[g].index;
        }
    }
    return -1;
}

enum { FORMAT_TEXT, FORMAT_JSON, FORMAT_PROMETHEUS };

static void usage(void)
{
    printf("Usage: gsrun status [--format=text|json|prometheus] [--json]\n"
           "Lists the gsrun jobs on this node that run in $TMPDIR (unset: /dev/shm), and\n"
           "batch jobs, Slurm steps and `gsrun exec` jobs in " GS_ROOT_RUNDIR ",\n"
           "$TMPDIR/gsrun-<uid> and /tmp/gsrun-<uid>: the\n"
           "caller's, or every user's for root (the caller's first); then names the\n"
           "caller's shared MPS that jobs with another TMPDIR started (by its process).\n"
           "  --format=text          for people (the default)\n"
           "  --format=json, --json  for tools: gsrun(1) documents the fields\n"
           "  --format=prometheus    gauges in the Prometheus text format for\n"
           "                         node_exporter's textfile collector (doc/metrics.md);\n"
           "                         nothing else is printed\n");
}

/* The options: -1 to go on with *format set, else the exit status. */
static int parse_args(int argc, char **argv, int *format)
{
    static const char *const names[] = {"text", "json", "prometheus"};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "--json") == 0) {
            *format = FORMAT_JSON;
            continue;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage();
            return 0;
        } else if (strncmp(argv[i], "--format=", 9) == 0) {
            v = argv[i] + 9;
        } else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            v = argv[++i];
        } else if (strcmp(argv[i], "--format") == 0) {
            fprintf(stderr, "gsrun status: --format needs a value: text, json or prometheus; "
                            "see gsrun status --help\n");
            return GS_EXIT_USAGE;
        } else {
            fprintf(stderr,
                    "gsrun status: unknown argument '%s'; usage: gsrun status "
                    "[--format=text|json|prometheus] [--json]\n",
                    argv[i]);
            return GS_EXIT_USAGE;
        }
        int k = 0;
        while (k < 3 && strcmp(v, names[k]) != 0) {
            k++;
        }
        if (k == 3) {
            fprintf(stderr,
                    "gsrun status: unknown output format '%s' (--format); the formats "
                    "are text, json and prometheus; see gsrun status --help\n",
                    v);
            return GS_EXIT_USAGE;
        }
        *format = k;
    }
    return -1;
}

/* The user's shared MPS agents found by their processes, whose files are
 * outside the dirs listed (where): how to list each. */
static void print_elsewhere(const gs_status_t *elsewhere, int ne, const char *where)
{
    for (int i = 0; i < ne; i++) {
        const gs_status_t *e = &elsewhere[i];
        char tmpdir[256];
        snprintf(tmpdir, sizeof(tmpdir), "%s", e->job_dir);
        char *base = strrchr(tmpdir, '/'); /* <TMPDIR>/gsrun-<uid>[.k]/mps-share */
        if (base != NULL) {
            *base = '\0';
            base = strrchr(tmpdir, '/');
        }
        if (base != NULL) {
            *base = '\0';
        }
        printf("gsrun status: also the shared MPS of uid %d (agent %d, up %.0f s, %d job%s) with "
               "its files in %s, outside %s: `TMPDIR=%s gsrun status` lists it\n",
               e->uid, e->agent_pid, gs_status_uptime_s(e, gs_proc_wall_ms()), e->alive,
               e->alive == 1 ? "" : "s", e->job_dir, where, tmpdir);
    }
}

int gs_status_main(int argc, char **argv)
{
    static gs_status_t jobs[GS_STATUS_MAX_JOBS];
    char node[64];
    int format = FORMAT_TEXT;
    int rc = parse_args(argc, argv, &format);

    if (rc >= 0) {
        return rc;
    }
    int json = format == FORMAT_JSON;
    gs_rundir_node_name(node, sizeof(node));
    /* Per-job dirs in TMPDIR; batch jobs' and Slurm steps' in root's base
     * and in the caller's own base (in /dev/shm, and in /tmp where
     * /dev/shm was not usable). A dir's own base (<dir>/gsrun-<uid>) is
     * scanned with it. */
    char own[64], tmp_own[64], where[600];
    const char *const dirs[] = {gs_rundir_tmpdir(), GS_ROOT_RUNDIR, own, tmp_own};
    int n = 0;
    snprintf(own, sizeof(own), "%s/gsrun-%u", gs_rundir_default_root(), (unsigned)getuid());
    snprintf(tmp_own, sizeof(tmp_own), "/tmp/gsrun-%u", (unsigned)getuid());
    size_t wl = 0;
    where[0] = '\0';
    for (int i = 0; i < 4; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) {
            char nested[GS_PATH_MAX];
            snprintf(nested, sizeof(nested), "%s/gsrun-%u", dirs[j], (unsigned)getuid());
            seen |= strcmp(dirs[i], dirs[j]) == 0 || strcmp(dirs[i], nested) == 0;
        }
        if (!seen) {
            n += gs_status_scan(dirs[i], geteuid() == 0, jobs + n, GS_STATUS_MAX_JOBS - n);
            wl += (size_t)snprintf(where + wl, sizeof(where) - wl, "%s%s",
                                   wl == 0 ? "" : (i == 3 ? " or " : ", "), dirs[i]);
        }
    }
    gs_status_clean(where);
    static gs_ledger_summary_t placed;
    char place[GS_PATH_MAX];
    /* Prometheus gets the jobs only: the placement record is the user's
     * view, and a metrics file has no room for notes. */
    int have_place = format != FORMAT_PROMETHEUS && gs_ledger_find(node, place, sizeof(place)) &&
                     gs_ledger_summarize(place, &placed) > 0;
    gs_status_clean_placement(&placed);
    gs_error_t ignored;
    if (have_place && gs_gpu_discover(&node_gpus, &ignored) != 0) {
        node_gpus.count = 0;
    }
    for (int i = 1; have_place && i < placed.n; i++) { /* by GPU number, unknown last */
        for (int j = i; j > 0 && (unsigned)gpu_of(placed.gpu[j].uuid) <
                                      (unsigned)gpu_of(placed.gpu[j - 1].uuid); j--) {
            __typeof__(placed.gpu[0]) t = placed.gpu[j];
            placed.gpu[j] = placed.gpu[j - 1];
            placed.gpu[j - 1] = t;
        }
    }
    /* The user's shared MPS started by jobs with another TMPDIR: said
     * apart, not listed as if it were in this one. */
    static gs_status_t elsewhere[8];
    int ne =
        format != FORMAT_TEXT ? 0 : gs_status_scan_shared(geteuid() == 0, jobs, n, elsewhere, 8);
    if (format == FORMAT_PROMETHEUS) {
        gs_status_print_prometheus(stdout, jobs, n);
    } else if (json) {
        gs_status_print_json_placed(stdout, node, jobs, n, gs_proc_wall_ms(),
                                    have_place ? &placed : NULL, gpu_of);
    } else if (n == 0) {
        printf("gsrun status: node %s: no gsrun job in %s\n", node, where);
        if (have_place) { /* jobs of the user's whose dirs are elsewhere (another TMPDIR) */
            gs_status_print_placement(stdout, &placed, place, gpu_of);
        }
    } else {
        /* The shared agents are listed with the jobs but are none. */
        int shared = 0;
        for (int i = 0; i < n; i++) {
            shared += strcmp(jobs[i].shared, "node") == 0;
        }
        printf("gsrun status: node %s: %d job%s%s in %s\n", node, n - shared,
               n - shared == 1 ? "" : "s",
               shared == 0 ? "" : shared == 1 ? " and a shared MPS" : " and shared MPS", where);
        gs_status_print_text(stdout, jobs, n, gs_proc_wall_ms());
        if (have_place) {
            gs_status_print_placement(stdout, &placed, place, gpu_of);
        }
    }
    print_elsewhere(elsewhere, ne, where);
    return fflush(stdout) == 0 ? 0 : 1;
}
