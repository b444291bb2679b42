/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/rank/helper.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GS_PKGLIBEXECDIR
#define GS_PKGLIBEXECDIR "/usr/local/libexec/gsrun"
#endif

int gs_helper_path(const char *name, char *out, size_t len, gs_error_t *err)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        if ((size_t)snprintf(out, len, "%s/%s", dirname(self), name) < len &&
            access(out, X_OK) == 0) {
            return 0;
        }
    }
    if ((size_t)snprintf(out, len, "%s/%s", GS_PKGLIBEXECDIR, name) < len &&
        access(out, X_OK) == 0) {
        return 0;
    }
    return gs_error_set(err, ENOENT,
                        "helper program %s was found neither beside this program nor in %s; "
                        "reinstall gsrun",
                        name, GS_PKGLIBEXECDIR);
}
