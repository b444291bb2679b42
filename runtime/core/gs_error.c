/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/gs_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int gs_error_set(gs_error_t *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof(err->text), fmt, ap);
        va_end(ap);
    }
    return code > 0 ? -code : (code == 0 ? -1 : code);
}
