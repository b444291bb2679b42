/* SPDX-License-Identifier: BSD-3-Clause */
/* Small string helpers every layer uses. */
#ifndef GS_TEXT_H
#define GS_TEXT_H

#include <stddef.h>

/* Removes every trailing character of s that is in chars (as a line read
 * from a file or a daemon ends in "\n", "\r\n" or spaces). Returns the new
 * length. */
size_t gs_text_rstrip(char *s, const char *chars);

#endif
