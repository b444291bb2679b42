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
