/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "launcher/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_head[] =
    "Usage: gsrun [gsrun options] [--] [mpirun] <mpirun arguments> program [args]\n"
    "       gsrun [gsrun options] srun <srun arguments> program [args]\n"
    "       gsrun status [--format=text|json|prometheus] [--json]\n"
    "       gsrun stop [options]   (see: gsrun stop -h)\n"
    "       gsrun prolog|epilog|task-prolog [options]   (see: gsrun prolog -h)\n"
    "       <launcher> ... gsrun exec [options] [--] program [args]   (see: gsrun exec -h)\n"
    "Runs an MPI job with NVIDIA MPS set up for every GPU that several ranks share.\n"
    "The launcher's arguments are passed on unchanged.\n"
    "\n"
    "gsrun options (each also as an environment variable; the option wins):\n";

static const char usage_tail[] =
    "  -h, --help                 show this help and exit\n"
    "  -V, --version              show the version and the build's features, and exit\n"
    "  --                         end of gsrun options (use it before an mpirun -v)\n"
    "\n"
    "By default (--mps-share=auto, outside a Slurm job step) your jobs on a node\n"
    "share one MPS server per GPU, which stays up 60 s after your last job there\n"
    "(--mps-linger) for the next one; gsrun stop ends it, --mps-share=job gives\n"
    "each job servers of its own that end with it.\n"
    "\n"
    "gsrun status lists the gsrun jobs on this node (yours; root: everyone's) in\n"
    "$TMPDIR (unset: /dev/shm): agent, MPS daemons and servers per GPU, cores, shares,\n"
    "each rank's MPS state and GPU memory; --json for tools, --format=prometheus for\n"
    "node_exporter (doc/metrics.md). Ranks in containers: doc/containers.md.\n"
    "gsrun stop ends your shared MPS on this node (the servers your jobs share and\n"
    "keep warm after them) once the jobs on it end, or at once.\n"
    "gsrun prolog, epilog and task-prolog provision a node with MPS for a whole batch\n"
    "job, from a batch system's prolog, epilog and task prolog (doc/slurm.md).\n"
    "gsrun exec is the rank prefix for launchers gsrun does not start (mpiexec of\n"
    "MPICH/Hydra, Intel MPI, MVAPICH, Cray PALS; jsrun, flux run; srun; plain\n"
    "mpirun): it goes in\n"
    "front of the program, e.g. mpiexec -n 16 gsrun exec ./app (doc/launchers.md).\n"
    "\n"
    "Exit status: the job's, exactly as the launcher reports it; before it starts:\n"
    "  2 bad option or GSRUN_* value, 69 MPS required but unavailable, 70 MPS failed\n"
    "  to start, 71 unsafe run directory, 126/127 launcher not executable / not found;\n"
    "  after it: 75 gsrun ended the job after a GPU fault (--mps-fault-grace).\n"
    "See gsrun(1).\n";

#define HELP_COL 29   /* where an option's text starts */
#define HELP_WIDTH 86 /* the longest line */

/* One option of the settings table: its name and value, then its text and
 * variable wrapped at word boundaries from HELP_COL on. */
static void usage_option(FILE *f, const gs_config_key_t *k)
{
    char head[96], text[1024];
    if (k->short_opt) {
        snprintf(head, sizeof(head), "  -%c, --%s", k->short_opt, k->option);
    } else if (k->valued) {
        snprintf(head, sizeof(head), "  --%s=%s", k->option, k->metavar);
    } else {
        snprintf(head, sizeof(head), "  --%s", k->option);
    }
    if (k->valued) {
        snprintf(text, sizeof(text), "%s [%s]", k->help, k->env);
    } else {
        snprintf(text, sizeof(text), "%s [%s=%s]", k->help, k->env, k->metavar);
    }
    int col = fprintf(f, "%s", head);
    if (col > HELP_COL - 2) {
        fputc('\n', f);
        col = 0;
    }
    for (const char *w = text; *w != '\0';) {
        size_t n = strcspn(w, " ");
        if (col > HELP_COL && col + 1 + (int)n > HELP_WIDTH) {
            fputc('\n', f);
            col = 0;
        }
        col += col < HELP_COL ? fprintf(f, "%*s", HELP_COL - col, "") : fprintf(f, " ");
        col += fprintf(f, "%.*s", (int)n, w);
        w += n;
        w += *w == ' ';
    }
    fputc('\n', f);
}

void gs_usage_print(FILE *f)
{
    fputs(usage_head, f);
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        if ((k->fronts & GS_FRONT_GSRUN) && k->help != NULL) {
            usage_option(f, k);
        }
    }
    fputs(usage_tail, f);
}

void gs_usage_exec_options(FILE *f)
{
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        if ((k->fronts & GS_FRONT_GSRUN) && k->help != NULL &&
            (k->valued || k->short_opt != 0) && strcmp(k->option, "launcher") != 0) {
            usage_option(f, k);
        }
    }
}

/* gsrun options that take a value (the settings table says which). */
static int is_valued(const char *name)
{
    const gs_config_key_t *k = gs_config_key(name);
    return k != NULL && (k->fronts & GS_FRONT_GSRUN) && k->valued;
}

/* Whether a word names a launcher (by its last path component). */
static int is_launcher_word(const char *w)
{
    static const char *const names[] = {"mpirun", "mpiexec", "orterun", "srun", NULL};
    const char *base = strrchr(w, '/');
    base = base ? base + 1 : w;
    for (const char *const *n = names; *n != NULL; n++) {
        if (strcmp(base, *n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* gsrun [options] mpirun <args>: the word is the launcher, once. */
static int take_launcher_word(int argc, char **argv, gs_opts_t *o, int launcher_cli,
                              gs_error_t *err)
{
    if (o->first_arg >= argc || !is_launcher_word(argv[o->first_arg])) {
        return 0;
    }
    if (launcher_cli) {
        return gs_error_set(err, EINVAL,
                            "the launcher is given twice, as --launcher and as '%s'; give one "
                            "(see gsrun --help)",
                            argv[o->first_arg]);
    }
    int rc = gs_config_set(&o->cfg, "launcher", argv[o->first_arg], "launcher", err);
    if (rc != 0) {
        return rc;
    }
    o->launcher_given = 1;
    o->launcher_word = 1;
    snprintf(o->launcher_origin, sizeof(o->launcher_origin), "launcher");
    o->first_arg++;
    return 0;
}

/* A "--name[=value]" word at argv[*i]: a gsrun setting is applied (its
 * value the rest of the word or the next one), 0; 1 when it is not
 * gsrun's (an mpirun long option such as --oversubscribe); <0 on error. */
static int take_setting(int argc, char **argv, int *i, gs_opts_t *o, int *launcher_cli,
                        gs_error_t *err)
{
    const char *a = argv[*i];
    char name[64];
    const char *eq = strchr(a + 2, '=');
    size_t n = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
    if (n >= sizeof(name)) {
        return 1;
    }
    memcpy(name, a + 2, n);
    name[n] = '\0';
    if (!is_valued(name)) {
        if (strncmp(name, "mps", 3) == 0 || strncmp(name, "gpu", 3) == 0 ||
            strcmp(name, "dry-run") == 0 || strcmp(name, "verbose") == 0) {
            return gs_error_set(err, EINVAL,
                                "%s: unknown gsrun option, or one that takes no value (see "
                                "gsrun --help)",
                                a);
        }
        return 1;
    }
    const char *value;
    if (eq != NULL) {
        value = eq + 1;
    } else if (*i + 1 < argc) {
        value = argv[++*i];
    } else {
        return gs_error_set(err, EINVAL, "--%s: missing value (see gsrun --help)", name);
    }
    char origin[80];
    snprintf(origin, sizeof(origin), "--%s", name);
    int rc = gs_config_set(&o->cfg, name, value, origin, err);
    if (rc != 0) {
        size_t l = strlen(err->text);
        snprintf(err->text + l, sizeof(err->text) - l, " (see gsrun --help)");
        return rc;
    }
    if (strcmp(name, "mps-control") == 0) {
        o->control_given = 1;
        snprintf(o->control_origin, sizeof(o->control_origin), "--mps-control");
    }
    if (strcmp(name, "launcher") == 0) {
        o->launcher_given = 1;
        *launcher_cli = 1;
        snprintf(o->launcher_origin, sizeof(o->launcher_origin), "--launcher");
    }
    return 0;
}

int gs_opts_parse(int argc, char **argv, gs_opts_t *o, gs_error_t *err)
{
    int i, rc, launcher_cli = 0;
    gs_error_t env_err;

    memset(o, 0, sizeof(*o));
    gs_config_init(&o->cfg);
    /* A bad GSRUN_* value fails the job, but not --help or --version. */
    int env_rc = gs_config_load_env(&o->cfg, &env_err);
    o->control_given = getenv("GSRUN_MPS_CONTROL") != NULL;
    o->launcher_given = getenv("GSRUN_LAUNCHER") != NULL;
    snprintf(o->launcher_origin, sizeof(o->launcher_origin), "%s",
             o->launcher_given ? "GSRUN_LAUNCHER" : "launcher (the default)");
    snprintf(o->control_origin, sizeof(o->control_origin), "%s",
             o->control_given ? "GSRUN_MPS_CONTROL" : "MPS control program (the default)");

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = 1;
            continue;
        }
        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            o->version = 1;
            continue;
        }
        if (strcmp(a, "--verbose") == 0 || (a[0] == '-' && a[1] == 'v' && strspn(a + 1, "v") == strlen(a + 1))) {
            /* -v, -vv, -vvv ...: one level per v */
            for (size_t k = strcmp(a, "--verbose") == 0 ? 1 : strlen(a + 1); k > 0; k--) {
                o->cfg.verbose += o->cfg.verbose < 9;
            }
            continue;
        }
        if (strcmp(a, "--dry-run") == 0) {
            o->cfg.dry_run = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            break; /* the launcher's arguments start here */
        }
        if ((rc = take_setting(argc, argv, &i, o, &launcher_cli, err)) < 0) {
            return rc;
        } else if (rc > 0) {
            break;
        }
    }
    o->first_arg = i;
    if (o->help || o->version) {
        return 0;
    }
    if (env_rc != 0) {
        *err = env_err;
        return env_rc;
    }
    if ((rc = take_launcher_word(argc, argv, o, launcher_cli, err)) != 0) {
        return rc;
    }
    if (o->first_arg >= argc) {
        return gs_error_set(err, EINVAL,
                            "no program given: usage is gsrun [gsrun options] <mpirun arguments> "
                            "program [args] (see gsrun --help)");
    }
    return 0;
}
