/* SPDX-License-Identifier: BSD-3-Clause */
/* Records as tables of fields: the node state and status files (and the
 * JSON of `gsrun status`) are each a table of rows (name, type, where the
 * value lives, how it is written and read), shaped like gs_config_keys, so
 * that a new field is one row and every format loops over the rows.
 *
 * A file is "key value" lines; values run to the end of the line. Files
 * are published whole: written under a temporary name, then renamed. */
#ifndef GS_RECORD_H
#define GS_RECORD_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/core/gs_error.h"

typedef enum {
    GS_REC_INT = 0, /* int */
    GS_REC_LLONG,   /* long long */
    GS_REC_STR,     /* char[size] */
    GS_REC_CUSTOM,  /* format and parse below */
} gs_rec_type_t;

enum {
    GS_REC_FILE = 1 << 0,     /* in the file */
    GS_REC_JSON = 1 << 1,     /* in the JSON (under json, else name) */
    GS_REC_OPTIONAL = 1 << 2, /* written only when set (not 0, not "") */
    GS_REC_POSITIVE = 1 << 3, /* read: at least 1 */
    GS_REC_NULL_EMPTY = 1 << 4, /* JSON: "" is null */
    GS_REC_NULL_NEG = 1 << 5,   /* JSON: a number below 0 is null (not known) */
};

typedef struct gs_rec_field {
    const char *name; /* the file's key */
    const char *json; /* the JSON's key, NULL: name */
    gs_rec_type_t type;
    unsigned flags;
    size_t off;  /* the value in the record */
    size_t size; /* GS_REC_STR: the buffer's size */
    /* GS_REC_CUSTOM: the value's text (0, or 1 to leave the line out) and
     * its reading (0 or -EINVAL). */
    int (*format)(const void *rec, char *buf, size_t len);
    int (*parse)(void *rec, const char *val);
    /* JSON of a derived value (no file line): ctx is the caller's. */
    void (*json_fn)(FILE *f, const void *rec, const void *ctx);
} gs_rec_field_t;

#define GS_REC_END {NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL}

/* Appends printf's text at buf + *used (len bytes in all): 0, or -ENOSPC
 * when it does not fit (then nothing is counted). */
int gs_rec_put(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Appends "<prefix><name> <value>\n" for each file row of rec (prefix may
 * be ""): 0, or -ENOSPC when buf is full. *used is where to append. */
int gs_rec_format(const gs_rec_field_t *rows, const void *rec, const char *prefix, char *buf,
                  size_t len, size_t *used);

/* One "key value" line: 0 when a row took it, -ENOENT when no row has that
 * key, -EINVAL when the value is malformed. */
int gs_rec_parse(const gs_rec_field_t *rows, void *rec, const char *key, const char *val);

/* The JSON members of rec (without braces), in the rows' order. */
void gs_rec_json(FILE *f, const gs_rec_field_t *rows, const void *rec, const void *ctx);
void gs_rec_json_str(FILE *f, const char *s);

/* Every string field of rec through clean (gsrun status shows what a job's
 * user wrote). */
void gs_rec_each_str(const gs_rec_field_t *rows, void *rec, void (*clean)(char *));

/* Writes text to dir/name whole: a temporary file (O_EXCL, 0600, never
 * through a link), then rename. A failure leaves the old file. */
int gs_rec_publish(const char *dir, const char *name, const char *text, gs_error_t *err);

/* The line of text at p, split into key and value in line (len bytes):
 * returns where the next line starts, NULL at the end of the text. A line
 * that does not fit sets *too_long (and reads as an empty key). */
const char *gs_rec_next_line(const char *p, char *line, size_t len, char **key, char **val,
                             int *too_long);

#endif
