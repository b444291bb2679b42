/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun settings: one parser for the command line and the GSRUN_* environment.
 *
 * gsrun parses its options into a gs_config_t, then exports every setting as
 * GSRUN_* variables so gsrun-shim and gsrun-agent read the same values with the
 * same checks (gs_config_load_env). */
#ifndef GS_CONFIG_H
#define GS_CONFIG_H

#include <limits.h>

#include "runtime/core/gs_error.h"

typedef enum { GS_MPS_AUTO = 0, GS_MPS_ON, GS_MPS_OFF } gs_mps_mode_t;
typedef enum { GS_PCT_AUTO = 0, GS_PCT_OFF, GS_PCT_FIXED } gs_pct_mode_t;
/* The front end whose names a message gives: gsrun's options, or the Open
 * MPI component's MCA parameters. */
typedef enum { GS_NAMES_GSRUN = 0, GS_NAMES_MCA } gs_names_t;

#define GS_DEFAULT_CONTROL "nvidia-cuda-mps-control"
#define GS_DEFAULT_LAUNCHER "mpirun"
#define GS_DEFAULT_TIMEOUT_S 30
#define GS_MAX_TIMEOUT_S 3600
#define GS_MAX_VALUE_LEN 1024
/* The most --mps-clients-per-server accepts: above any driver's limit. */
#define GS_MAX_CLIENTS_PER_SERVER 1024
/* The most --mps-linger accepts: a day. */
#define GS_MAX_LINGER_S 86400
/* --mps-linger=auto (the default): the shared servers stay this long after
 * the user's last job on the node, except on a GPU in an exclusive compute
 * mode, where an idle server keeps every other process off it (0 there).
 * Elsewhere an idle server costs memory only: 66 MiB of an H200's 141 GB
 * (doc/tuning.md), against a server's start and stop in every job of a
 * sweep. */
#define GS_DEFAULT_LINGER_S 60
/* --mps-fault-grace: how long a job may still run once a GPU fault has
 * ended one of its ranks' contexts (that rank cannot use the GPU again)
 * before gsrun ends it; 0 waits as long as the job runs. The evidence for
 * the default is in doc/tuning.md ("A GPU fault in a running job"). */
#define GS_DEFAULT_FAULT_GRACE_S 60
typedef struct {
    gs_mps_mode_t mps;
    gs_pct_mode_t pct_mode;
    double pct;                  /* 1..100, when pct_mode is GS_PCT_FIXED */
    char control[GS_MAX_VALUE_LEN];  /* path, or a name looked up in PATH */
    char launcher[GS_MAX_VALUE_LEN]; /* path, or a name looked up in PATH */
    int timeout_s;               /* bound on MPS start-up and on waiting for it */
    int gpu_bind;                /* give each rank its own GPU when MPS is off */
    long long mem_limit_mb;      /* MPS pinned device memory per client, 0: none */
    int clients_per_server;      /* ranks one MPS server takes, 0: the driver's limit */
    int priority_low;            /* CUDA_MPS_CLIENT_PRIORITY 1 (below normal) for the ranks */
    int share_node;              /* the user's jobs on a node share its MPS servers */
    int share_auto;              /* share_node was chosen by auto (the default) */
    int linger_s;                /* with share_node: the shared servers' stay after the last job */
    int linger_auto;             /* linger_s is GS_DEFAULT_LINGER_S, 0 on an exclusive GPU */
    int fault_grace_s;           /* a job still running this long after a GPU fault ended
                                  * a rank's context is ended; 0: never */
    int dry_run;
    int verbose;
    int prestart;     /* start each daemon's server before any rank (tuning) */
    gs_names_t names; /* how messages name the settings (GSRUN_OPTION_NAMES) */
    char site_mps[16]; /* the share Slurm's gres/mps set for the step
                        * (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), "": none */
} gs_config_t;

/* The front ends that take a setting (gs_config_key_t.fronts). */
enum {
    GS_FRONT_GSRUN = 1 << 0, /* gsrun --option (valued, or a flag) */
    GS_FRONT_BATCH = 1 << 1, /* gsrun prolog/epilog/task-prolog --option=VALUE */
    GS_FRONT_MCA = 1 << 2,   /* the Open MPI component's MCA parameter rtc_gsrun_<option> */
    GS_FRONT_SPANK = 1 << 3, /* the SPANK plugin's plugstack.conf argument (spank=) */
    GS_FRONT_RANKS = 1 << 4, /* passed by gsrun to every rank (mpirun -x GSRUN_*) */
};

/* One setting, the one place that names it: every front end's spelling,
 * which front ends take it, how its text is read and written. */
typedef struct {
    const char *option;   /* the key, and gsrun's long option without "--" */
    const char *env;      /* its GSRUN_* variable (every setting has one) */
    const char *accepted; /* for messages: what the value may be */
    const char *spank;    /* its plugstack.conf argument, NULL: not there */
    unsigned fronts;
    int valued; /* gsrun's option takes a value (else a flag: --dry-run, -v) */
    int (*parse)(gs_config_t *cfg, const char *value); /* 0 or -EINVAL; cfg unchanged then */
    void (*format)(const gs_config_t *cfg, char *buf, size_t len); /* what parse reads back */
    /* gsrun --help (GS_FRONT_GSRUN rows): the value's name ("auto|on|off",
     * "PATH"; for a flag, its variable's value: "1"), the text, and the
     * flag's one-letter form (0: none). */
    const char *metavar;
    const char *help;
    char short_opt;
} gs_config_key_t;

/* The settings, ending with a row whose option is NULL; at most
 * GS_CONFIG_KEYS_MAX rows (front ends may keep an array per row;
 * test_config checks the bound). */
#define GS_CONFIG_KEYS_MAX 32
extern const gs_config_key_t gs_config_keys[];

/* The row of option, NULL if none. */
const gs_config_key_t *gs_config_key(const char *option);

void gs_config_init(gs_config_t *cfg);

/* Sets one key (an option name from gs_config_keys) from text. origin names
 * where the value came from ("--mps" or "GSRUN_MPS") for the error message.
 * On failure cfg is unchanged. */
int gs_config_set(gs_config_t *cfg, const char *option, const char *value, const char *origin,
                  gs_error_t *err);

/* For a front end that runs inside a batch system's job step (the SPANK
 * plugin), whose own environment need not name the step: --mps-share=auto
 * means job there, as SLURM_STEP_ID makes it elsewhere. */
void gs_config_share_in_step(gs_config_t *cfg);

/* Applies every GSRUN_* variable that is set. Stops at the first bad one. */
int gs_config_load_env(gs_config_t *cfg, gs_error_t *err);

/* Writes the settings as GSRUN_* variables into this process's environment. */
int gs_config_export_env(const gs_config_t *cfg, gs_error_t *err);

/* A setting (a gs_config_keys option) as the user spells it in the front end
 * that started the job: "--mps-timeout" or "rtc_gsrun_mps_timeout". */
const char *gs_config_opt(const gs_config_t *cfg, const char *option, char *buf, size_t len);

int gs_config_parse_mps(const char *text, gs_mps_mode_t *out);
/* "off", or a size: digits with an optional unit K, M, G or T (powers of
 * 1024, an optional trailing B); at least 1 MiB. *mb is 0 for off. */
int gs_config_parse_size_mb(const char *text, long long *mb);
int gs_config_parse_percentage(const char *text, gs_pct_mode_t *mode, double *pct);
const char *gs_config_mps_name(gs_mps_mode_t mode);

/* Finds an executable: a value with a '/' must name one; a bare name is
 * looked up in PATH, then in extra_dirs (':'-separated, may be NULL).
 * Returns -ENOENT or -EACCES with a message naming what to fix. */
int gs_config_find_executable(const char *name, const char *extra_dirs, const char *what,
                              char *out, size_t outlen, gs_error_t *err);

/* hwloc's plugins that open the GPUs. A launcher (Open MPI's mpirun, its
 * ranks' MPI_Init under srun) loads hwloc for its topology, and hwloc's
 * OpenCL plugin brings up NVIDIA's OpenCL driver and a context on every
 * GPU: 0.3-0.9 s of each job's start on the lent GPUs (doc/tuning.md). No
 * launcher needs them (the GPUs stay in the topology as PCI devices). */
#define GS_LAUNCH_HWLOC_COMPONENTS "-opencl,-cuda,-nvml,-rsmi,-levelzero,-gl"

/* Leaves hwloc's GPU plugins out of the launcher gsrun starts: sets
 * HWLOC_COMPONENTS to GS_LAUNCH_HWLOC_COMPONENTS unless the user set it
 * (even empty: theirs wins). Returns 1 if it set it, 0 if not, -errno. */
int gs_config_launcher_hwloc(void);

/* Where the MPS control binary is looked for besides PATH. */
#define GS_CONTROL_SEARCH_DIRS "/usr/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin"

#endif
