/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/status_end.h"

#include <stdio.h>
#include <string.h>

/* What a mark becomes for status. */
static void words(int advice, int status, char *buf, size_t len)
{
    if (status > 0) {
        snprintf(buf, len, " (the job ended with status %d: see its output)", status);
    } else if (!advice) {
        buf[0] = '\0';
    } else if (status == 0) {
        snprintf(buf, len,
                 " (the job ended with status 0: a program without CUDA runs as well "
                 "with --mps=off)");
    } else {
        snprintf(buf, len,
                 " (if the job ended well, a program without CUDA runs as well with "
                 "--mps=off)");
    }
}

void gs_status_end_fill(const char *line, int status, char *out, size_t len)
{
    static const char *const marks[2] = {GS_END_MARK_STATUS, GS_END_MARK_ADVICE};
    size_t used = 0;
    if (len == 0) {
        return;
    }
    out[0] = '\0';
    while (*line != '\0' && used + 1 < len) {
        const char *at = strchr(line, '{');
        int m = -1;
        for (int i = 0; at != NULL && i < 2 && m < 0; i++) {
            m = strncmp(at, marks[i], strlen(marks[i])) == 0 ? i : -1;
        }
        size_t n = at == NULL ? strlen(line) : (size_t)(at - line) + (m < 0);
        int w = snprintf(out + used, len - used, "%.*s", (int)n, line);
        used += w > 0 ? (size_t)w : 0;
        used = used < len ? used : len - 1;
        line += n;
        if (m >= 0) {
            char fill[160];
            words(m == 1, status, fill, sizeof(fill));
            w = snprintf(out + used, len - used, "%s", fill);
            used += w > 0 ? (size_t)w : 0;
            used = used < len ? used : len - 1;
            line += strlen(marks[m]);
        }
    }
}
