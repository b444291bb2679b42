/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/wire/lease.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* snprintf's count as a length, or -ENOSPC: a cut line is never sent. */
static int fits(int n, size_t len)
{
    return n >= 0 && (size_t)n < len ? n : -ENOSPC;
}

/* Whether line starts with word and a space. */
static int starts(const char *line, const char *word)
{
    size_t k = strlen(word);
    return strncmp(line, word, k) == 0 && line[k] == ' ';
}

/* A field the receiver reads with %s: one word, not empty. */
static int one_word(const char *s)
{
    return s[0] != '\0' && strpbrk(s, " \t\r\n") == NULL;
}

gs_lease_kind_t gs_lease_kind(const char *line)
{
    return starts(line, "lost")     ? GS_LEASE_LOST
           : starts(line, "fault")  ? GS_LEASE_FAULT
           : starts(line, "renew")  ? GS_LEASE_RENEW
           : starts(line, "wedged") ? GS_LEASE_WEDGED
                                    : GS_LEASE_OTHER;
}

int gs_lease_fmt_lease(char *buf, size_t len, const gs_lease_req_t *l)
{
    if (!one_word(l->job)) {
        return -EINVAL;
    }
    int w = fits(snprintf(buf, len, "lease %d %s %d", l->linger_s, l->job, l->n), len);
    size_t used = w < 0 ? 0 : (size_t)w;
    for (int i = 0; w >= 0 && i < l->n; i++) {
        if (!one_word(l->uuid[i])) {
            return -EINVAL;
        }
        w = fits(snprintf(buf + used, len - used, " %s %d", l->uuid[i], l->clients[i]), len - used);
        used += w < 0 ? 0 : (size_t)w;
    }
    if (w >= 0) {
        w = fits(snprintf(buf + used, len - used, "\n"), len - used);
    }
    return w < 0 ? w : (int)used + w;
}

int gs_lease_parse_lease(const char *line, int max, gs_lease_req_t *l)
{
    int used = 0;
    memset(l, 0, sizeof(*l));
    if (max > GS_MAX_GPUS) {
        max = GS_MAX_GPUS;
    }
    if (sscanf(line, "lease %d %95s %d%n", &l->linger_s, l->job, &l->n, &used) != 3 ||
        l->linger_s < 0 || l->linger_s > 1 << 20 || l->n < 1 || l->n > max) {
        return -EINVAL;
    }
    line += used;
    for (int i = 0; i < l->n; i++) {
        if (sscanf(line, " %95s %d%n", l->uuid[i], &l->clients[i], &used) != 2 ||
            l->clients[i] < 1 || l->clients[i] > 1 << 20) {
            return -EINVAL;
        }
        line += used;
    }
    return 0;
}

int gs_lease_fmt_leased(char *buf, size_t len, int n, const int *server)
{
    int w = fits(snprintf(buf, len, "ok"), len);
    size_t used = w < 0 ? 0 : (size_t)w;
    for (int i = 0; w >= 0 && i < n; i++) {
        w = fits(snprintf(buf + used, len - used, " %d", server[i]), len - used);
        used += w < 0 ? 0 : (size_t)w;
    }
    if (w >= 0) {
        w = fits(snprintf(buf + used, len - used, "\n"), len - used);
    }
    return w < 0 ? w : (int)used + w;
}

int gs_lease_parse_leased(const char *line, int n, int max, int *server)
{
    int used = 0;
    if (strncmp(line, "ok", 2) != 0) {
        return -EINVAL;
    }
    line += 2;
    for (int i = 0; i < n; i++) {
        if (sscanf(line, " %d%n", &server[i], &used) != 1 || server[i] < 0 || server[i] >= max) {
            return -EINVAL;
        }
        line += used;
    }
    return 0;
}

int gs_lease_fmt_refusal(char *buf, size_t len, const char *why)
{
    return fits(snprintf(buf, len, "error %s\n", why), len);
}

int gs_lease_parse_refusal(const char *line, const char **why)
{
    if (!starts(line, "error")) {
        return -EINVAL;
    }
    *why = line + strlen("error ");
    return 0;
}

int gs_lease_fmt_gpus(char *buf, size_t len, int count, int cuda, int beyond, const char *reason)
{
    return fits(
        snprintf(buf, len, "gpus %d %d %d %s\n", count, cuda, beyond, count > 0 ? "-" : reason),
        len);
}

int gs_lease_parse_gpus(const char *buf, int *count, int *cuda, int *beyond, char *reason,
                        size_t reasonlen, const char **body)
{
    int at = 0;
    if (sscanf(buf, "gpus %d %d %d %n", count, cuda, beyond, &at) != 3 || at == 0 || *count < 0 ||
        *count > GS_MAX_GPUS) {
        return -EINVAL;
    }
    snprintf(reason, reasonlen, "%.*s", (int)strcspn(buf + at, "\n"), buf + at);
    *body = strchr(buf, '\n');
    return 0;
}

static const char *const lost_words[] = {"signal", "status", "wedged"};

const char *gs_lease_lost_word(gs_lease_lost_t how)
{
    return lost_words[how];
}

int gs_lease_fmt_lost(char *buf, size_t len, int server, gs_lease_lost_t how, int code)
{
    return fits(snprintf(buf, len, "lost %d %s %d\n", server, lost_words[how], code), len);
}

int gs_lease_parse_lost(const char *line, int *server, gs_lease_lost_t *how, int *code)
{
    char word[16];
    if (sscanf(line, "lost %d %15s %d", server, word, code) != 3) {
        return -EINVAL;
    }
    for (int i = 0; i < (int)(sizeof(lost_words) / sizeof(lost_words[0])); i++) {
        if (strcmp(word, lost_words[i]) == 0) {
            *how = (gs_lease_lost_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

int gs_lease_fmt_fault(char *buf, size_t len, int server, const char *at, const pid_t *pids, int n)
{
    char word[32];
    snprintf(word, sizeof(word), "%s", at != NULL && at[0] ? at : "?");
    for (char *p = word; *p != '\0'; p++) {
        *p = *p == ' ' ? 'T' : *p; /* one word on the wire */
    }
    int w = fits(snprintf(buf, len, "fault %d %s ", server, word), len);
    size_t used = w < 0 ? 0 : (size_t)w;
    for (int i = 0; w >= 0 && i < n; i++) {
        w = fits(snprintf(buf + used, len - used, "%s%d", i ? " " : "", (int)pids[i]), len - used);
        used += w < 0 ? 0 : (size_t)w;
    }
    if (w >= 0) {
        w = fits(snprintf(buf + used, len - used, "\n"), len - used);
    }
    return w < 0 ? w : (int)used + w;
}

int gs_lease_parse_fault(const char *line, gs_lease_fault_t *f, pid_t *pids, int max)
{
    int at_end = 0;
    memset(f, 0, sizeof(*f));
    if (sscanf(line, "fault %d %31s %n", &f->server, f->at, &at_end) != 2 || at_end == 0) {
        return -EINVAL;
    }
    for (const char *p = line + at_end; f->npids < max;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 1) {
            break;
        }
        pids[f->npids++] = (pid_t)v;
        p = end;
    }
    for (char *p = f->at; *p != '\0'; p++) {
        *p = *p == 'T' ? ' ' : *p;
    }
    return 0;
}

int gs_lease_fmt_renew(char *buf, size_t len, int server)
{
    return fits(snprintf(buf, len, "renew %d\n", server), len);
}

int gs_lease_parse_renew(const char *line, int *server)
{
    return starts(line, "renew") && sscanf(line + strlen("renew "), "%d", server) == 1 ? 0
                                                                                       : -EINVAL;
}

int gs_lease_fmt_wedged(char *buf, size_t len, int server)
{
    return fits(snprintf(buf, len, "wedged %d\n", server), len);
}

int gs_lease_parse_wedged(const char *line, int *server)
{
    return sscanf(line, "wedged %d", server) == 1 ? 0 : -EINVAL;
}

int gs_lease_fmt_wedged_told(char *buf, size_t len, const char *text)
{
    return fits(snprintf(buf, len, "wedged %s\n", text), len);
}

int gs_lease_parse_wedged_told(const char *line, const char **text)
{
    if (!starts(line, "wedged")) {
        return -EINVAL;
    }
    *text = line + strlen("wedged ");
    return 0;
}
