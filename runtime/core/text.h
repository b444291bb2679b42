/* SPDX-License-Identifier: BSD-3-Clause */
/* Small string helpers every layer uses. */
#ifndef GS_TEXT_H
#define GS_TEXT_H

#include <stddef.h>

/* Removes every trailing character of s that is in chars (as a line read
 * from a file or a daemon ends in "\n", "\r\n" or spaces). Returns the new
 * length. */
size_t gs_text_rstrip(char *s, const char *chars);

/* Whether s holds a control byte (below 0x20, or 0x7f). */
int gs_text_has_control(const char *s);

/* A copy of in for an error line, into out (truncated to len): every
 * control byte (a newline, an escape sequence's ESC) as '?', so that what a
 * user or another user put in a value cannot move the cursor, clear a
 * terminal or forge a line. Returns out. */
char *gs_text_printable(const char *in, char *out, size_t len);

/* The value of name in an environment block (NUL-separated NAME=value
 * entries, len bytes, as /proc/PID/environ holds), or NULL; *vlen (may be
 * NULL) gets its length within the block. */
const char *gs_text_env_value(const char *block, size_t len, const char *name, size_t *vlen);

#endif
