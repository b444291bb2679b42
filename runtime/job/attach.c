/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/job/attach.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/container.h"
#include "runtime/core/proc.h"
#include "runtime/core/text.h"

int gs_attach_init(gs_attach_t *t, int n)
{
    t->n = n > 0 ? n : 0;
    t->r = t->n > 0 ? calloc((size_t)t->n, sizeof(*t->r)) : NULL;
    for (int i = 0; i < t->n && t->r != NULL; i++) {
        t->r[i].entry = -1;
        t->r[i].gpu = -1;
        t->r[i].mib = t->r[i].peak_mib = -1;
    }
    if (t->n > 0 && t->r == NULL) {
        t->n = 0;
        return -ENOMEM;
    }
    return 0;
}

void gs_attach_free(gs_attach_t *t)
{
    free(t->r);
    t->r = NULL;
    t->n = 0;
}

void gs_attach_registered(gs_attach_t *t, int rank, pid_t pid, int entry, long long now_ms)
{
    if (rank < 0 || rank >= t->n) {
        return;
    }
    gs_attach_rank_t *r = &t->r[rank];
    memset(r, 0, sizeof(*r));
    r->pid = pid;
    r->entry = entry;
    r->gpu = -1;
    r->mib = r->peak_mib = -1;
    r->since_ms = now_ms;
    r->env.uid = r->env.euid = -1;
}

/* The parent of pid and its start time (from proc_root/PID/stat): 0, or
 * -1 when it is gone. */
static int stat_of(pid_t pid, const char *proc_root, pid_t *ppid, unsigned long long *start)
{
    char buf[1024];
    if (gs_proc_stat_fields(proc_root, pid, buf, sizeof(buf)) != 0) {
        return -1;
    }
    *ppid = 0;
    *start = 0;
    /* From field 3 (the state) on: the parent is field 4, the start 22. */
    char *save = NULL, *tok = strtok_r(buf, " ", &save);
    for (int field = 3; tok != NULL && field <= 22; field++, tok = strtok_r(NULL, " ", &save)) {
        if (field == 4) {
            *ppid = (pid_t)strtol(tok, NULL, 10);
        } else if (field == 22) {
            *start = strtoull(tok, NULL, 10);
        }
    }
    return 0;
}

void gs_attach_identify(gs_attach_t *t, int rank, const char *proc_root)
{
    pid_t ppid;
    if (rank >= 0 && rank < t->n && t->r[rank].pid > 0 &&
        stat_of(t->r[rank].pid, proc_root, &ppid, &t->r[rank].start) != 0) {
        t->r[rank].start = 0;
    }
}

int gs_attach_rank_of(const gs_attach_t *t, pid_t pid, const char *proc_root)
{
    /* A wrapper's child is a few generations down at most. */
    for (int depth = 0; depth < 8 && pid > 1; depth++) {
        pid_t ppid;
        unsigned long long start;
        if (stat_of(pid, proc_root, &ppid, &start) != 0) {
            return -1; /* gone: nobody's now */
        }
        for (int i = 0; i < t->n; i++) {
            const gs_attach_rank_t *r = &t->r[i];
            if (r->pid == pid && !r->gone && (r->start == 0 || r->start == start)) {
                return i;
            }
        }
        pid = ppid;
    }
    return -1;
}

int gs_attach_rank_exited(const gs_attach_t *t, pid_t pid, const char *proc_root)
{
    pid_t ppid;
    unsigned long long start = 0;
    int held = pid > 1 && stat_of(pid, proc_root, &ppid, &start) == 0;
    for (int i = 0; i < t->n && pid > 1; i++) {
        /* No process holds the PID, or the rank's own (a zombie) does. */
        if (t->r[i].pid == pid && (!held || (t->r[i].start != 0 && t->r[i].start == start))) {
            return i;
        }
    }
    return -1;
}

int gs_attach_rank_named(const gs_attach_t *t, pid_t pid, const char *proc_root)
{
    int r = gs_attach_rank_of(t, pid, proc_root);
    return r >= 0 ? r : gs_attach_rank_exited(t, pid, proc_root);
}

int gs_attach_set(gs_attach_t *t, int i, int state, pid_t ctx_pid, int gpu)
{
    if (i < 0 || i >= t->n || state <= GS_ATTACH_UNSEEN || state >= GS_ATTACH_NSTATES) {
        return 0;
    }
    gs_attach_rank_t *r = &t->r[i];
    /* A fault ends the context for good; a context without MPS was the
     * rank's whatever its others are; blocked is a rank's wait for its
     * first context, never what one it has became. Anything else is what
     * is seen now. */
    if (r->state == state || r->state == GS_ATTACH_FAULTED ||
        (r->state == GS_ATTACH_PLAIN && state != GS_ATTACH_FAULTED) ||
        (state == GS_ATTACH_BLOCKED && r->state != GS_ATTACH_UNSEEN)) {
        return 0;
    }
    r->state = state;
    r->ctx_pid = ctx_pid;
    r->gpu = gpu;
    return 1;
}

void gs_attach_read_uid(pid_t pid, const char *proc_root, gs_attach_env_t *e)
{
    gs_proc_uids(proc_root, pid, &e->uid, &e->euid);
}

/* The most of an environment read: past what the kernel lets exec take
 * (a quarter of the stack limit; 2 MB with the usual 8 MB). */
#define ENV_MAX (64L << 20)

/* The whole of file fd into *buf (grown as needed, kept for the next
 * call): its length, or -1. */
static ssize_t read_whole(int fd, char **buf, size_t *cap)
{
    size_t n = 0;
    for (;;) {
        if (n + 1 >= *cap) {
            size_t want = *cap ? *cap * 2 : 65536;
            char *more = want <= (size_t)ENV_MAX ? realloc(*buf, want) : NULL;
            if (more == NULL) {
                return n > 0 ? (ssize_t)n : -1; /* what was read is used */
            }
            *buf = more;
            *cap = want;
        }
        ssize_t r = read(fd, *buf + n, *cap - n - 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return r < 0 && n == 0 ? -1 : (ssize_t)n;
        }
        n += (size_t)r;
    }
}

void gs_attach_read_env(pid_t pid, const char *proc_root, const char *expected_pipe,
                        gs_attach_env_t *e)
{
    /* The agent reads one environment at a time (its loop's thread). */
    static char *block;
    static size_t cap;
    char path[300];
    ssize_t n = -1;
    gs_attach_read_uid(pid, proc_root, e);
    snprintf(path, sizeof(path), "%s/%d/environ", proc_root, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read_whole(fd, &block, &cap);
        close(fd);
    }
    if (n <= 0) {
        return; /* gone, or not dumpable any more: what was read before stays */
    }
    block[n] = '\0';
    const char *pipe = gs_text_env_value(block, (size_t)n, "CUDA_MPS_PIPE_DIRECTORY", NULL);
    const char *cvd = gs_text_env_value(block, (size_t)n, "CUDA_VISIBLE_DEVICES", NULL);
    e->taken = 1;
    e->has_pipe = pipe != NULL;
    snprintf(e->pipe, sizeof(e->pipe), "%s", pipe != NULL ? pipe : "");
    e->has_cvd = cvd != NULL;
    snprintf(e->cvd, sizeof(e->cvd), "%s", cvd != NULL ? cvd : "");
    e->container = (int)gs_container_of_environ(block, (size_t)n);
    /* The pipe dir in the process's own view of the files (its mount
     * namespace): a container may hide it though the variable is right. */
    e->pipe_seen = -1;
    const char *look = pipe != NULL ? pipe : expected_pipe;
    if (look != NULL && look[0] == '/') {
        struct stat st;
        snprintf(path, sizeof(path), "%s/%d/root%s/control", proc_root, (int)pid, look);
        if (stat(path, &st) == 0) {
            e->pipe_seen = 1;
        } else if (errno == ENOENT || errno == ENOTDIR) {
            e->pipe_seen = 0;
        }
    }
    gs_proc_comm(proc_root, pid, e->prog, sizeof(e->prog));
    for (char *p = e->prog; *p != '\0'; p++) {
        *p = (*p < 0x20 || *p == 0x7f) ? '?' : *p; /* anyone's to set: shown clean */
    }
}

int gs_attach_cuda_started(pid_t pid, const char *proc_root)
{
    char path[300], line[512];
    snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return errno == EACCES || errno == EPERM;
    }
    int found = 0;
    /* A read can fail too once the process turned unreadable. */
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, "/libcuda.so") != NULL;
    }
    int denied = !found && ferror(f) && (errno == EACCES || errno == EPERM);
    fclose(f);
    return found || denied;
}

/* Control bytes out of a value from a process's environment. */
static void clean(const char *in, char *out, size_t len)
{
    size_t k = 0;
    for (; *in != '\0' && k + 1 < len; in++) {
        out[k++] = ((unsigned char)*in < 0x20 || *in == 0x7f) ? '?' : *in;
    }
    out[k] = '\0';
}

/* OTHER: which server its program was pointed at, as far as its
 * environment tells (the daemons gsrun gave it do not list it). */
static void explain_other(const gs_attach_env_t *e, const char *who, const char *pipe, char *buf,
                          size_t len)
{
    char val[200], saw[300];
    static const char *const fix =
        "that server's share and limits apply to it, not gsrun's, and gsrun does not count it "
        "as served: leave CUDA_MPS_PIPE_DIRECTORY as gsrun sets it (or run with --mps=off to "
        "use that MPS alone)";
    clean(e->pipe, val, sizeof(val));
    if (!e->taken) {
        snprintf(saw, sizeof(saw), "its program's environment could not be read (gsrun gave it %s)",
                 pipe);
    } else if (!e->has_pipe) {
        snprintf(saw, sizeof(saw),
                 "its program was started without CUDA_MPS_PIPE_DIRECTORY (so CUDA took "
                 "/tmp/nvidia-mps, a system MPS), not the %s gsrun gave it",
                 pipe);
    } else if (strcmp(e->pipe, pipe) != 0) {
        snprintf(saw, sizeof(saw),
                 "its program saw CUDA_MPS_PIPE_DIRECTORY=%s (a wrapper's or a hand-started "
                 "daemon's), not the %s gsrun gave it",
                 val, pipe);
    } else {
        snprintf(saw, sizeof(saw),
                 "its program saw gsrun's CUDA_MPS_PIPE_DIRECTORY=%s, yet that server's control "
                 "daemon does not list it (a process of its own with another?)",
                 val);
    }
    snprintf(buf, len, "%s is an MPS client of a server gsrun did not give it: %s; %s", who, saw,
             fix);
}

void gs_attach_explain(const gs_attach_rank_t *r, int rank, const char *pipe, const char *cvd,
                       char *buf, size_t len)
{
    const gs_attach_env_t *e = &r->env;
    char who[200], val[200];
    pid_t p = r->ctx_pid > 0 ? r->ctx_pid : r->pid;
    snprintf(who, sizeof(who), "rank %d (%s%spid %d)", rank, e->prog, e->prog[0] ? ", " : "",
             (int)p);
    if (r->state == GS_ATTACH_OTHER) {
        explain_other(e, who, pipe, buf, len);
        return;
    }
    if (r->state == GS_ATTACH_NODEVICE) {
        clean(e->cvd, val, sizeof(val));
        if (e->taken && e->has_cvd && strcmp(e->cvd, cvd) != 0) {
            snprintf(buf, len,
                     "%s: its CUDA found no device: CUDA_VISIBLE_DEVICES was changed to '%s' after "
                     "gsrun set it to '%s' (a wrapper's GPU binding?). Under MPS each rank sees "
                     "its server's GPU as device 0, and gsrun already places the ranks on the "
                     "GPUs: leave CUDA_VISIBLE_DEVICES as gsrun sets it",
                     who, val, cvd);
        } else {
            snprintf(buf, len,
                     "%s: its CUDA found no device: MPS says its CUDA_VISIBLE_DEVICES names no "
                     "device of its server (gsrun set it to '%s'; something changed it after). "
                     "Under MPS each rank sees its server's GPU as device 0, and gsrun already "
                     "places the ranks: leave CUDA_VISIBLE_DEVICES as gsrun sets it",
                     who, cvd);
        }
        return;
    }
    char gpu[48] = "a GPU", where[128];
    if (r->gpu >= 0) {
        snprintf(gpu, sizeof(gpu), "GPU %d", r->gpu);
    }
    /* "... ran on GPU 0 without MPS", or of a rank whose processes made
     * several contexts, not all through MPS: how many were not. */
    if (r->nctx > r->nplain && r->nplain > 0) {
        snprintf(who + strlen(who), sizeof(who) - strlen(who), ": %d of its %d GPU contexts",
                 r->nplain, r->nctx);
    }
    snprintf(where, sizeof(where), "%s", gpu);
    if (e->euid >= 0 && e->euid != (long)geteuid() &&
        (e->uid < 0 || e->uid == (long)geteuid())) {
        /* A set-uid program: the driver takes the effective uid. */
        snprintf(buf, len,
                 "%s ran on %s without MPS: its program runs as uid %ld (set-uid: its effective "
                 "uid), not as uid %u, whose MPS servers serve the job; MPS takes clients of its "
                 "own user only: run the CUDA program without the set-uid bit",
                 who, where, e->euid, (unsigned)geteuid());
    } else if (e->uid >= 0 && e->uid != (long)geteuid()) {
        /* MPS serves one user: another's process cannot even enter the
         * pipe dir (the user's, 0700). */
        snprintf(buf, len,
                 "%s ran on %s without MPS: it runs as uid %ld, not as uid %u, whose MPS servers "
                 "serve the job; MPS takes clients of its own user only (a wrapper or container "
                 "that runs the program as another user, or a container root mapped to another "
                 "host uid): run it as your own user (podman: --userns=keep-id, no --user)",
                 who, where, e->uid, (unsigned)geteuid());
    } else if (!e->taken) {
        snprintf(buf, len,
                 "%s ran on %s without MPS: a context of its own, time-slicing the GPU with the "
                 "others; why is unknown (its environment could not be read: CUDA makes a "
                 "process unreadable once it starts). Usual causes: a wrapper or container that "
                 "removes CUDA_MPS_PIPE_DIRECTORY (gsrun set %s) or hides that directory",
                 who, where, pipe);
    } else if (!e->has_pipe) {
        snprintf(buf, len,
                 "%s ran on %s without MPS: its program was started without "
                 "CUDA_MPS_PIPE_DIRECTORY (gsrun set %s; a wrapper script or a container's clean "
                 "environment removed it): keep that variable for the program",
                 who, where, pipe);
    } else if (strcmp(e->pipe, pipe) != 0) {
        clean(e->pipe, val, sizeof(val));
        snprintf(buf, len,
                 "%s ran on %s without MPS: its program was started with "
                 "CUDA_MPS_PIPE_DIRECTORY=%s, not the %s gsrun set: leave it as gsrun sets it",
                 who, where, val, pipe);
    } else if (e->pipe_seen == 0) {
        /* The run dir above the pipe dir: one bind for the user's next jobs. */
        char dir[256], hint[1200], ct[64] = "";
        gs_container_bind_dir(pipe, dir, sizeof(dir));
        gs_container_bind_hint((gs_container_t)e->container, dir, hint, sizeof(hint));
        if (e->container != GS_CT_NONE) {
            snprintf(ct, sizeof(ct), "its %s container", gs_container_name(e->container));
        }
        snprintf(buf, len,
                 "%s ran on %s without MPS: the MPS pipe directory %s is not there where it runs "
                 "(%s hides it): bind %s into it at the same path (%s)",
                 who, where, pipe, ct[0] ? ct : "a container or mount namespace", dir, hint);
    } else {
        clean(e->has_cvd ? e->cvd : "(unset)", val, sizeof(val));
        snprintf(buf, len,
                 "%s ran on %s without MPS: a context of its own though its program had "
                 "CUDA_MPS_PIPE_DIRECTORY=%s (seen: CUDA_VISIBLE_DEVICES=%s); cause unknown",
                 who, where, pipe, val);
    }
}

void gs_attach_counts(const gs_attach_t *t, int counts[GS_ATTACH_NSTATES])
{
    memset(counts, 0, sizeof(int) * GS_ATTACH_NSTATES);
    for (int i = 0; i < t->n; i++) {
        if (t->r[i].pid > 0) {
            counts[t->r[i].state]++;
        }
    }
}

void gs_attach_ranks_in(const gs_attach_t *t, int s, char *buf, size_t len)
{
    unsigned char *pick = calloc((size_t)(t->n > 0 ? t->n : 1), 1);
    for (int i = 0; i < t->n && pick != NULL; i++) {
        pick[i] = t->r[i].state == s;
    }
    gs_attach_ranks_where(t, pick, buf, len);
    free(pick);
}

void gs_attach_ranks_where(const gs_attach_t *t, const unsigned char *pick, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->n && pick != NULL && used + 24 < len; i++) {
        if (t->r[i].pid <= 0 || !pick[i]) {
            continue;
        }
        int j = i;
        while (j + 1 < t->n && t->r[j + 1].pid > 0 && pick[j + 1]) {
            j++;
        }
        int w = j > i ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", i, j)
                      : snprintf(buf + used, len - used, "%s%d", used ? "," : "", i);
        used += w > 0 ? (size_t)w : 0;
        i = j;
    }
}

const char *gs_attach_name(int s)
{
    static const char *names[GS_ATTACH_NSTATES] = {"unseen",  "client", "no-mps",  "no-device",
                                                   "faulted", "other",  "blocked"};
    return s >= 0 && s < GS_ATTACH_NSTATES ? names[s] : "?";
}

void gs_attach_status(const gs_attach_t *t, const int *rank_entry, int n, int e, char *buf,
                      size_t len)
{
    int clients = 0, ranks = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < t->n && r < n; r++) {
        if (t->r[r].pid > 0 && rank_entry[r] == e) {
            ranks++;
            clients += t->r[r].state == GS_ATTACH_CLIENT;
        }
    }
    if (ranks == 0) {
        return;
    }
    used = (size_t)snprintf(buf, len, "%d/%d", clients, ranks);
    for (int r = 0; r < t->n && r < n && used < len; r++) {
        if (t->r[r].pid > 0 && rank_entry[r] == e && t->r[r].state != GS_ATTACH_CLIENT) {
            used += (size_t)snprintf(buf + used, len - used, " %d:%s", r,
                                     gs_attach_name(t->r[r].state));
        }
    }
}

int gs_attach_has_context(int s)
{
    return s == GS_ATTACH_CLIENT || s == GS_ATTACH_PLAIN || s == GS_ATTACH_OTHER;
}
