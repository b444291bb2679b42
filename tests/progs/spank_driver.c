/* SPDX-License-Identifier: BSD-3-Clause */
/* spank_driver: runs gsrun_spank.so's hooks as slurmstepd would, without
 * Slurm, so that the plugin's provisioning path can run where Slurm is not
 * installed (the GPU machine) against real MPS. It provides the SPANK calls
 * the plugin makes, over this process's environment.
 *
 *   spank_driver PLUGIN [--arg A]... [--opt NAME=VALUE]... -- PROGRAM [ARGS]
 *       one task: init (plugstack.conf's arguments A), the srun options,
 *       init_post_opt, user_init, task_init (the hooks the plugin has), then
 *       exec PROGRAM with the task's environment,
 *       so that the task's PID is the program's, as under slurmstepd
 *   spank_driver PLUGIN [--arg A]... [--opt NAME=VALUE]... --exit
 *       the step's end on this node: init, options, init_post_opt,
 *       user_init, exit (waits for the node agent to finish)
 * The task's local id and the node's task count come from the launcher that
 * runs the driver (OMPI_COMM_WORLD_LOCAL_RANK/_SIZE under mpirun); the job
 * and step ids from SPANK_DRIVER_JOB and SPANK_DRIVER_STEP. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#define MAX_OPTS 16
static struct spank_option opts[MAX_OPTS];
static int nopts;

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

int spank_remote(spank_t sp)
{
    return 1;
}

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
    if (nopts == MAX_OPTS) {
        return ESPANK_ERROR;
    }
    opts[nopts++] = *opt;
    return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
    va_list ap;
    spank_err_t rc = ESPANK_SUCCESS;
    va_start(ap, item);
    switch (item) {
    case S_JOB_ID:
        *va_arg(ap, uint32_t *) = (uint32_t)env_int("SPANK_DRIVER_JOB", 1);
        break;
    case S_JOB_STEPID:
        *va_arg(ap, uint32_t *) = (uint32_t)env_int("SPANK_DRIVER_STEP", 0);
        break;
    case S_JOB_LOCAL_TASK_COUNT:
        *va_arg(ap, uint32_t *) = (uint32_t)env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
        break;
    case S_TASK_ID:
        *va_arg(ap, int *) = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
        break;
    case S_JOB_UID:
        *va_arg(ap, uid_t *) = getuid();
        break;
    case S_JOB_GID:
        *va_arg(ap, gid_t *) = getgid();
        break;
    case S_JOB_ENV:
        *va_arg(ap, char ***) = environ;
        break;
    default:
        rc = ESPANK_BAD_ARG;
    }
    va_end(ap);
    return rc;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
    const char *v = getenv(var);
    if (v == NULL) {
        return ESPANK_ENV_NOEXIST;
    }
    if ((int)strlen(v) >= len) {
        return ESPANK_NOSPACE;
    }
    strcpy(buf, v);
    return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
    return setenv(var, val, overwrite) == 0 ? ESPANK_SUCCESS : ESPANK_ERROR;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
    return unsetenv(var) == 0 ? ESPANK_SUCCESS : ESPANK_ERROR;
}

/* Slurm's log calls, as slurmstepd's log would have them. */
static void say(const char *what, const char *fmt, va_list ap)
{
    fprintf(stderr, "spank_driver: %s: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void slurm_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("error", fmt, ap);
    va_end(ap);
}

void slurm_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("info", fmt, ap);
    va_end(ap);
}

static spank_f *hook(void *h, const char *name)
{
    spank_f *f = (spank_f *)dlsym(h, name);
    if (f == NULL) {
        fprintf(stderr, "spank_driver: the plugin has no %s\n", name);
        exit(2);
    }
    return f;
}

int main(int argc, char **argv)
{
    char *args[32], *given[MAX_OPTS];
    int nargs = 0, ngiven = 0, at_exit = 0, i;

    if (argc < 3) {
        fprintf(stderr, "usage: spank_driver PLUGIN [--arg A]... [--opt N=V]... -- PROGRAM "
                        "[ARGS] | --exit\n");
        return 2;
    }
    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--arg") == 0 && i + 1 < argc && nargs < 32) {
            args[nargs++] = argv[++i];
        } else if (strcmp(argv[i], "--opt") == 0 && i + 1 < argc && ngiven < MAX_OPTS) {
            given[ngiven++] = argv[++i];
        } else if (strcmp(argv[i], "--exit") == 0) {
            at_exit = 1;
        } else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
    }
    if (!at_exit && i >= argc) {
        fprintf(stderr, "spank_driver: no program given\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "spank_driver: %s\n", dlerror());
        return 2;
    }
    spank_t sp = NULL;
    if (hook(h, "slurm_spank_init")(sp, nargs, args) != 0) {
        return 1;
    }
    /* slurmstepd calls the callbacks of the options srun was given. */
    for (int g = 0; g < ngiven; g++) {
        char *eq = strchr(given[g], '=');
        size_t n = eq != NULL ? (size_t)(eq - given[g]) : strlen(given[g]);
        int found = 0;
        for (int o = 0; o < nopts; o++) {
            if (strlen(opts[o].name) == n && strncmp(opts[o].name, given[g], n) == 0) {
                found = 1;
                opts[o].cb(opts[o].val, eq != NULL ? eq + 1 : "", 1);
            }
        }
        if (!found) {
            fprintf(stderr, "spank_driver: the plugin has no option --%.*s\n", (int)n, given[g]);
            return 2;
        }
    }
    /* Hooks a plugin may leave out. */
    static const char *const optional[] = {"slurm_spank_init_post_opt", "slurm_spank_user_init",
                                           NULL};
    for (const char *const *o = optional; *o != NULL; o++) {
        spank_f *f = (spank_f *)dlsym(h, *o);
        if (f != NULL) {
            f(sp, nargs, args);
        }
    }
    if (at_exit) {
        return hook(h, "slurm_spank_exit")(sp, nargs, args);
    }
    if (hook(h, "slurm_spank_task_init")(sp, nargs, args) != 0) {
        return 1;
    }
    execvp(argv[i], argv + i);
    perror(argv[i]);
    return 127;
}
