/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/config.h"
#include "runtime/core/limits.h"
#include "runtime/core/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int share_auto_node(void);

void gs_config_init(gs_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->mps = GS_MPS_AUTO;
    cfg->pct_mode = GS_PCT_AUTO;
    snprintf(cfg->control, sizeof(cfg->control), "%s", GS_DEFAULT_CONTROL);
    snprintf(cfg->launcher, sizeof(cfg->launcher), "%s", GS_DEFAULT_LAUNCHER);
    cfg->timeout_s = GS_DEFAULT_TIMEOUT_S;
    cfg->gpu_bind = 1;
    cfg->prestart = 1;
    cfg->share_auto = 1;
    cfg->share_node = share_auto_node();
}

const char *gs_config_mps_name(gs_mps_mode_t mode)
{
    switch (mode) {
    case GS_MPS_ON:
        return "on";
    case GS_MPS_OFF:
        return "off";
    default:
        return "auto";
    }
}

int gs_config_parse_mps(const char *text, gs_mps_mode_t *out)
{
    if (strcmp(text, "auto") == 0) {
        *out = GS_MPS_AUTO;
    } else if (strcmp(text, "on") == 0) {
        *out = GS_MPS_ON;
    } else if (strcmp(text, "off") == 0) {
        *out = GS_MPS_OFF;
    } else {
        return -EINVAL;
    }
    return 0;
}

/* Plain decimal only: digits with at most one '.', so "1e2", "50%", "0x10",
 * " 5" and "+5" are refused rather than guessed at. */
static int parse_plain_decimal(const char *text, double *out)
{
    int digits = 0, dots = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p >= '0' && *p <= '9') {
            digits++;
        } else if (*p == '.' && dots == 0) {
            dots++;
        } else {
            return -EINVAL;
        }
    }
    if (digits == 0 || digits > 12) {
        return -EINVAL;
    }
    *out = strtod(text, NULL);
    return 0;
}

int gs_config_parse_percentage(const char *text, gs_pct_mode_t *mode, double *pct)
{
    double v;
    if (strcmp(text, "auto") == 0) {
        *mode = GS_PCT_AUTO;
        *pct = 0;
        return 0;
    }
    if (strcmp(text, "off") == 0) {
        *mode = GS_PCT_OFF;
        *pct = 0;
        return 0;
    }
    if (parse_plain_decimal(text, &v) != 0 || v < 1.0 || v > 100.0) {
        return -EINVAL;
    }
    *mode = GS_PCT_FIXED;
    *pct = v;
    return 0;
}

int gs_config_parse_size_mb(const char *text, long long *mb)
{
    static const char units[] = "KMGT";
    long long v = 0;
    const char *p = text;
    int shift = 20; /* bytes of a plain number: MiB is the unit MPS rounds to */

    if (strcmp(text, "off") == 0 || strcmp(text, "none") == 0) {
        *mb = 0;
        return 0;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        if (p - text >= 15) {
            return -EINVAL;
        }
        v = v * 10 + (*p - '0');
    }
    if (p == text) {
        return -EINVAL;
    }
    if (*p == '\0') {
        shift = 0; /* bytes */
    } else {
        const char *u = strchr(units, *p >= 'a' ? *p - 32 : *p);
        if (u == NULL) {
            return -EINVAL;
        }
        shift = 10 * (int)(u - units + 1);
        p++;
        if (*p == 'B' || *p == 'b') {
            p++;
        } else if (*p == 'i' && (p[1] == 'B' || p[1] == 'b')) {
            p += 2;
        }
        if (*p != '\0') {
            return -EINVAL;
        }
    }
    /* To MiB, rounding down; less than 1 MiB cannot be meant. */
    if (shift >= 20) {
        if (v > (1LL << 40) >> (shift - 20)) {
            return -ERANGE;
        }
        v <<= shift - 20;
    } else {
        v >>= 20 - shift;
    }
    if (v < 1) {
        return -EINVAL;
    }
    *mb = v;
    return 0;
}

static int parse_int_range(const char *text, int lo, int hi, int *out)
{
    long v = 0;
    if (*text == '\0' || strlen(text) > 9) {
        return -EINVAL;
    }
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return -EINVAL;
        }
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi) {
        return -EINVAL;
    }
    *out = (int)v;
    return 0;
}

static int parse_bool(const char *text, int *out)
{
    if (strcmp(text, "1") == 0 || strcmp(text, "yes") == 0 || strcmp(text, "true") == 0) {
        *out = 1;
    } else if (strcmp(text, "0") == 0 || strcmp(text, "no") == 0 || strcmp(text, "false") == 0) {
        *out = 0;
    } else {
        return -EINVAL;
    }
    return 0;
}

/* --- the settings table: each row's reader and writer ------------------- */

static int set_mps(gs_config_t *c, const char *v)
{
    return gs_config_parse_mps(v, &c->mps);
}
static void fmt_mps(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", gs_config_mps_name(c->mps));
}
static int set_pct(gs_config_t *c, const char *v)
{
    gs_pct_mode_t mode;
    double pct;
    int rc = gs_config_parse_percentage(v, &mode, &pct);
    if (rc == 0) {
        c->pct_mode = mode;
        c->pct = pct;
    }
    return rc;
}
static void fmt_pct(const gs_config_t *c, char *b, size_t n)
{
    if (c->pct_mode == GS_PCT_FIXED) {
        snprintf(b, n, "%g", c->pct);
    } else {
        snprintf(b, n, "%s", c->pct_mode == GS_PCT_OFF ? "off" : "auto");
    }
}
static int set_control(gs_config_t *c, const char *v)
{
    snprintf(c->control, sizeof(c->control), "%s", v);
    return 0;
}
static void fmt_control(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->control);
}
static int set_timeout(gs_config_t *c, const char *v)
{
    return parse_int_range(v, 1, GS_MAX_TIMEOUT_S, &c->timeout_s);
}
static void fmt_timeout(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->timeout_s);
}
static int set_gpu_bind(gs_config_t *c, const char *v)
{
    if (strcmp(v, "closest") != 0 && strcmp(v, "none") != 0) {
        return -EINVAL;
    }
    c->gpu_bind = strcmp(v, "closest") == 0;
    return 0;
}
static void fmt_gpu_bind(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->gpu_bind ? "closest" : "none");
}
static int set_mem(gs_config_t *c, const char *v)
{
    return gs_config_parse_size_mb(v, &c->mem_limit_mb);
}
static void fmt_mem(const gs_config_t *c, char *b, size_t n)
{
    if (c->mem_limit_mb > 0) {
        snprintf(b, n, "%lldM", c->mem_limit_mb);
    } else {
        snprintf(b, n, "off");
    }
}
static int set_clients(gs_config_t *c, const char *v)
{
    if (strcmp(v, "auto") == 0) {
        c->clients_per_server = 0;
        return 0;
    }
    return parse_int_range(v, 1, GS_MAX_CLIENTS_PER_SERVER, &c->clients_per_server);
}
static void fmt_clients(const gs_config_t *c, char *b, size_t n)
{
    if (c->clients_per_server > 0) {
        snprintf(b, n, "%d", c->clients_per_server);
    } else {
        snprintf(b, n, "auto");
    }
}
static int set_priority(gs_config_t *c, const char *v)
{
    if (strcmp(v, "normal") != 0 && strcmp(v, "low") != 0) {
        return -EINVAL;
    }
    c->priority_low = strcmp(v, "low") == 0;
    return 0;
}
static void fmt_priority(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->priority_low ? "low" : "normal");
}
/* auto: the user's jobs share, except inside a Slurm job step, whose end
 * Slurm's process tracking makes the end of whatever the step started,
 * the shared servers of the step's neighbours too (doc/tuning.md). */
static int share_auto_node(void)
{
    const char *step = getenv("SLURM_STEP_ID");
    return step == NULL || step[0] < '0' || step[0] > '9';
}
void gs_config_share_in_step(gs_config_t *cfg)
{
    if (cfg->share_auto) {
        cfg->share_auto = 0;
        cfg->share_node = 0;
    }
}
static int set_share(gs_config_t *c, const char *v)
{
    if (strcmp(v, "job") != 0 && strcmp(v, "node") != 0 && strcmp(v, "auto") != 0) {
        return -EINVAL;
    }
    c->share_auto = strcmp(v, "auto") == 0;
    c->share_node = c->share_auto ? share_auto_node() : strcmp(v, "node") == 0;
    return 0;
}
static void fmt_share(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->share_auto ? "auto" : c->share_node ? "node" : "job");
}
static int set_linger(gs_config_t *c, const char *v)
{
    return parse_int_range(v, 0, GS_MAX_LINGER_S, &c->linger_s);
}
static void fmt_linger(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->linger_s);
}
static int set_launcher(gs_config_t *c, const char *v)
{
    snprintf(c->launcher, sizeof(c->launcher), "%s", v);
    return 0;
}
static void fmt_launcher(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", c->launcher);
}
static int set_dry_run(gs_config_t *c, const char *v)
{
    return parse_bool(v, &c->dry_run);
}
static void fmt_dry_run(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->dry_run ? 1 : 0);
}
static int set_verbose(gs_config_t *c, const char *v)
{
    return parse_int_range(v, 0, 9, &c->verbose);
}
static void fmt_verbose(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->verbose);
}
static int set_prestart(gs_config_t *c, const char *v)
{
    return parse_bool(v, &c->prestart);
}
static void fmt_prestart(const gs_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%d", c->prestart ? 1 : 0);
}

#define ALL_FRONTS                                                                                 \
    (GS_FRONT_GSRUN | GS_FRONT_BATCH | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS)
const gs_config_key_t gs_config_keys[] = {
    {"mps", "GSRUN_MPS", "auto, on or off", "mps", ALL_FRONTS, 1, set_mps, fmt_mps, "auto|on|off",
     "use MPS: auto when a GPU is present and ranks share it (default), on always (fail "
     "without GPU), off never",
     0},
    {"mps-percentage", "GSRUN_MPS_PERCENTAGE", "auto, off, or a number from 1 to 100", "percentage",
     ALL_FRONTS, 1, set_pct, fmt_pct, "auto|off|N",
     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per rank: auto is min(100, 200/n) for n ranks on an MPS "
     "server (unset for a program that links no MPI library), off leaves it unset "
     "(independent ranks, ensembles: use off; which fits which job: doc/tuning.md), N is a "
     "number from 1 to 100",
     0},
    {"mps-control", "GSRUN_MPS_CONTROL", "the path of nvidia-cuda-mps-control", "control",
     ALL_FRONTS, 1, set_control, fmt_control, "PATH",
     "nvidia-cuda-mps-control to use (default: found in PATH)", 0},
    {"mps-timeout", "GSRUN_MPS_TIMEOUT", "whole seconds from 1 to 3600", "timeout", ALL_FRONTS, 1,
     set_timeout, fmt_timeout, "SECONDS", "bound on starting MPS, 1 to 3600 (default 30)", 0},
    {"gpu-bind", "GSRUN_GPU_BIND", "closest or none", "gpu_bind",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 1, set_gpu_bind,
     fmt_gpu_bind, "closest|none",
     "without MPS (one rank per GPU), give each rank its own GPU in CUDA_VISIBLE_DEVICES, the "
     "one nearest its cores (default closest)",
     0},
    {"mps-memory-limit", "GSRUN_MPS_MEMORY_LIMIT",
     "off, or a size such as 4G or 512M (K, M, G, T: powers of 1024; at least 1M)", "memory_limit",
     ALL_FRONTS, 1, set_mem, fmt_mem, "SIZE",
     "device memory each rank may allocate under MPS, e.g. 4G or 512M (default off)", 0},
    {"mps-clients-per-server", "GSRUN_MPS_CLIENTS_PER_SERVER",
     "auto (the driver's limit: 48 up to CUDA 13.0, 60 from 13.1), or a number from 1 to 1024",
     "clients_per_server", ALL_FRONTS, 1, set_clients, fmt_clients, "auto|N",
     "ranks one MPS server takes; a GPU with more gets several servers. auto: the driver's "
     "limit (48 up to CUDA 13.0, 60 from 13.1)",
     0},
    {"mps-priority", "GSRUN_MPS_PRIORITY", "normal or low", "priority", ALL_FRONTS, 1,
     set_priority, fmt_priority, "normal|low",
     "the ranks' priority on their MPS server (CUDA_MPS_CLIENT_PRIORITY 0 or 1): low lets "
     "the work of other jobs on the same server go first (default normal)",
     0},
    /* Not the batch commands': a batch job's steps share the job's servers. */
    {"mps-share", "GSRUN_MPS_SHARE", "auto, job or node", "share",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 1, set_share, fmt_share,
     "auto|job|node",
     "node: the user's jobs on a node share one set of MPS servers, one a GPU, started by "
     "the first and stopped after the last (ensembles, sweeps, concurrent and back-to-back "
     "jobs); job: MPS servers of the job's own; auto (default): node, but job inside a Slurm "
     "job step (doc/tuning.md)",
     0},
    {"mps-linger", "GSRUN_MPS_LINGER", "whole seconds from 0 to 86400", "linger",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 1, set_linger, fmt_linger, "SECONDS",
     "with --mps-share=node: how long the shared MPS servers stay up after the node's last job "
     "of the user ended, for the next one to find them warm (default 0)",
     0},
    {"launcher", "GSRUN_LAUNCHER", "the path or name of an Open MPI mpirun", NULL, GS_FRONT_GSRUN,
     1, set_launcher, fmt_launcher, "PATH",
     "the launcher to run: Open MPI's mpirun (default: mpirun in PATH) or Slurm's srun; a "
     "first launcher word does the same: gsrun [options] mpirun|mpiexec|orterun|srun "
     "<arguments>",
     0},
    {"dry-run", "GSRUN_DRY_RUN", "0 or 1", NULL, GS_FRONT_GSRUN, 0, set_dry_run, fmt_dry_run, "1",
     "print the launcher command and settings, run nothing", 0},
    {"verbose", "GSRUN_VERBOSE", "a number from 0 to 9", "verbose",
     GS_FRONT_GSRUN | GS_FRONT_MCA | GS_FRONT_SPANK | GS_FRONT_RANKS, 0, set_verbose, fmt_verbose,
     "N",
     "report what gsrun set up and tore down; -vv adds a timeline of the job (ms after gsrun "
     "started)",
     'v'},
    /* A measuring switch (doc/benchmarks.md), read from the environment only. */
    {"mps-prestart", "GSRUN_MPS_PRESTART", "0 or 1", NULL, 0, 1, set_prestart, fmt_prestart, NULL,
     NULL, 0},
    {NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0},
};

const gs_config_key_t *gs_config_key(const char *option)
{
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        if (strcmp(k->option, option) == 0) {
            return k;
        }
    }
    return NULL;
}

int gs_config_set(gs_config_t *cfg, const char *option, const char *value, const char *origin,
                  gs_error_t *err)
{
    const gs_config_key_t *key = gs_config_key(option);
    int rc = 0;

    if (key == NULL) {
        return gs_error_set(err, EINVAL, "%s: unknown setting", origin);
    }
    if (value == NULL || *value == '\0') {
        return gs_error_set(err, EINVAL, "%s: empty value; accepted: %s", origin, key->accepted);
    }
    if (strlen(value) >= GS_MAX_VALUE_LEN) {
        return gs_error_set(err, EINVAL, "%s: value is longer than %d characters; accepted: %s",
                            origin, GS_MAX_VALUE_LEN - 1, key->accepted);
    }
    /* Values end up in command lines, file names and MPS control commands,
     * so control characters are never accepted. */
    if (gs_text_has_control(value)) {
        return gs_error_set(err, EINVAL, "%s: value contains control characters; accepted: %s",
                            origin, key->accepted);
    }

    rc = key->parse(cfg, value);
    if (rc != 0) {
        return gs_error_set(err, EINVAL, "%s: invalid value '%s'; accepted: %s", origin, value,
                            key->accepted);
    }
    return 0;
}

int gs_config_load_env(gs_config_t *cfg, gs_error_t *err)
{
    gs_config_t tmp = *cfg;
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        const char *v = getenv(k->env);
        if (v != NULL) {
            int rc = gs_config_set(&tmp, k->option, v, k->env, err);
            if (rc != 0) {
                return rc;
            }
        }
    }
    const char *names = getenv("GSRUN_OPTION_NAMES");
    tmp.names = names != NULL && strcmp(names, "mca") == 0 ? GS_NAMES_MCA : GS_NAMES_GSRUN;
    /* Slurm's gres/mps: a step that asked for a share of an MPS daemon the
     * site runs gets its share as CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (and
     * nothing else says so). Not gsrun's own, set for a rank it served. */
    const char *pct = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    if (pct != NULL && *pct != '\0' && getenv("SLURM_JOB_ID") != NULL &&
        getenv("GSRUN_MPS_ACTIVE") == NULL) {
        snprintf(tmp.site_mps, sizeof(tmp.site_mps), "%s", pct);
    }
    *cfg = tmp;
    return 0;
}

const char *gs_config_opt(const gs_config_t *cfg, const char *option, char *buf, size_t len)
{
    if (cfg->names == GS_NAMES_MCA) {
        snprintf(buf, len, "rtc_gsrun_%s", option);
        for (char *p = buf; *p != '\0'; p++) {
            *p = *p == '-' ? '_' : *p;
        }
    } else {
        snprintf(buf, len, "--%s", option);
    }
    return buf;
}

int gs_config_export_env(const gs_config_t *cfg, gs_error_t *err)
{
    char value[GS_MAX_VALUE_LEN + 32];
    for (const gs_config_key_t *k = gs_config_keys; k->option != NULL; k++) {
        k->format(cfg, value, sizeof(value));
        if (setenv(k->env, value, 1) != 0) {
            return gs_error_set(err, errno, "cannot set %s: %s", k->env, strerror(errno));
        }
    }
    if (setenv("GSRUN_OPTION_NAMES", cfg->names == GS_NAMES_MCA ? "mca" : "gsrun", 1) != 0) {
        return gs_error_set(err, errno, "cannot set the GSRUN_* environment: %s", strerror(errno));
    }
    return 0;
}

static int check_executable(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        return -ENOENT;
    }
    if (!S_ISREG(st.st_mode) || access(path, X_OK) != 0) {
        return -EACCES;
    }
    return 0;
}

static int search_dirs(const char *dirs, const char *name, char *out, size_t outlen)
{
    char buf[GS_LINE_MAX];
    char *save = NULL;
    if (dirs == NULL || strlen(dirs) >= sizeof(buf)) {
        return -ENOENT;
    }
    snprintf(buf, sizeof(buf), "%s", dirs);
    for (char *d = strtok_r(buf, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        if (*d == '\0') {
            continue;
        }
        if ((size_t)snprintf(out, outlen, "%s/%s", d, name) < outlen &&
            check_executable(out) == 0) {
            return 0;
        }
    }
    return -ENOENT;
}

int gs_config_find_executable(const char *name, const char *extra_dirs, const char *what,
                              char *out, size_t outlen, gs_error_t *err)
{
    if (strchr(name, '/') != NULL) {
        int rc = check_executable(name);
        if (rc == -ENOENT) {
            return gs_error_set(err, ENOENT, "%s '%s' does not exist; give the correct path",
                                what, name);
        }
        if (rc == -EACCES) {
            return gs_error_set(err, EACCES,
                                "%s '%s' is not an executable file; check the path and its "
                                "permissions",
                                what, name);
        }
        if (strlen(name) >= outlen) {
            return gs_error_set(err, ENAMETOOLONG, "%s '%s': path too long", what, name);
        }
        snprintf(out, outlen, "%s", name);
        return 0;
    }
    if (search_dirs(getenv("PATH"), name, out, outlen) == 0 ||
        search_dirs(extra_dirs, name, out, outlen) == 0) {
        return 0;
    }
    return gs_error_set(err, ENOENT, "%s '%s' was not found in PATH%s%s; install it or give its path",
                        what, name, extra_dirs ? " or " : "", extra_dirs ? extra_dirs : "");
}
