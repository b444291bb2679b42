/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/gpu/mps_health.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/limits.h"

void gs_mps_health_init(gs_mps_health_t *h)
{
    memset(h, 0, sizeof(*h));
}

void gs_mps_health_dismiss(gs_mps_health_t *h)
{
    h->faults -= h->faults > 0;
    h->fault = h->listing = h->listed = 0;
    h->nheld = h->nhit = 0;
    h->named = 0;
    h->at[0] = '\0';
}

/* The line after its "[date time Kind PID] " prefix, and the time. */
static const char *body(const char *line, char *at, size_t len)
{
    at[0] = '\0';
    if (line[0] != '[') {
        return line;
    }
    const char *end = strchr(line, ']');
    if (end == NULL) {
        return line;
    }
    /* "[2026-11-27 10:43:03.409 Server   553]": the first two words. */
    const char *sp = strchr(line + 1, ' ');
    sp = sp != NULL && sp < end ? strchr(sp + 1, ' ') : NULL;
    if (sp != NULL && sp < end && (size_t)(sp - line - 1) < len) {
        memcpy(at, line + 1, (size_t)(sp - line - 1));
        at[sp - line - 1] = '\0';
    }
    return end[1] == ' ' ? end + 2 : end + 1;
}

static int find(const pid_t *pids, int n, pid_t p)
{
    for (int i = 0; i < n; i++) {
        if (pids[i] == p) {
            return i;
        }
    }
    return -1;
}

/* A line that is one PID alone (the sticky list's rows): the PID, else 0. */
static pid_t lone_pid(const char *s)
{
    char *end;
    while (*s == ' ') {
        s++;
    }
    if (!isdigit((unsigned char)*s)) {
        return 0;
    }
    long v = strtol(s, &end, 10);
    while (*end == ' ' || *end == '\r') {
        end++;
    }
    return *end == '\0' && v > 0 && v < (1L << 30) ? (pid_t)v : 0;
}

int gs_mps_health_settle(gs_mps_health_t *h)
{
    if (!h->listing) {
        return 0;
    }
    h->listing = 0;
    h->listed = 1;
    return GS_MPS_EV_LISTED;
}

/* A new fault (or the first line of one): the last one's list is history;
 * clients that still hold an earlier fault hold this one too. */
static int begin_fault(gs_mps_health_t *h, pid_t named, const char *at)
{
    if (h->fault && !h->listed) {
        return 0; /* the same fault's second line */
    }
    if (!h->fault) {
        h->nheld = 0;
    }
    h->nhit = 0;
    h->listed = 0;
    h->named = named;
    h->faults++;
    h->fault = 1;
    /* The log is the user's to write: its time field reaches the job's
     * output and status, so only a time's characters are kept. */
    size_t k = 0;
    for (const char *c = at; *c != '\0' && k + 1 < sizeof(h->at); c++) {
        if ((*c >= '0' && *c <= '9') || *c == ' ' || *c == ':' || *c == '.' || *c == '-') {
            h->at[k++] = *c;
        }
    }
    h->at[k] = '\0';
    return GS_MPS_EV_FAULT;
}

static void client_event(gs_mps_health_t *h, pid_t p, int kind)
{
    if (p <= 0) {
        return;
    }
    if (h->nev >= GS_MPS_HEALTH_EVENTS) {
        h->ev_dropped++;
        return;
    }
    h->ev_pid[h->nev] = p;
    h->ev_kind[h->nev++] = (unsigned char)kind;
}

/* The PID of the line's writer ("[T Client 825] ..."), or 0. */
static pid_t writer(const char *line, const char *kind)
{
    const char *k = strstr(line, kind);
    const char *end = strchr(line, ']');
    if (line[0] != '[' || k == NULL || end == NULL || k > end) {
        return 0;
    }
    return (pid_t)atoi(k + strlen(kind));
}

int gs_mps_health_take(gs_mps_health_t *h, pid_t *pids, int *kinds, int max)
{
    int n = h->nev < max ? h->nev : max;
    for (int i = 0; i < n; i++) {
        pids[i] = h->ev_pid[i];
        kinds[i] = h->ev_kind[i];
    }
    h->nev = 0;
    return n;
}

void gs_mps_health_skip(gs_mps_health_t *h, const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        h->offset = st.st_size;
        h->npart = 0;
    }
    if (fd >= 0) {
        close(fd);
    }
}

int gs_mps_health_line(gs_mps_health_t *h, const char *line)
{
    char at[32];
    const char *b = body(line, at, sizeof(at));
    int ev = 0;
    pid_t p;

    if (h->listing) {
        if ((p = lone_pid(b)) > 0) {
            if (find(h->hit, h->nhit, p) < 0 && h->nhit < GS_MPS_HEALTH_PIDS) {
                h->hit[h->nhit++] = p;
            }
            if (find(h->held, h->nheld, p) < 0 && h->nheld < GS_MPS_HEALTH_PIDS) {
                h->held[h->nheld++] = p;
            }
            return 0;
        }
        ev |= gs_mps_health_settle(h);
    }
    /* A fault's first line is either of these (the client's comes first
     * on driver 580); the second of one fault adds nothing. */
    int client = strstr(b, "encountered a fatal GPU error") != NULL;
    if (client || strstr(b, "Server is handling a fatal GPU error") != NULL) {
        const char *q = client ? strstr(b, "PID: ") : NULL;
        return ev | begin_fault(h, q != NULL ? (pid_t)atoi(q + 5) : 0, at);
    }
    if (strstr(b, "have a sticky error set") != NULL) {
        h->listing = 1;
        return ev;
    }
    if (strncmp(b, "Status of client {PID: ", 23) == 0 && strstr(b, "} is ACTIVE") != NULL) {
        client_event(h, (pid_t)atoi(b + 23), GS_MPS_CLIENT_ACTIVE);
        return ev;
    }
    if (strstr(b, "which is not a valid GPU ID") != NULL) {
        client_event(h, writer(line, " Client "), GS_MPS_CLIENT_NODEVICE);
        return ev;
    }
    if (strncmp(b, "Client process ", 15) == 0 && strstr(b, " disconnected") != NULL &&
        (p = (pid_t)atoi(b + 15)) > 0) {
        client_event(h, p, GS_MPS_CLIENT_GONE);
        int i = find(h->held, h->nheld, p);
        if (i >= 0) {
            h->held[i] = h->held[--h->nheld];
            if (h->nheld == 0 && h->fault && h->listed) {
                h->fault = 0;
                ev |= GS_MPS_EV_RECOVERED;
            }
        }
    }
    return ev;
}

int gs_mps_health_prune(gs_mps_health_t *h, int (*alive)(pid_t pid))
{
    for (int i = h->nheld - 1; i >= 0; i--) {
        if (!alive(h->held[i])) {
            h->held[i] = h->held[--h->nheld];
        }
    }
    if (h->fault && h->listed && h->nheld == 0) {
        h->fault = 0;
        return GS_MPS_EV_RECOVERED;
    }
    return 0;
}

/* Whether the directory of path is one, not a symlink to one: the log is
 * read from where the daemon writes it, not from a dir put in its place. */
static int dir_is_real(const char *path)
{
    char dir[GS_PATH_MAX];
    struct stat st;
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path) {
        return 1;
    }
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

int gs_mps_health_follow(gs_mps_health_t *h, const char *path)
{
    int fd = dir_is_real(path) ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1,
        ev = 0;
    struct stat st;
    if (fd < 0) {
        return 0;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    if (st.st_size < h->offset) {
        h->offset = 0; /* made anew */
        h->npart = 0;
    }
    char buf[4096];
    ssize_t n;
    while ((n = pread(fd, buf, sizeof(buf), (off_t)h->offset)) > 0) {
        h->offset += n;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (h->npart + 1 < sizeof(h->part)) {
                    h->part[h->npart++] = buf[i]; /* longer lines are cut: none we read is */
                }
                continue;
            }
            h->part[h->npart] = '\0';
            ev |= gs_mps_health_line(h, h->part);
            h->npart = 0;
        }
    }
    close(fd);
    return ev;
}
