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

int gs_config_launcher_hwloc(void)
{
    if (getenv("HWLOC_COMPONENTS") != NULL) {
        return 0;
    }
    return setenv("HWLOC_COMPONENTS", GS_LAUNCH_HWLOC_COMPONENTS, 1) == 0 ? 1 : -errno;
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
