/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/ledger.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"

void gs_ledger_init(gs_ledger_t *l)
{
    memset(l, 0, sizeof(*l));
    l->lock_fd = -1;
    l->entry_fd = -1;
}

int gs_ledger_applies(const char *job_dir)
{
    const char *name = gs_rundir_job_name(job_dir);
    return strncmp(name, "slurm-", 6) != 0 && strncmp(name, "job-", 4) != 0;
}

int gs_ledger_path(const char *base, const char *node, char *out, size_t len)
{
    if ((size_t)snprintf(out, len, "%s/%s/%s", base, GS_LEDGER_DIR, node) >= len) {
        return -ENAMETOOLONG;
    }
    return 0;
}

/* The record's dirs, made when missing; 0, -ENOENT when a job that ended
 * removed one as we made the other (try again), or -errno with err. */
static int make_dirs(const char *top, const char *dir, gs_error_t *err)
{
    gs_error_t e;
    int rc = gs_rundir_ensure(top, &e);
    rc = rc == 0 ? gs_rundir_ensure(dir, &e) : rc;
    if (rc != 0 && rc != -ENOENT) {
        *err = e;
    }
    return rc;
}

/* The record's paths in the user's base (made when missing). */
static int paths(gs_ledger_t *l, const char *node, gs_error_t *err)
{
    char stem[300], base[512];
    int rc;
    snprintf(stem, sizeof(stem), "%s/gsrun-%u", gs_rundir_tmpdir(), (unsigned)getuid());
    if ((rc = gs_rundir_user_base_any(stem, base, sizeof(base), l->taken, sizeof(l->taken),
                                      err)) != 0) {
        return rc;
    }
    if ((size_t)snprintf(l->top, sizeof(l->top), "%s/%s", base, GS_LEDGER_DIR) >= sizeof(l->top) ||
        gs_ledger_path(base, node, l->dir, sizeof(l->dir)) != 0) {
        return gs_error_set(err, ENAMETOOLONG, "'%s' is too long for the placement record", base);
    }
    return 0;
}

int gs_ledger_lock(gs_ledger_t *l, const char *node, int timeout_ms, gs_error_t *err)
{
    long long deadline = gs_proc_now_ms() + timeout_ms;
    int rc;

    /* The last job of a node removes the record's dirs (under their lock),
     * and an empty base may go too: one made or locked just then is gone
     * by the time we hold it, and is made again. */
    for (;;) {
        long long left = deadline - gs_proc_now_ms();
        struct stat a, b;
        if (left <= 0) {
            l->stuck = l->dir[0] != '\0';
            return gs_error_set(err, ETIMEDOUT,
                                "the user's jobs on this node held the placement record (%s) "
                                "for %d ms",
                                l->dir, timeout_ms);
        }
        if ((rc = paths(l, node, err)) != 0) {
            return rc;
        }
        if ((rc = make_dirs(l->top, l->dir, err)) == -ENOENT) {
            continue;
        } else if (rc != 0) {
            return rc;
        }
        int fd = gs_rundir_lock_wait(l->dir, (int)left);
        if (fd == -ENOENT || fd == -ETIMEDOUT) {
            continue;
        } else if (fd < 0) {
            return gs_error_set(err, -fd, "cannot lock the placement record %s: %s", l->dir,
                                strerror(-fd));
        }
        if (fstat(fd, &a) == 0 && stat(l->dir, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev) {
            l->lock_fd = fd;
            return 0;
        }
        close(fd);
    }
}

/* An entry's text into job (parsed); 0, or -1 when it is not one. */
static int parse_entry(char *text, const char *name, gs_ledger_job_t *job)
{
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    memset(job, 0, sizeof(*job));
    snprintf(job->job, sizeof(job->job), "%s", name);
    if (line == NULL || strcmp(line, GS_LEDGER_MAGIC) != 0) {
        return -1;
    }
    while ((line = strtok_r(NULL, "\n", &save)) != NULL && job->n < GS_MAX_GPUS) {
        char uuid[96];
        int ranks;
        if (sscanf(line, "%95s %d", uuid, &ranks) == 2 && ranks > 0 && ranks < 1000000) {
            snprintf(job->uuid[job->n], sizeof(job->uuid[0]), "%s", uuid);
            job->ranks[job->n++] = ranks;
        }
    }
    return 0;
}

/* Opens entry `name` of dirfd: its descriptor when its job is alive (its
 * flock held), else -1 (gone: removed when prune). */
static int open_live(int dirfd, uid_t owner, const char *name, int prune)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != owner) {
        close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        /* Nobody holds it (the agent and the job's ranks hold it shared):
         * the job is gone. */
        if (prune) {
            unlinkat(dirfd, name, 0);
        }
        close(fd);
        return -1;
    }
    return fd;
}

static int each(const char *dir, int prune, const char *self,
                void (*fn)(void *ctx, const gs_ledger_job_t *job), void *ctx)
{
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), live = 0;
    DIR *d = dirfd >= 0 ? fdopendir(dirfd) : NULL;
    struct dirent *e;
    gs_ledger_job_t *job = malloc(sizeof(*job));
    char *text = malloc(GS_LEDGER_ENTRY_MAX + 1);

    struct stat dst;
    if (d == NULL || job == NULL || text == NULL || fstat(dirfd, &dst) != 0) {
        if (d != NULL) {
            closedir(d);
        } else if (dirfd >= 0) {
            close(dirfd);
        }
        free(job);
        free(text);
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            (self != NULL && strcmp(e->d_name, self) == 0)) {
            continue;
        }
        int fd = open_live(dirfd, dst.st_uid, e->d_name, prune);
        if (fd < 0 || e->d_name[0] == '.') {
            if (fd >= 0) {
                close(fd); /* an entry being written: not yet a job's */
            }
            continue;
        }
        ssize_t n = read(fd, text, GS_LEDGER_ENTRY_MAX); /* bounded: an entry is small */
        close(fd);
        if (n <= 0) {
            continue;
        }
        text[n] = '\0';
        if (parse_entry(text, e->d_name, job) == 0) {
            live++;
            fn(ctx, job);
        }
    }
    closedir(d);
    free(job);
    free(text);
    return live;
}

typedef struct {
    const gs_gpu_t *gpus;
    int ngpus;
    int *load;
} load_ctx_t;

static void add_load(void *ctx, const gs_ledger_job_t *job)
{
    load_ctx_t *c = ctx;
    for (int i = 0; i < job->n; i++) {
        for (int g = 0; g < c->ngpus; g++) {
            if (strcmp(c->gpus[g].uuid, job->uuid[i]) == 0) {
                /* Saturated: entries are the user's own writing, unbounded in number. */
                c->load[g] = c->load[g] > INT_MAX - job->ranks[i] ? INT_MAX
                                                                  : c->load[g] + job->ranks[i];
            }
        }
    }
}

int gs_ledger_load(gs_ledger_t *l, const gs_gpu_t *gpus, int ngpus, int *load)
{
    load_ctx_t c = {gpus, ngpus, load};
    const char *self = strrchr(l->entry, '/');
    memset(load, 0, sizeof(*load) * (size_t)(ngpus > 0 ? ngpus : 0));
    return each(l->dir, 1, self != NULL ? self + 1 : NULL, add_load, &c);
}

int gs_ledger_each(const char *dir, void (*fn)(void *ctx, const gs_ledger_job_t *job), void *ctx)
{
    return each(dir, 0, NULL, fn, ctx);
}

static void add_summary(void *ctx, const gs_ledger_job_t *job)
{
    gs_ledger_summary_t *sum = ctx;
    char name[96];
    /* The entry's name is the job's and its agent's PID: show the job's. */
    snprintf(name, sizeof(name), "%s", job->job);
    char *dot = strrchr(name, '.');
    if (dot != NULL && dot != name) {
        *dot = '\0';
    }
    for (int i = 0; i < job->n; i++) {
        int g = 0;
        while (g < sum->n && strcmp(sum->gpu[g].uuid, job->uuid[i]) != 0) {
            g++;
        }
        if (g == sum->n) {
            if (sum->n == GS_MAX_GPUS) {
                continue;
            }
            memset(&sum->gpu[g], 0, sizeof(sum->gpu[g]));
            snprintf(sum->gpu[g].uuid, sizeof(sum->gpu[g].uuid), "%s", job->uuid[i]);
            sum->n++;
        }
        size_t len = strlen(sum->gpu[g].jobs), room = sizeof(sum->gpu[g].jobs) - len;
        char one[128];
        int w = snprintf(one, sizeof(one), "%s%s:%d", len > 0 ? " " : "", name, job->ranks[i]);
        if (w > 0 && (size_t)w < room) {
            memcpy(sum->gpu[g].jobs + len, one, (size_t)w + 1); /* whole names only */
        } else {
            sum->gpu[g].more++;
        }
        sum->gpu[g].ranks = sum->gpu[g].ranks > INT_MAX - job->ranks[i]
                                ? INT_MAX
                                : sum->gpu[g].ranks + job->ranks[i];
        sum->gpu[g].njobs++;
    }
}

int gs_ledger_summarize(const char *dir, gs_ledger_summary_t *sum)
{
    memset(sum, 0, sizeof(*sum));
    return gs_ledger_each(dir, add_summary, sum);
}

int gs_ledger_record(gs_ledger_t *l, const char *job, const gs_gpu_t *gpus, int ngpus,
                     const int *ranks, gs_error_t *err)
{
    char tmp[700], text[GS_LEDGER_ENTRY_MAX], name[128];
    size_t len = 0;
    int fd;

    /* The job's name as a file name: letters, digits, '.', '-', '_'. */
    snprintf(name, sizeof(name), "%.96s.%ld", job, (long)getpid());
    for (char *p = name; *p != '\0'; p++) {
        if (!(*p == '.' || *p == '-' || *p == '_' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
            *p = '_';
        }
    }
    if ((size_t)snprintf(l->entry, sizeof(l->entry), "%s/%s", l->dir, name) >= sizeof(l->entry) ||
        (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s", l->dir, name) >= sizeof(tmp)) {
        l->entry[0] = '\0';
        return gs_error_set(err, ENAMETOOLONG, "the placement record's path is too long");
    }
    len = (size_t)snprintf(text, sizeof(text), "%s\n", GS_LEDGER_MAGIC);
    for (int g = 0; g < ngpus && len < sizeof(text); g++) {
        if (ranks[g] > 0) {
            len += (size_t)snprintf(text + len, sizeof(text) - len, "%s %d\n", gpus[g].uuid,
                                    ranks[g]);
        }
    }
    if (len >= sizeof(text)) {
        l->entry[0] = '\0';
        return gs_error_set(err, E2BIG, "the job's placement does not fit its record");
    }
    /* Flocked before it is visible under its name: a reader never sees a
     * live job's entry unlocked. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        l->entry[0] = '\0';
        return gs_error_set(err, e, "cannot write the placement record %s: %s", tmp, strerror(e));
    }
    if (flock(fd, LOCK_SH | LOCK_NB) != 0 || write(fd, text, len) != (ssize_t)len ||
        rename(tmp, l->entry) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        l->entry[0] = '\0';
        return gs_error_set(err, e, "cannot write the placement record %s: %s", tmp, strerror(e));
    }
    l->entry_fd = fd;
    return 0;
}

void gs_ledger_unlock(gs_ledger_t *l)
{
    if (l->lock_fd >= 0) {
        close(l->lock_fd);
        l->lock_fd = -1;
    }
}

static void ignore_job(void *ctx, const gs_ledger_job_t *job)
{
    (void)ctx;
    (void)job;
}

/* How long the last job waits to tidy the record away: others decide in ms. */
#define CLOSE_LOCK_MS 2000

void gs_ledger_close(gs_ledger_t *l)
{
    if (l->dir[0] == '\0') {
        return; /* never opened */
    }
    /* Under the dir's lock (ours still, or taken again): a job deciding
     * now must not see the dir vanish under it. */
    int lk = l->lock_fd >= 0 ? l->lock_fd
             : gs_rundir_lock_wait(l->dir, l->stuck ? 0 : CLOSE_LOCK_MS); /* stuck: one try */
    l->lock_fd = -1;
    if (l->entry_fd >= 0) {
        unlink(l->entry); /* before the flock goes: no reader takes it for a live job's */
        close(l->entry_fd);
        l->entry_fd = -1;
    }
    /* The node's last job leaves no record behind (the user's base stays),
     * nor the entries of killed jobs that nobody has read since. */
    if (lk >= 0) {
        each(l->dir, 1, NULL, ignore_job, NULL);
    }
    if (lk >= 0 && rmdir(l->dir) == 0) {
        rmdir(l->top);
    }
    if (lk >= 0) {
        close(lk);
    }
    l->entry[0] = '\0';
    l->dir[0] = '\0';
}

int gs_ledger_hold(const char *entry)
{
    /* Not close-on-exec: the rank's program keeps it, and the kernel drops
     * the flock when the last process holding it exits. */
    int fd = open(entry, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0) {
        return -errno;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
        close(fd);
        return -EPERM;
    }
    /* Never waits: while the agent holds its shared flock no reader can
     * take the exclusive one (its probe of a live job fails). */
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int gs_ledger_find(const char *node, char *dir, size_t len)
{
    char stem[300], base[512];
    snprintf(stem, sizeof(stem), "%s/gsrun-%u", gs_rundir_tmpdir(), (unsigned)getuid());
    return gs_rundir_user_base_find(stem, base, sizeof(base)) == 0 &&
           gs_ledger_path(base, node, dir, len) == 0 && access(dir, F_OK) == 0;
}

void gs_ledger_tidy(const char *node)
{
    gs_ledger_t l;
    gs_ledger_init(&l);
    if (!gs_ledger_find(node, l.dir, sizeof(l.dir))) {
        return;
    }
    snprintf(l.top, sizeof(l.top), "%s", l.dir);
    char *slash = strrchr(l.top, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
    gs_ledger_close(&l); /* no entry of its own: prunes, and removes what is empty */
}
