/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/core/proctree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/core/proc.h"

/* The largest PID a set of PIDs holds (the kernel's own limit, 2^22). */
#define GS_PROCTREE_PID_LIMIT 4194304

long long gs_proctree_stat_field(pid_t pid, int k)
{
    char buf[1024], *save = NULL, *tok;
    if (gs_proc_stat_fields(NULL, pid, buf, sizeof(buf)) != 0) {
        return -1;
    }
    tok = strtok_r(buf, " ", &save);
    for (int i = GS_STAT_STATE; tok != NULL && i < k; i++) {
        tok = strtok_r(NULL, " ", &save);
    }
    if (tok == NULL) {
        return -1;
    }
    return k == GS_STAT_STATE ? (long long)(unsigned char)tok[0] : strtoll(tok, NULL, 10);
}

int gs_proctree_exiting(pid_t pid)
{
    long long flags = gs_proctree_stat_field(pid, 9);
    return flags > 0 && (flags & 0x4) != 0; /* PF_EXITING */
}

int gs_proctree_gone(pid_t pid, int pidfd)
{
    return pid <= 1 || !gs_proc_alive(pid, pidfd) || gs_proctree_exiting(pid);
}

/* Whether pid's command name is one of names (NULL-terminated). */
static int named(pid_t pid, const char *const *names)
{
    char comm[32];
    if (names == NULL) {
        return 0;
    }
    gs_proc_comm(NULL, pid, comm, sizeof(comm));
    for (; *names != NULL; names++) {
        if (strcmp(comm, *names) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The spared: a name of spare's, and, where the caller named one, the
 * executable it runs (a name alone is any process's to take: a copy of
 * sleep named gsrun-share, started by a rank, outlived the job). */
typedef struct {
    const char *const *names;
    int by_exe;
    dev_t dev;
    ino_t ino;
} spare_t;

static int spared_one(pid_t pid, const spare_t *sp)
{
    char path[64];
    struct stat st;
    if (!named(pid, sp->names)) {
        return 0;
    }
    if (!sp->by_exe) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    return stat(path, &st) == 0 && st.st_dev == sp->dev && st.st_ino == sp->ino;
}

/* Whether the environment at path (its first 256 KiB) holds a "marker..."
 * entry. */
static int env_holds(const char *path, const char *marker)
{
    static char env[256 * 1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    long n = gs_proc_read_all(fd, env, sizeof(env) - 1, gs_proc_now_ms() + 100);
    close(fd);
    size_t m = strlen(marker);
    for (long i = 0; i < n; i += (long)strlen(env + i) + 1) {
        env[n] = '\0';
        if (strncmp(env + i, marker, m) == 0) {
            return 1;
        }
    }
    return 0;
}

static int marked(pid_t pid, const char *marker)
{
    char path[96];
    if (marker == NULL) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    if (env_holds(path, marker)) {
        return 1;
    }
    /* A leader that has exited shows no environment; its threads do. */
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *t;
    int found = 0;
    while (d != NULL && !found && (t = readdir(d)) != NULL) {
        if (t->d_name[0] != '.' && atoi(t->d_name) != (int)pid) {
            snprintf(path, sizeof(path), "/proc/%d/task/%.20s/environ", (int)pid, t->d_name);
            found = env_holds(path, marker);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}

/* The process groups of the leftovers one pass signals whole, at most. */
#define GROUPS_MAX 256

/* One process of the snapshot: what /proc/<pid>/stat said. */
typedef struct {
    pid_t pid, ppid, pgrp;
    char state;
} proc_entry_t;

/* A set of PIDs, one bit each up to the kernel's pid_max. */
typedef struct {
    unsigned char *bits;
    long max;
} pidset_t;

static int pidset_init(pidset_t *s)
{
    char buf[32];
    long max = 0;
    int fd = open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        max = strtol(buf, NULL, 10);
        close(fd);
    }
    s->max = max > 0 && max <= GS_PROCTREE_PID_LIMIT ? max + 1 : GS_PROCTREE_PID_LIMIT + 1;
    s->bits = calloc((size_t)(s->max / 8 + 1), 1);
    return s->bits != NULL ? 0 : -ENOMEM;
}

static void pidset_clear(pidset_t *s)
{
    memset(s->bits, 0, (size_t)(s->max / 8 + 1));
}

static int pidset_has(const pidset_t *s, pid_t pid)
{
    return pid > 0 && pid < s->max && (s->bits[pid / 8] & (1u << (pid % 8)));
}

static void pidset_add(pidset_t *s, pid_t pid)
{
    if (pid > 0 && pid < s->max) {
        s->bits[pid / 8] |= (unsigned char)(1u << (pid % 8));
    }
}

/* Every process of /proc with its parent and state, into a growing array.
 * Returns how many, or -ENOMEM. */
static long snapshot(proc_entry_t **list, long *cap)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    long n = 0;
    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        char *end, buf[1024];
        long v = strtol(e->d_name, &end, 10);
        int ppid, pgrp;
        char state;
        if (*end != '\0' || v <= 1 || gs_proc_stat_fields(NULL, (pid_t)v, buf, sizeof(buf)) != 0 ||
            sscanf(buf, "%c %d %d", &state, &ppid, &pgrp) != 3) {
            continue;
        }
        if (n == *cap) {
            long grown = *cap > 0 ? *cap * 2 : 1024;
            proc_entry_t *more = realloc(*list, (size_t)grown * sizeof(**list));
            if (more == NULL) {
                closedir(d);
                return -ENOMEM;
            }
            *list = more, *cap = grown;
        }
        (*list)[n++] = (proc_entry_t){(pid_t)v, (pid_t)ppid, (pid_t)pgrp, state};
    }
    closedir(d);
    return n;
}

/* Whether a process /proc shows is running: not in state Z, or in state Z
 * with threads left (gs_proc_threads). */
static int running(const proc_entry_t *e)
{
    return e->state != 'Z' || gs_proc_threads(NULL, e->pid) > 1;
}

/* Marks in tree the descendants of self in the snapshot that are below no
 * spared process (those go in spared): passes until the set stops growing
 * (a child may be listed before its parent). */
static void mark_tree(const proc_entry_t *list, long n, pid_t self, const spare_t *spare,
                      pidset_t *tree, pidset_t *spared)
{
    int grew = 1;
    pidset_add(tree, self);
    while (grew) {
        grew = 0;
        for (long i = 0; i < n; i++) {
            const proc_entry_t *e = &list[i];
            if (pidset_has(tree, e->pid) || pidset_has(spared, e->pid) ||
                !pidset_has(tree, e->ppid)) {
                continue;
            }
            if (spared_one(e->pid, spare)) {
                pidset_add(spared, e->pid);
            } else {
                pidset_add(tree, e->pid);
                grew = 1;
            }
        }
    }
}

/* What the search keeps between its passes. */
typedef struct {
    spare_t sp;
    const char *marker;
    pid_t self;
    pidset_t signalled, tree, spared, keep;
    pid_t groups[GROUPS_MAX]; /* this pass's: the process groups to end whole */
    int ngroups;
    pidset_t hit;  /* the process groups signalled whole */
    int by_group;  /* processes those signals ended that no pass saw running */
} search_t;

/* Reaps this process's exited children. Where a marker picks what to end
 * (gsrun's end of what the ranks left), one that died of SIGKILL in a
 * process group we signalled whole, and that no pass signalled itself (a
 * fork chain's hop, which lives too briefly for any pass to see it), is
 * counted in s->by_group: its death is the only sight of it, and gsrun
 * says how many it ended. A whole tree (root's keeper: a fork bomb's
 * thousands) is reaped without a look at each. */
static void reap(search_t *s)
{
    siginfo_t si;
    if (s->marker == NULL) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        return;
    }
    for (;;) {
        memset(&si, 0, sizeof(si));
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid <= 0) {
            return;
        }
        pid_t pid = si.si_pid;
        if (si.si_code == CLD_KILLED && si.si_status == SIGKILL &&
            !pidset_has(&s->signalled, pid) &&
            pidset_has(&s->hit, (pid_t)gs_proctree_stat_field(pid, GS_STAT_PGRP))) {
            pidset_add(&s->signalled, pid);
            s->by_group++;
        }
        waitpid(pid, NULL, WNOHANG);
    }
}

/* Between passes: for ms, SIGKILLs every child of ours (but the spared and
 * the unmarked) straight from the kernel's list of them, again and again.
 * A fork chain
 * hops faster than a pass over /proc, and each hop is our child from the
 * moment the hop before it exits; a SIGKILL that reaches a hop before its
 * fork has returned ends the chain. A PID of a child stays ours until we
 * reap it: no pidfd needed. Returns how many new ones it signalled, or -1
 * where the kernel keeps no such list (CONFIG_PROC_CHILDREN). */
static int kill_children(search_t *s, int ms)
{
    char path[64], buf[4096];
    long long end = gs_proc_now_ms() + ms;
    int count = 0;
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)gettid());
    do {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        long pid = 0;
        ssize_t n;
        if (fd < 0) {
            return -1;
        }
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
            for (ssize_t i = 0; i < n; i++) {
                if (buf[i] >= '0' && buf[i] <= '9') {
                    pid = pid * 10 + (buf[i] - '0');
                    continue;
                }
                if (pid > 1 && !spared_one((pid_t)pid, &s->sp) && marked((pid_t)pid, s->marker) &&
                    kill((pid_t)pid, SIGKILL) == 0 && !pidset_has(&s->signalled, (pid_t)pid)) {
                    pidset_add(&s->signalled, (pid_t)pid);
                    count++;
                }
                pid = 0;
            }
        }
        close(fd);
        reap(s);
    } while (gs_proc_now_ms() < end);
    return count;
}

/* Whether this process has no child at all, living or exited: reaps the
 * exited ones first. */
static int childless(search_t *s)
{
    siginfo_t si;
    reap(s);
    return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD;
}

static void add_group(search_t *s, pid_t pgrp)
{
    if (s->ngroups < GROUPS_MAX && pgrp > 1) {
        s->groups[s->ngroups++] = pgrp;
    }
}

/* The process groups this pass must not signal whole: ours, and every one
 * that holds a process outside the tree or spared. */
static void keep_groups(search_t *s, const proc_entry_t *list, long n)
{
    pidset_clear(&s->keep);
    pidset_add(&s->keep, getpgrp());
    for (long i = 0; i < n; i++) {
        if (!pidset_has(&s->tree, list[i].pid) || list[i].pid == s->self) {
            pidset_add(&s->keep, list[i].pgrp);
        }
    }
}

/* Tree process e, running: SIGKILL when it is of the kind asked for.
 * Returns 1 when it was signalled for the first time, 0 when it is of the
 * kind but was not (signalled before, or gone), -1 when it is not of the
 * kind (not counted alive). */
static int end_one(search_t *s, const proc_entry_t *e, int *waiting)
{
    if (!marked(e->pid, s->marker)) {
        /* Not the kind asked for (its children still count), or it exited
         * before its environment was read: a fork chain's hop lives
         * microseconds, and its child is in the tree by now. Then another
         * pass looks: a pass that took the chain for nothing ended the
         * search with the chain running. */
        long long st = gs_proctree_stat_field(e->pid, GS_STAT_STATE);
        if (st < 0 || st == 'Z') {
            (*waiting)++;
            add_group(s, e->pgrp); /* a hop's group: the chain's */
        } else {
            pidset_add(&s->keep, e->pgrp); /* running, not ours to end */
        }
        return -1;
    }
    add_group(s, e->pgrp);
    int ended = 0;
    int fd = gs_proc_pidfd_open(e->pid);
    int usable = fd >= 0 || errno == ENOSYS; /* no pidfds: by PID */
    /* Checked again once the pidfd holds the process: a PID reused between
     * the scan and the signal is never hit. */
    pid_t ppid = (pid_t)gs_proctree_stat_field(e->pid, GS_STAT_PPID);
    if (usable && pidset_has(&s->tree, ppid) && gs_proc_signal(e->pid, fd, SIGKILL) == 0 &&
        !pidset_has(&s->signalled, e->pid)) {
        pidset_add(&s->signalled, e->pid);
        ended = 1;
    }
    if (fd >= 0) {
        close(fd);
    }
    return ended;
}

/* One pass over a snapshot of n processes: each marked process of the tree,
 * then each of their process groups that holds nothing else. *alive: the
 * marked ones running; *waiting: exited children not reaped yet. Returns
 * how many it ended. */
static int pass(search_t *s, const proc_entry_t *list, long n, int *alive, int *waiting)
{
    int ended = 0;
    pidset_clear(&s->tree);
    pidset_clear(&s->spared);
    mark_tree(list, n, s->self, &s->sp, &s->tree, &s->spared);
    keep_groups(s, list, n);
    s->ngroups = 0;
    *alive = *waiting = 0;
    for (long i = 0; i < n; i++) {
        const proc_entry_t *e = &list[i];
        if (!pidset_has(&s->tree, e->pid) || e->pid == s->self) {
            continue;
        }
        if (!running(e)) {
            /* A zombie child of ours: its children came to us before it
             * died, and the next pass, after reaping it, sees them. */
            *waiting += e->ppid == s->self;
            continue;
        }
        int one = end_one(s, e, waiting);
        if (one >= 0) {
            (*alive)++;
            ended += one;
        }
    }
    /* Then each of their process groups that holds nothing else: a fork
     * chain's hops all stay in the group the chain began (a session of its
     * own, here), and a signal to the group reaches every hop at once, a
     * fork under way included, where one by one a loaded machine's chain
     * outran every pass (8 of 10 jobs left one running). */
    for (int k = 0; k < s->ngroups; k++) {
        if (!pidset_has(&s->keep, s->groups[k])) {
            if (kill(-s->groups[k], SIGKILL) == 0) {
                pidset_add(&s->hit, s->groups[k]);
            }
            pidset_add(&s->keep, s->groups[k]); /* once */
        }
    }
    return ended;
}

int gs_proctree_kill(const char *const *spare, const char *spare_exe, const char *marker,
                     int timeout_ms, int *left)
{
    search_t *s = calloc(1, sizeof(*s));
    struct stat est;
    long long deadline = gs_proc_now_ms() + timeout_ms;
    proc_entry_t *list = NULL;
    long cap = 0;
    int ended = 0, alive = 0, waiting = 0;

    *left = 0;
    if (s == NULL) {
        return -ENOMEM;
    }
    s->sp.names = spare;
    s->marker = marker;
    s->self = getpid();
    if (spare_exe != NULL) {
        s->sp.by_exe = 1;
        if (stat(spare_exe, &est) == 0) {
            s->sp.dev = est.st_dev, s->sp.ino = est.st_ino;
        } /* else none is spared: no process runs a file that is not there */
    }
    if (pidset_init(&s->signalled) != 0 || pidset_init(&s->tree) != 0 ||
        pidset_init(&s->spared) != 0 || pidset_init(&s->keep) != 0 || pidset_init(&s->hit) != 0) {
        ended = -ENOMEM;
    }
    while (ended >= 0) {
        childless(s);
        long n = snapshot(&list, &cap);
        if (n < 0) {
            ended = -ENOMEM;
            break;
        }
        ended += pass(s, list, n, &alive, &waiting);
        /* Done when a whole pass found nothing running and no exited child
         * to reap; for the whole tree (no marker, nothing spared), only when
         * no child is left at all, which no race between passes can fake. */
        if (alive == 0 && waiting == 0 && (spare != NULL || marker != NULL || childless(s))) {
            break;
        }
        if (gs_proc_now_ms() >= deadline) {
            *left = alive > 0 ? alive : 1;
            break;
        }
        int fast = kill_children(s, 20);
        if (fast < 0) {
            usleep(alive > 0 ? 2000 : 200); /* the killed ones' children come back to us */
        } else {
            ended += fast;
        }
    }
    if (ended >= 0) {
        reap(s); /* a group's last hops, dead by now */
        ended += s->by_group;
    }
    free(list);
    free(s->hit.bits);
    free(s->tree.bits);
    free(s->spared.bits);
    free(s->signalled.bits);
    free(s->keep.bits);
    free(s);
    return ended;
}

/* Whether a child of ours named in names (NULL-terminated) is left. */
static int named_child_left(void *names)
{
    pid_t self = getpid();
    int left = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && !left && (e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);
        left = pid > 1 && gs_proctree_stat_field(pid, GS_STAT_PPID) == self &&
               named(pid, (const char *const *)names);
    }
    if (d != NULL) {
        closedir(d);
    }
    return left;
}

int gs_proctree_reap(const char *const *names, int timeout_ms)
{
    return gs_proc_reap_while(named_child_left, (void *)names, timeout_ms);
}

int gs_proctree_stopped(pid_t pid)
{
    long long state = pid > 0 ? gs_proctree_stat_field(pid, GS_STAT_STATE) : 0;
    return state == 'T' || state == 't';
}
