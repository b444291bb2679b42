/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/state.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/core/limits.h"

static const char *kind_name(gs_state_kind_t k)
{
    return k == GS_STATE_ON ? "on" : (k == GS_STATE_ERROR ? "error" : "off");
}

int gs_state_format(const gs_state_t *st, char *buf, size_t len)
{
    size_t used = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int n_ = snprintf(buf + used, len - used, __VA_ARGS__);                                    \
        if (n_ < 0 || (size_t)n_ >= len - used) {                                                  \
            return -ENOSPC;                                                                        \
        }                                                                                          \
        used += (size_t)n_;                                                                        \
    } while (0)
    PUT("gsrun-state 1\n");
    PUT("mps %s\n", kind_name(st->kind));
    PUT("notice %d\n", st->notice);
    PUT("exit %d\n", st->exit_code);
    if (st->message[0] != '\0') {
        PUT("message %s\n", st->message);
    }
    if (st->socket[0] != '\0') {
        PUT("socket %s\n", st->socket);
    }
    if (st->mem_limit_mb > 0) {
        PUT("memory_limit %lld\n", st->mem_limit_mb);
    }
    if (st->clients_per_server > 0) {
        PUT("clients_per_server %d\n", st->clients_per_server);
    }
    for (int g = 0; g < st->ngpus; g++) {
        const gs_state_gpu_t *s = &st->gpu[g];
        PUT("gpu %d\n", g);
        PUT("ranks %d %d\n", s->first_rank, s->nranks);
        if (s->nservers > 1) {
            PUT("server %d %d %d %d\n", s->gpu, s->server, s->nservers, s->gpu_ranks);
        }
        PUT("percentage %s\n", s->pct_set ? s->pct : "off");
        PUT("uuid %s\n", s->uuid);
        if (s->pipe_dir[0] != '\0') {
            PUT("pipe_dir %s\n", s->pipe_dir);
            PUT("log_dir %s\n", s->log_dir);
        }
    }
    PUT("end\n");
#undef PUT
    return 0;
}

static int copy_value(char *dst, size_t len, const char *v)
{
    if (strlen(v) >= len) {
        return -ENAMETOOLONG;
    }
    snprintf(dst, len, "%s", v);
    return 0;
}

int gs_state_parse(const char *text, gs_state_t *st, gs_error_t *err)
{
    char line[GS_LINE_MAX];
    const char *p = text;
    int lineno = 0, ended = 0, g = -1;

    memset(st, 0, sizeof(*st));
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *key, *val;
        int bad = 0;

        lineno++;
        if (n >= sizeof(line)) {
            return gs_error_set(err, EINVAL, "state file line %d is too long", lineno);
        }
        memcpy(line, p, n);
        line[n] = '\0';
        p += n + (nl ? 1 : 0);
        key = line;
        val = strchr(line, ' ');
        if (val != NULL) {
            *val++ = '\0';
        } else {
            val = line + n;
        }
        if (lineno == 1) {
            if (strcmp(key, "gsrun-state") != 0 || strcmp(val, "1") != 0) {
                return gs_error_set(err, EINVAL, "not a gsrun state file (version 1)");
            }
        } else if (strcmp(key, "mps") == 0) {
            if (strcmp(val, "on") == 0) {
                st->kind = GS_STATE_ON;
            } else if (strcmp(val, "off") == 0) {
                st->kind = GS_STATE_OFF;
            } else if (strcmp(val, "error") == 0) {
                st->kind = GS_STATE_ERROR;
            } else {
                bad = 1;
            }
        } else if (strcmp(key, "notice") == 0) {
            st->notice = atoi(val);
        } else if (strcmp(key, "exit") == 0) {
            st->exit_code = atoi(val);
        } else if (strcmp(key, "message") == 0) {
            bad = copy_value(st->message, sizeof(st->message), val);
        } else if (strcmp(key, "socket") == 0) {
            bad = copy_value(st->socket, sizeof(st->socket), val);
        } else if (strcmp(key, "memory_limit") == 0) {
            st->mem_limit_mb = atoll(val);
            bad = st->mem_limit_mb < 1;
        } else if (strcmp(key, "clients_per_server") == 0) {
            st->clients_per_server = atoi(val);
            bad = st->clients_per_server < 1;
        } else if (strcmp(key, "gpu") == 0) {
            g = atoi(val);
            if (g != st->ngpus || g >= GS_MAX_GPUS) {
                bad = 1;
            } else {
                st->ngpus++;
                st->gpu[g].gpu = g; /* one server per GPU unless a server line says */
                st->gpu[g].nservers = 1;
            }
        } else if (g >= 0 && strcmp(key, "ranks") == 0) {
            /* 0 ranks: a batch job's GPU (gsrun prolog), shared per step */
            bad = sscanf(val, "%d %d", &st->gpu[g].first_rank, &st->gpu[g].nranks) != 2 ||
                  st->gpu[g].first_rank < 0 || st->gpu[g].nranks < 0;
        } else if (g >= 0 && strcmp(key, "server") == 0) {
            gs_state_gpu_t *s = &st->gpu[g];
            bad = sscanf(val, "%d %d %d %d", &s->gpu, &s->server, &s->nservers, &s->gpu_ranks) != 4 ||
                  s->gpu < 0 || s->gpu >= GS_MAX_GPUS || s->server < 0 || s->nservers < 1 ||
                  s->server >= s->nservers || s->gpu_ranks < s->nranks;
        } else if (g >= 0 && strcmp(key, "percentage") == 0) {
            st->gpu[g].pct_set = strcmp(val, "off") != 0;
            bad = copy_value(st->gpu[g].pct, sizeof(st->gpu[g].pct), st->gpu[g].pct_set ? val : "");
        } else if (g >= 0 && strcmp(key, "uuid") == 0) {
            bad = copy_value(st->gpu[g].uuid, sizeof(st->gpu[g].uuid), val);
        } else if (g >= 0 && strcmp(key, "pipe_dir") == 0) {
            bad = copy_value(st->gpu[g].pipe_dir, sizeof(st->gpu[g].pipe_dir), val);
        } else if (g >= 0 && strcmp(key, "log_dir") == 0) {
            bad = copy_value(st->gpu[g].log_dir, sizeof(st->gpu[g].log_dir), val);
        } else if (strcmp(key, "end") == 0) {
            ended = 1;
            break;
        } else {
            bad = 1;
        }
        if (bad) {
            return gs_error_set(err, EINVAL, "state file line %d ('%s') is malformed", lineno, key);
        }
    }
    if (!ended) {
        return gs_error_set(err, EINVAL, "state file is truncated");
    }
    for (int i = 0; i < st->ngpus; i++) {
        if (st->gpu[i].gpu_ranks == 0) {
            st->gpu[i].gpu_ranks = st->gpu[i].nranks;
        }
    }
    if (st->kind == GS_STATE_ON && (st->ngpus == 0 || st->socket[0] == '\0')) {
        return gs_error_set(err, EINVAL, "state file says MPS is on but names no GPU or socket");
    }
    for (int i = 0; st->kind == GS_STATE_ON && i < st->ngpus; i++) {
        if (st->gpu[i].pipe_dir[0] == '\0') {
            return gs_error_set(err, EINVAL, "state file says MPS is on but GPU %d has no pipe "
                                             "dir", i);
        }
    }
    return 0;
}

int gs_state_write(const char *dir, const gs_state_t *st, gs_error_t *err)
{
    char tmp[GS_PATH_MAX], final[GS_PATH_MAX];
    static char buf[64 * 1024];
    int fd, rc;
    size_t len;

    rc = gs_state_format(st, buf, sizeof(buf));
    if (rc != 0) {
        return gs_error_set(err, -rc, "node state does not fit in its buffer");
    }
    snprintf(tmp, sizeof(tmp), "%s/.%s.%d", dir, GS_STATE_FILE, (int)getpid());
    snprintf(final, sizeof(final), "%s/%s", dir, GS_STATE_FILE);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return gs_error_set(err, errno, "cannot write '%s': %s", tmp, strerror(errno));
    }
    len = strlen(buf);
    if (write(fd, buf, len) != (ssize_t)len || close(fd) != 0) {
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

int gs_state_read(const char *dir, gs_state_t *st, gs_error_t *err)
{
    char path[GS_PATH_MAX];
    static char buf[64 * 1024];
    int fd;
    long n;

    snprintf(path, sizeof(path), "%s/%s", dir, GS_STATE_FILE);
    fd = gs_rundir_open_regular(path);
    if (fd < 0) {
        return gs_error_set(err, -fd, "cannot read '%s': %s", path,
                            fd == -EINVAL ? "not a regular file" : strerror(-fd));
    }
    n = gs_proc_read_all(fd, buf, sizeof(buf), gs_proc_now_ms() + 2000);
    close(fd);
    if (n < 0) {
        return gs_error_set(err, EIO, "cannot read '%s'", path);
    }
    return gs_state_parse(buf, st, err);
}

int gs_state_wait(const char *dir, long long deadline_ms, int abort_fd, gs_error_t *err)
{
    char path[GS_PATH_MAX];
    struct stat st;
    int wait_ms = 1;

    snprintf(path, sizeof(path), "%s/%s", dir, GS_STATE_FILE);
    /* Looked for at growing intervals (1 to 4 ms), not through inotify:
     * closing an inotify instance waits for an RCU grace period (18 ms
     * measured), which a rank would pay before its exec, and the Open MPI
     * component's ranks one after the other. */
    while (lstat(path, &st) != 0) {
        long long left = deadline_ms - gs_proc_now_ms();
        if (left <= 0) {
            return gs_error_set(err, ETIMEDOUT,
                                "the node agent did not report within the time limit");
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

const gs_state_gpu_t *gs_state_gpu_of_rank(const gs_state_t *st, int local_rank)
{
    for (int g = 0; g < st->ngpus; g++) {
        const gs_state_gpu_t *s = &st->gpu[g];
        if (local_rank >= s->first_rank && local_rank < s->first_rank + s->nranks) {
            return s;
        }
    }
    return NULL;
}
