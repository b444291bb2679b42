/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/text.h"

#include <string.h>

size_t gs_text_rstrip(char *s, const char *chars)
{
    size_t n = strlen(s);
    while (n > 0 && strchr(chars, s[n - 1]) != NULL) {
        s[--n] = '\0';
    }
    return n;
}

char *gs_text_printable(const char *in, char *out, size_t len)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p != '\0' && n + 1 < len; p++) {
        out[n++] = *p < 0x20 || *p == 0x7f ? '?' : (char)*p;
    }
    if (len > 0) {
        out[n] = '\0';
    }
    return out;
}

int gs_text_has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            return 1;
        }
    }
    return 0;
}

const char *gs_text_env_value(const char *block, size_t len, const char *name, size_t *vlen)
{
    size_t k = strlen(name);
    for (size_t i = 0; i < len;) {
        const char *v = block + i;
        size_t n = strnlen(v, len - i);
        if (n > k && strncmp(v, name, k) == 0 && v[k] == '=') {
            if (vlen != NULL) {
                *vlen = n - k - 1;
            }
            return v + k + 1;
        }
        i += n + 1;
    }
    return NULL;
}
