/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/container.h"

#include <stdio.h>
#include <string.h>

#include "runtime/core/text.h"

/* Whether NAME=value (or NAME=anything when value is NULL) is in the block. */
static int has(const char *block, size_t len, const char *name, const char *value)
{
    size_t n;
    const char *v = gs_text_env_value(block, len, name, &n);
    return v != NULL && (value == NULL || (n == strlen(value) && strncmp(v, value, n) == 0));
}

gs_container_t gs_container_of_environ(const char *block, size_t len)
{
    if (has(block, len, "CH_RUNNING", NULL)) {
        return GS_CT_CHARLIECLOUD;
    }
    if (has(block, len, "APPTAINER_CONTAINER", NULL) ||
        has(block, len, "SINGULARITY_CONTAINER", NULL)) {
        return GS_CT_APPTAINER;
    }
    if (has(block, len, "container", "podman")) {
        return GS_CT_PODMAN;
    }
    return GS_CT_NONE;
}

const char *gs_container_name(gs_container_t ct)
{
    static const char *const names[] = {"", "Charliecloud", "Apptainer", "podman"};
    return (unsigned)ct < sizeof(names) / sizeof(names[0]) ? names[ct] : "";
}

void gs_container_bind_dir(const char *pipe, char *out, size_t len)
{
    const char *p = pipe, *end = NULL;
    while (p != NULL && *p == '/') {
        const char *name = p + 1, *next = strchr(name, '/');
        size_t n = next != NULL ? (size_t)(next - name) : strlen(name);
        if (n == 5 && strncmp(name, "gsrun", 5) == 0) {
            /* root's base (/run/gsrun): the job's own dir below it */
            end = next != NULL ? strchr(next + 1, '/') : NULL;
            end = end != NULL ? end : name + n + (next != NULL ? strlen(next) : 0);
            break;
        }
        if (n > 5 && strncmp(name, "gsrun", 5) == 0 && (name[5] == '-' || name[5] == '.')) {
            end = name + n;
            break;
        }
        p = next;
    }
    if (end == NULL) {
        snprintf(out, len, "%s", pipe);
    } else {
        snprintf(out, len, "%.*s", (int)(end - pipe), pipe);
    }
}

void gs_container_bind_hint(gs_container_t ct, const char *dir, char *out, size_t len)
{
    switch (ct) {
    case GS_CT_CHARLIECLOUD:
        snprintf(out, len, "ch-run -b %s:%s", dir, dir);
        break;
    case GS_CT_APPTAINER:
        snprintf(out, len, "apptainer exec -B %s", dir);
        break;
    case GS_CT_PODMAN:
        snprintf(out, len, "podman run -v %s:%s", dir, dir);
        break;
    default:
        snprintf(out, len,
                 "podman run -v %s:%s, ch-run -b %s:%s, apptainer exec -B %s, srun "
                 "--container-mounts=%s:%s (Pyxis), enroot start -m %s:%s",
                 dir, dir, dir, dir, dir, dir, dir, dir, dir);
        break;
    }
}
