/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/state.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/core/limits.h"
#include "runtime/wire/protocol.h"

/* How often a rank waiting for the state looks whether the agent is gone. */
#define GS_STATE_PROBE_MS 20

/* --- the rows ------------------------------------------------------------ */

static const char *const kind_names[] = {"off", "on", "error"};

static int kind_format(const void *rec, char *buf, size_t len)
{
    const gs_state_t *st = rec;
    snprintf(buf, len, "%s", kind_names[st->kind <= GS_STATE_ERROR ? st->kind : 0]);
    return 0;
}

static int kind_parse(void *rec, const char *val)
{
    for (int k = GS_STATE_OFF; k <= GS_STATE_ERROR; k++) {
        if (strcmp(val, kind_names[k]) == 0) {
            ((gs_state_t *)rec)->kind = (gs_state_kind_t)k;
            return 0;
        }
    }
    return -EINVAL;
}

#define TOP(name, type, flags, field)                                                              \
    {name, NULL, type, GS_REC_FILE | (flags), offsetof(gs_state_t, field),                         \
     sizeof(((gs_state_t *)0)->field), NULL, NULL, NULL}

/* The node's part, in the file's order. */
const gs_rec_field_t gs_state_fields[] = {
    {"mps", NULL, GS_REC_CUSTOM, GS_REC_FILE, 0, 0, kind_format, kind_parse, NULL},
    TOP("notice", GS_REC_INT, 0, notice),
    TOP("exit", GS_REC_INT, 0, exit_code),
    TOP("message", GS_REC_STR, GS_REC_OPTIONAL, message),
    TOP("socket", GS_REC_STR, GS_REC_OPTIONAL, socket),
    TOP("placed", GS_REC_STR, GS_REC_OPTIONAL, placed),
    TOP("memory_limit", GS_REC_LLONG, GS_REC_OPTIONAL | GS_REC_POSITIVE, mem_limit_mb),
    TOP("clients_per_server", GS_REC_INT, GS_REC_OPTIONAL | GS_REC_POSITIVE, clients_per_server),
    TOP("generation", GS_REC_INT, GS_REC_OPTIONAL | GS_REC_POSITIVE, generation),
    GS_REC_END,
};

/* "ranks <first> <count>"; 0 ranks: a batch job's server (gsrun prolog),
 * shared per step. */
static int ranks_format(const void *rec, char *buf, size_t len)
{
    const gs_state_server_t *s = rec;
    snprintf(buf, len, "%d %d", s->first_rank, s->nranks);
    return 0;
}

static int ranks_parse(void *rec, const char *val)
{
    gs_state_server_t *s = rec;
    return sscanf(val, "%d %d", &s->first_rank, &s->nranks) != 2 || s->first_rank < 0 ||
                   s->nranks < 0
               ? -EINVAL
               : 0;
}

/* "server <GPU> <which> <of how many> <the GPU's ranks>", only where the
 * GPU has several servers (a file without it: one server per GPU). */
static int server_format(const void *rec, char *buf, size_t len)
{
    const gs_state_server_t *s = rec;
    if (s->gpu_servers <= 1) {
        return 1;
    }
    snprintf(buf, len, "%d %d %d %d", s->gpu, s->server, s->gpu_servers, s->gpu_ranks);
    return 0;
}

static int server_parse(void *rec, const char *val)
{
    gs_state_server_t *s = rec;
    return sscanf(val, "%d %d %d %d", &s->gpu, &s->server, &s->gpu_servers, &s->gpu_ranks) != 4 ||
                   s->gpu < 0 || s->gpu >= GS_MAX_GPUS || s->server < 0 || s->gpu_servers < 1 ||
                   s->server >= s->gpu_servers || s->gpu_ranks < s->nranks
               ? -EINVAL
               : 0;
}

/* The ranks' CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, or "off" (left unset). */
static int pct_format(const void *rec, char *buf, size_t len)
{
    const gs_state_server_t *s = rec;
    snprintf(buf, len, "%s", s->pct_set ? s->pct : "off");
    return 0;
}

static int pct_parse(void *rec, const char *val)
{
    gs_state_server_t *s = rec;
    s->pct_set = strcmp(val, "off") != 0;
    if (strlen(val) >= sizeof(s->pct)) {
        return -EINVAL;
    }
    snprintf(s->pct, sizeof(s->pct), "%s", s->pct_set ? val : "");
    return 0;
}

#define SRV(name, type, flags, field)                                                              \
    {name, NULL, type, GS_REC_FILE | (flags), offsetof(gs_state_server_t, field),                  \
     sizeof(((gs_state_server_t *)0)->field), NULL, NULL, NULL}
#define SRV_CUSTOM(name, fmt, parse)                                                               \
    {                                                                                              \
        name, NULL, GS_REC_CUSTOM, GS_REC_FILE, 0, 0, fmt, parse, NULL                             \
    }

/* Each server's part, after its "gpu <index>" line. */
const gs_rec_field_t gs_state_server_fields[] = {
    SRV_CUSTOM("ranks", ranks_format, ranks_parse),
    SRV_CUSTOM("server", server_format, server_parse),
    SRV_CUSTOM("percentage", pct_format, pct_parse),
    SRV("uuid", GS_REC_STR, 0, uuid),
    SRV("pipe_dir", GS_REC_STR, GS_REC_OPTIONAL, pipe_dir),
    SRV("log_dir", GS_REC_STR, GS_REC_OPTIONAL, log_dir),
    GS_REC_END,
};

/* --- the file ------------------------------------------------------------ */

void gs_state_from_plan(gs_state_t *st, const gs_plan_t *plan)
{
    st->clients_per_server = plan->clients_per_server;
    st->nservers = plan->nservers;
    for (int e = 0; e < plan->nservers; e++) {
        const gs_server_share_t *s = &plan->server[e];
        gs_state_server_t *d = &st->server[e];
        d->first_rank = s->first_rank;
        d->nranks = s->nranks;
        d->gpu = s->gpu;
        d->server = s->server;
        d->gpu_servers = s->gpu_servers;
        d->gpu_ranks = s->gpu_ranks;
        d->pct_set = s->pct_set;
        snprintf(d->pct, sizeof(d->pct), "%s", s->pct_text);
    }
}

int gs_state_format(const gs_state_t *st, char *buf, size_t len)
{
    size_t used = 0;
    int rc = gs_rec_put(buf, len, &used, "gsrun-state 1\n");
    rc = rc != 0 ? rc : gs_rec_format(gs_state_fields, st, "", buf, len, &used);
    for (int g = 0; rc == 0 && g < st->nservers; g++) {
        rc = gs_rec_put(buf, len, &used, "gpu %d\n", g);
        rc = rc != 0 ? rc
                     : gs_rec_format(gs_state_server_fields, &st->server[g], "", buf, len, &used);
    }
    return rc != 0 ? rc : gs_rec_put(buf, len, &used, "end\n");
}

/* "gpu <index>" opens the next server's entry (in order, from 0). */
static int open_server(gs_state_t *st, const char *val)
{
    char *end;
    long g = strtol(val, &end, 10);
    if (end == val || *end != '\0' || g != st->nservers || g >= GS_MAX_GPUS) {
        return -EINVAL;
    }
    st->server[g].gpu = (int)g; /* one server per GPU unless a server line says */
    st->server[g].gpu_servers = 1;
    st->nservers++;
    return 0;
}

static int check_parsed(gs_state_t *st, gs_error_t *err)
{
    for (int i = 0; i < st->nservers; i++) {
        if (st->server[i].gpu_ranks == 0) {
            st->server[i].gpu_ranks = st->server[i].nranks;
        }
    }
    if (st->kind == GS_STATE_ON && (st->nservers == 0 || st->socket[0] == '\0')) {
        return gs_error_set(err, EINVAL, "state file says MPS is on but names no GPU or socket");
    }
    for (int i = 0; st->kind == GS_STATE_ON && i < st->nservers; i++) {
        if (st->server[i].pipe_dir[0] == '\0') {
            return gs_error_set(err, EINVAL,
                                "state file says MPS is on but GPU %d has no pipe dir", i);
        }
    }
    return 0;
}

int gs_state_parse(const char *text, gs_state_t *st, gs_error_t *err)
{
    char line[GS_LINE_MAX], *key, *val;
    int lineno = 0, too_long;

    memset(st, 0, sizeof(*st));
    for (const char *p = text; (p = gs_rec_next_line(p, line, sizeof(line), &key, &val,
                                                      &too_long)) != NULL;) {
        int rc;
        lineno++;
        if (too_long) {
            return gs_error_set(err, EINVAL, "state file line %d is too long", lineno);
        }
        if (lineno == 1) {
            if (strcmp(key, "gsrun-state") != 0 || strcmp(val, "1") != 0) {
                return gs_error_set(err, EINVAL, "not a gsrun state file (version 1)");
            }
            continue;
        }
        if (strcmp(key, "end") == 0) {
            return check_parsed(st, err);
        }
        if (strcmp(key, "gpu") == 0) {
            rc = open_server(st, val);
        } else if (st->nservers > 0) {
            /* A server's keys, else the node's (the file's order puts the
             * node's first; a reader takes either). */
            rc = gs_rec_parse(gs_state_server_fields, &st->server[st->nservers - 1], key, val);
            rc = rc == -ENOENT ? gs_rec_parse(gs_state_fields, st, key, val) : rc;
        } else {
            rc = gs_rec_parse(gs_state_fields, st, key, val);
        }
        if (rc != 0) {
            return gs_error_set(err, EINVAL, "state file line %d ('%s') is malformed", lineno, key);
        }
    }
    return gs_error_set(err, EINVAL, "state file is truncated");
}

#define GS_STATE_MAX (64 * 1024)

int gs_state_write(const char *dir, const gs_state_t *st, gs_error_t *err)
{
    char *buf = malloc(GS_STATE_MAX);
    int rc;

    if (buf == NULL) {
        return gs_error_set(err, ENOMEM, "out of memory for the node state");
    }
    if (gs_state_format(st, buf, GS_STATE_MAX) != 0) {
        rc = gs_error_set(err, ENOSPC, "node state does not fit in its buffer");
    } else {
        rc = gs_rec_publish(dir, GS_STATE_FILE, buf, err);
    }
    free(buf);
    return rc;
}

int gs_state_read(const char *dir, gs_state_t *st, gs_error_t *err)
{
    char path[GS_PATH_MAX];
    int fd, rc;
    long n;

    snprintf(path, sizeof(path), "%s/%s", dir, GS_STATE_FILE);
    fd = gs_rundir_open_regular(path);
    if (fd < 0) {
        return gs_error_set(err, -fd, "cannot read '%s': %s", path,
                            fd == -EINVAL ? "not a regular file" : strerror(-fd));
    }
    char *buf = malloc(GS_STATE_MAX);
    if (buf == NULL) {
        close(fd);
        return gs_error_set(err, ENOMEM, "out of memory for the node state");
    }
    n = gs_proc_read_all(fd, buf, GS_STATE_MAX, gs_proc_now_ms() + 2000);
    close(fd);
    rc = n < 0 ? gs_error_set(err, EIO, "cannot read '%s'", path) : gs_state_parse(buf, st, err);
    free(buf);
    return rc;
}

/* Whether the agent of node dir has gone without a state: the dir removed
 * (its teardown's last step), or its socket there and no one holding the
 * dir's lock (the agent takes it before it listens; a killed agent's lock
 * goes with it and its guard). */
static int agent_gone(const char *dir)
{
    char sock[GS_PATH_MAX];
    struct stat st;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return errno == ENOENT;
    }
    snprintf(sock, sizeof(sock), "%s/%s", dir, GS_PROTO_SOCKET);
    int gone = lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd); /* and with it the lock, if we took it */
    return gone;
}

int gs_state_wait(const char *dir, long long deadline_ms, int abort_fd, gs_error_t *err)
{
    char path[GS_PATH_MAX];
    struct stat st;
    int wait_ms = 1;
    long long next_probe = gs_proc_now_ms() + GS_STATE_PROBE_MS;

    snprintf(path, sizeof(path), "%s/%s", dir, GS_STATE_FILE);
    /* Looked for at growing intervals (1 to 4 ms), not through inotify:
     * closing an inotify instance waits for an RCU grace period (18 ms
     * measured), which a rank would pay before its exec, and the Open MPI
     * component's ranks one after the other. */
    while (lstat(path, &st) != 0) {
        long long now = gs_proc_now_ms(), left = deadline_ms - now;
        if (left <= 0) {
            return gs_error_set(err, ETIMEDOUT,
                                "the node agent did not report within the time limit");
        }
        if (now >= next_probe) {
            next_probe = now + GS_STATE_PROBE_MS;
            if (agent_gone(dir) && lstat(path, &st) != 0) {
                return gs_error_set(err, ECHILD,
                                    "the node agent ended before it reported (killed, or it "
                                    "failed: its log is in %s); the job cannot use MPS here",
                                    dir);
            }
        }
        struct pollfd p = {abort_fd, POLLIN, 0};
        int pr = poll(&p, abort_fd >= 0 ? 1 : 0, left < wait_ms ? (int)left : wait_ms);
        wait_ms = wait_ms < 4 ? wait_ms * 2 : 4;
        if (pr > 0 && lstat(path, &st) != 0) {
            return -EPIPE; /* the agent's ready pipe closed: it is gone */
        }
    }
    return 0;
}

const gs_state_server_t *gs_state_server_of_rank(const gs_state_t *st, int local_rank)
{
    for (int g = 0; g < st->nservers; g++) {
        const gs_state_server_t *s = &st->server[g];
        if (local_rank >= s->first_rank && local_rank < s->first_rank + s->nranks) {
            return s;
        }
    }
    return NULL;
}
