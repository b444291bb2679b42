/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/record.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/core/limits.h"

#define AT(rec, row, type) ((type *)((char *)(rec) + (row)->off))
#define CAT(rec, row, type) ((const type *)((const char *)(rec) + (row)->off))

/* The value's text; 1 when an optional row is unset (no line). */
static int value_text(const gs_rec_field_t *r, const void *rec, char *buf, size_t len)
{
    switch (r->type) {
    case GS_REC_INT:
        if ((r->flags & GS_REC_OPTIONAL) && *CAT(rec, r, int) == 0) {
            return 1;
        }
        snprintf(buf, len, "%d", *CAT(rec, r, int));
        return 0;
    case GS_REC_LLONG:
        if ((r->flags & GS_REC_OPTIONAL) && *CAT(rec, r, long long) == 0) {
            return 1;
        }
        snprintf(buf, len, "%lld", *CAT(rec, r, long long));
        return 0;
    case GS_REC_STR:
        if ((r->flags & GS_REC_OPTIONAL) && CAT(rec, r, char)[0] == '\0') {
            return 1;
        }
        snprintf(buf, len, "%s", CAT(rec, r, char));
        return 0;
    default:
        return r->format(rec, buf, len);
    }
}

int gs_rec_put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = *used < len ? vsnprintf(buf + *used, len - *used, fmt, ap) : -1;
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *used) {
        return -ENOSPC;
    }
    *used += (size_t)n;
    return 0;
}

int gs_rec_format(const gs_rec_field_t *rows, const void *rec, const char *prefix, char *buf,
                  size_t len, size_t *used)
{
    char val[GS_LINE_MAX];
    for (const gs_rec_field_t *r = rows; r->name != NULL; r++) {
        if ((r->flags & GS_REC_FILE) && value_text(r, rec, val, sizeof(val)) == 0 &&
            gs_rec_put(buf, len, used, "%s%s %s\n", prefix, r->name, val) != 0) {
            return -ENOSPC;
        }
    }
    return 0;
}

static int parse_ll(const char *val, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (errno != 0 || end == val || *end != '\0') {
        return -EINVAL;
    }
    *out = v;
    return 0;
}

int gs_rec_parse(const gs_rec_field_t *rows, void *rec, const char *key, const char *val)
{
    for (const gs_rec_field_t *r = rows; r->name != NULL; r++) {
        if (!(r->flags & GS_REC_FILE) || strcmp(r->name, key) != 0) {
            continue;
        }
        long long v = 0;
        switch (r->type) {
        case GS_REC_INT:
            if (parse_ll(val, &v) != 0 || v < INT_MIN || v > INT_MAX) {
                return -EINVAL;
            }
            *AT(rec, r, int) = (int)v;
            break;
        case GS_REC_LLONG:
            if (parse_ll(val, &v) != 0) {
                return -EINVAL;
            }
            *AT(rec, r, long long) = v;
            break;
        case GS_REC_STR:
            if (strlen(val) >= r->size) {
                return -EINVAL;
            }
            snprintf(AT(rec, r, char), r->size, "%s", val);
            return 0;
        default:
            return r->parse(rec, val);
        }
        return (r->flags & GS_REC_POSITIVE) && v < 1 ? -EINVAL : 0;
    }
    return -ENOENT;
}

void gs_rec_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

void gs_rec_json(FILE *f, const gs_rec_field_t *rows, const void *rec, const void *ctx)
{
    int first = 1;
    for (const gs_rec_field_t *r = rows; r->name != NULL; r++) {
        if (!(r->flags & GS_REC_JSON)) {
            continue;
        }
        fprintf(f, "%s\"%s\":", first ? "" : ",", r->json != NULL ? r->json : r->name);
        first = 0;
        if (r->json_fn != NULL) {
            r->json_fn(f, rec, ctx);
        } else if ((r->flags & GS_REC_NULL_NEG) &&
                   (r->type == GS_REC_INT ? *CAT(rec, r, int) < 0
                                          : r->type == GS_REC_LLONG && *CAT(rec, r, long long) < 0)) {
            fputs("null", f);
        } else if (r->type == GS_REC_INT) {
            fprintf(f, "%d", *CAT(rec, r, int));
        } else if (r->type == GS_REC_LLONG) {
            fprintf(f, "%lld", *CAT(rec, r, long long));
        } else if (r->type == GS_REC_STR && (r->flags & GS_REC_NULL_EMPTY) &&
                   CAT(rec, r, char)[0] == '\0') {
            fputs("null", f);
        } else if (r->type == GS_REC_STR) {
            gs_rec_json_str(f, CAT(rec, r, char));
        } else {
            fputs("null", f);
        }
    }
}

void gs_rec_each_str(const gs_rec_field_t *rows, void *rec, void (*clean)(char *))
{
    for (const gs_rec_field_t *r = rows; r->name != NULL; r++) {
        if (r->type == GS_REC_STR) {
            clean(AT(rec, r, char));
        }
    }
}

int gs_rec_publish(const char *dir, const char *name, const char *text, gs_error_t *err)
{
    char tmp[GS_PATH_MAX], final[GS_PATH_MAX];
    size_t len = strlen(text);

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.%d", dir, name, (int)getpid()) >= sizeof(tmp) ||
        (size_t)snprintf(final, sizeof(final), "%s/%s", dir, name) >= sizeof(final)) {
        return gs_error_set(err, ENAMETOOLONG, "the path of '%s' in '%s' is too long", name, dir);
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) {
        /* Left by this PID's killed predecessor (PIDs are reused). */
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    }
    if (fd < 0) {
        return gs_error_set(err, errno, "cannot write '%s': %s", tmp, strerror(errno));
    }
    if (write(fd, text, len) != (ssize_t)len || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return gs_error_set(err, e, "cannot write '%s': %s", tmp, strerror(e));
    }
    if (rename(tmp, final) != 0) {
        int e = errno;
        unlink(tmp);
        return gs_error_set(err, e, "cannot publish '%s': %s", final, strerror(e));
    }
    return 0;
}

const char *gs_rec_next_line(const char *p, char *line, size_t len, char **key, char **val,
                             int *too_long)
{
    *too_long = 0;
    if (p == NULL || *p == '\0') {
        return NULL;
    }
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (n >= len) {
        *too_long = 1;
        n = 0;
    }
    memcpy(line, p, n);
    line[n] = '\0';
    *key = line;
    *val = strchr(line, ' ');
    if (*val != NULL) {
        *(*val)++ = '\0';
    } else {
        *val = line + n;
    }
    return p + (nl ? (size_t)(nl - p) + 1 : strlen(p));
}
