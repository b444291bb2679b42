/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"

int gs_status_write(const char *node_dir, const gs_status_t *s, gs_error_t *err)
{
    char tmp[320], path[320];
    FILE *f;
    int fd;

    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", node_dir, GS_STATUS_FILE);
    snprintf(path, sizeof(path), "%s/%s", node_dir, GS_STATUS_FILE);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        return gs_error_set(err, e, "cannot write '%s': %s", tmp, strerror(e));
    }
    fprintf(f, "gsrun-status 1\nmps %s\nmessage %s\nagent_pid %d\nlauncher_pid %d\n"
               "gsrun_pid %d\nstarted_ms %lld\nmemory_limit_mb %lld\nlocal_size %d\n"
               "registered %d\nalive %d\n",
            s->mps, s->message, s->agent_pid, s->launcher_pid, s->gsrun_pid, s->started_ms,
            s->memory_limit_mb, s->local_size, s->registered, s->alive);
    for (int g = 0; g < s->ngpus; g++) {
        const gs_status_gpu_t *x = &s->gpu[g];
        fprintf(f, "gpu.%d.uuid %s\ngpu.%d.name %s\ngpu.%d.daemon_pid %d\ngpu.%d.server_pid %d\n"
                   "gpu.%d.core %s\ngpu.%d.percentage %s\ngpu.%d.ranks %s\n"
                   "gpu.%d.registered %d\ngpu.%d.alive %d\n"
                   "gpu.%d.gpu %d\ngpu.%d.server %d\ngpu.%d.servers %d\ngpu.%d.pipe_dir %s\n",
                g, x->uuid, g, x->name, g, x->daemon_pid, g, x->server_pid, g, x->core, g, x->pct,
                g, x->ranks, g, x->registered, g, x->alive, g, x->gpu, g, x->server, g,
                x->nservers, g, x->pipe_dir);
    }
    fputs("end\n", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return gs_error_set(err, e, "cannot publish '%s': %s", path, strerror(e));
    }
    return 0;
}

static void set_field(gs_status_t *s, const char *key, const char *val)
{
    int g;
    char sub[32];
#define STR(dst) snprintf(dst, sizeof(dst), "%s", val)
    if (sscanf(key, "gpu.%d.%31s", &g, sub) == 2) {
        if (g < 0 || g >= GS_MAX_GPUS) {
            return;
        }
        gs_status_gpu_t *x = &s->gpu[g];
        s->ngpus = g + 1 > s->ngpus ? g + 1 : s->ngpus;
        if (strcmp(sub, "uuid") == 0) {
            STR(x->uuid);
        } else if (strcmp(sub, "name") == 0) {
            STR(x->name);
        } else if (strcmp(sub, "daemon_pid") == 0) {
            x->daemon_pid = atoi(val);
        } else if (strcmp(sub, "server_pid") == 0) {
            x->server_pid = atoi(val);
        } else if (strcmp(sub, "core") == 0) {
            STR(x->core);
        } else if (strcmp(sub, "percentage") == 0) {
            STR(x->pct);
        } else if (strcmp(sub, "ranks") == 0) {
            STR(x->ranks);
        } else if (strcmp(sub, "registered") == 0) {
            x->registered = atoi(val);
        } else if (strcmp(sub, "alive") == 0) {
            x->alive = atoi(val);
        } else if (strcmp(sub, "gpu") == 0) {
            x->gpu = atoi(val);
        } else if (strcmp(sub, "server") == 0) {
            x->server = atoi(val);
        } else if (strcmp(sub, "servers") == 0) {
            x->nservers = atoi(val);
        } else if (strcmp(sub, "pipe_dir") == 0) {
            STR(x->pipe_dir);
        }
    } else if (strcmp(key, "mps") == 0) {
        STR(s->mps);
    } else if (strcmp(key, "message") == 0) {
        STR(s->message);
    } else if (strcmp(key, "agent_pid") == 0) {
        s->agent_pid = atoi(val);
    } else if (strcmp(key, "launcher_pid") == 0) {
        s->launcher_pid = atoi(val);
    } else if (strcmp(key, "gsrun_pid") == 0) {
        s->gsrun_pid = atoi(val);
    } else if (strcmp(key, "started_ms") == 0) {
        s->started_ms = atoll(val);
    } else if (strcmp(key, "memory_limit_mb") == 0) {
        s->memory_limit_mb = atoll(val);
    } else if (strcmp(key, "local_size") == 0) {
        s->local_size = atoi(val);
    } else if (strcmp(key, "registered") == 0) {
        s->registered = atoi(val);
    } else if (strcmp(key, "alive") == 0) {
        s->alive = atoi(val);
    }
#undef STR
}

int gs_status_read(const char *node_dir, gs_status_t *s, gs_error_t *err)
{
    char path[320], line[512];
    int ended = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", node_dir, GS_STATUS_FILE);
    int fd = gs_rundir_open_regular(path);
    if (fd < 0 || (f = fdopen(fd, "r")) == NULL) {
        int e = fd < 0 ? -fd : errno;
        if (fd >= 0) {
            close(fd);
        }
        return gs_error_set(err, e, "cannot read '%s': %s", path, strerror(e));
    }
    if (fgets(line, sizeof(line), f) == NULL || strcmp(line, "gsrun-status 1\n") != 0) {
        fclose(f);
        return gs_error_set(err, EINVAL, "'%s' is not a gsrun status file", path);
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, "end") == 0) {
            ended = 1;
            break;
        }
        char *sp = strchr(line, ' ');
        if (sp != NULL) {
            *sp = '\0';
            set_field(s, line, sp + 1);
        }
    }
    fclose(f);
    return ended ? 0 : gs_error_set(err, EINVAL, "'%s' is truncated", path);
}

/* Length of the valid UTF-8 sequence at p (1 to 4), or 0. */
static int utf8_len(const unsigned char *p)
{
    int n = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3
                                                       : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xc2) || (n == 4 && p[0] > 0xf4)) {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    return n;
}

void gs_status_clean(char *s)
{
    /* What a status file says was written by its job's user: root's
     * terminal gets no control sequence and JSON no invalid UTF-8. */
    for (unsigned char *p = (unsigned char *)s; *p != '\0';) {
        int n = utf8_len(p);
        if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
            *p++ = '?';
        } else {
            p += n;
        }
    }
}

static void clean_all(gs_status_t *s)
{
    gs_status_clean(s->job);
    gs_status_clean(s->job_dir);
    gs_status_clean(s->mps);
    gs_status_clean(s->message);
    for (int g = 0; g < s->ngpus; g++) {
        gs_status_gpu_t *x = &s->gpu[g];
        gs_status_clean(x->uuid);
        gs_status_clean(x->name);
        gs_status_clean(x->core);
        gs_status_clean(x->pct);
        gs_status_clean(x->ranks);
        gs_status_clean(x->pipe_dir);
    }
}

static int pid_gone(int pid)
{
    return pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH);
}

/* One job dir: its node dir for this node, and what it says; only the
 * caller's (others = 0) or only other users' (others = 1). */
static int read_job(const char *tmpdir, const char *name, const char *node, int others,
                    gs_status_t *s)
{
    char job_dir[256], node_dir[320];
    struct stat sb;
    gs_error_t err;

    if ((size_t)snprintf(job_dir, sizeof(job_dir), "%s/%s", tmpdir, name) >= sizeof(job_dir) ||
        lstat(job_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || (sb.st_uid == getuid()) == others) {
        return 0;
    }
    snprintf(node_dir, sizeof(node_dir), "%s/%s", job_dir, node);
    if (lstat(node_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return 0; /* not on this node, or its agent has finished */
    }
    memset(s, 0, sizeof(*s));
    snprintf(s->job, sizeof(s->job), "%s", name);
    snprintf(s->node, sizeof(s->node), "%s", node);
    snprintf(s->job_dir, sizeof(s->job_dir), "%s", job_dir);
    s->uid = (int)sb.st_uid;
    if (gs_status_read(node_dir, s, &err) != 0) {
        /* No status yet: an agent starting, or one killed before it wrote. */
        snprintf(s->mps, sizeof(s->mps), "starting");
        s->stale = time(NULL) - sb.st_mtime > 60;
        clean_all(s);
        return 1;
    }
    s->stale = pid_gone(s->agent_pid);
    clean_all(s);
    return 1;
}

/* A job dir's name: gsrun's and the component's (mkdtemp), and the
 * guessable names of a Slurm step's or batch job's, old and current. */
static int is_job_name(const char *n)
{
    return (strncmp(n, "gsrun.", 6) == 0 && strlen(n) == 12) || strncmp(n, "gsrun.slurm-", 12) == 0 ||
           strncmp(n, "gsrun.job-", 10) == 0 || strncmp(n, "job-", 4) == 0 ||
           strncmp(n, "slurm-", 6) == 0 || strncmp(n, "exec-", 5) == 0;
}

/* A user's private base in a TMPDIR, "gsrun-<uid>": the rank prefix's jobs
 * (gsrun exec) and a user's own batch jobs live there. */
static int is_user_base(const char *n)
{
    if (strncmp(n, "gsrun-", 6) != 0 || n[6] == '\0') {
        return 0;
    }
    int dot = 0; /* gsrun-<uid>.<k>: the name after another user took gsrun-<uid> */
    for (const char *p = n + 6; *p != '\0'; p++) {
        if (*p == '.' && !dot && p[1] != '\0' && p > n + 6) {
            dot = 1;
        } else if (*p < '0' || *p > '9') {
            return 0;
        }
    }
    return 1;
}

static int scan_pass(const char *tmpdir, const char *node, int others, gs_status_t *out,
                     int max)
{
    int n = 0;
    DIR *d = opendir(tmpdir);

    if (d == NULL) {
        return 0;
    }
    for (struct dirent *e; n < max && (e = readdir(d)) != NULL;) {
        if (is_job_name(e->d_name)) {
            n += read_job(tmpdir, e->d_name, node, others, &out[n]);
        }
    }
    closedir(d);
    return n;
}

/* The jobs in the users' private bases of tmpdir (only directories, never
 * links; read_job checks each job dir's owner). */
static int scan_bases(const char *tmpdir, const char *node, int others, gs_status_t *out,
                      int max)
{
    int n = 0;
    DIR *d = opendir(tmpdir);
    if (d == NULL) {
        return 0;
    }
    for (struct dirent *e; n < max && (e = readdir(d)) != NULL;) {
        char base[GS_PATH_MAX];
        struct stat st;
        if (!is_user_base(e->d_name) ||
            (size_t)snprintf(base, sizeof(base), "%s/%s", tmpdir, e->d_name) >= sizeof(base) ||
            lstat(base, &st) != 0 || !S_ISDIR(st.st_mode) || (!others && st.st_uid != getuid()) ||
            (others && st.st_uid == getuid())) {
            continue;
        }
        n += scan_pass(base, node, others, out + n, max - n);
    }
    closedir(d);
    return n;
}

int gs_status_scan(const char *tmpdir, int all_users, gs_status_t *out, int max)
{
    char node[64];
    gs_rundir_node_name(node, sizeof(node));
    /* The caller's own jobs first: others' (root sees every user's) can
     * never crowd them out of the list. */
    int n = scan_pass(tmpdir, node, 0, out, max);
    n += scan_bases(tmpdir, node, 0, out + n, max - n);
    if (all_users) {
        n += scan_pass(tmpdir, node, 1, out + n, max - n);
        n += scan_bases(tmpdir, node, 1, out + n, max - n);
    }
    return n;
}
