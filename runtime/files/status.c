/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/files/status.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/core/limits.h"
#include "runtime/core/proc.h"
#include "runtime/files/preflight.h"
#include "runtime/files/rundir.h"
#include "runtime/wire/agentcmd.h"

/* --- the rows: the file's lines and the JSON's members, in the JSON's order */

static void json_state(FILE *f, const void *rec, const void *ctx)
{
    const gs_status_t *s = rec;
    (void)ctx;
    fprintf(f, "\"%s\"", s->stale ? "stale" : strcmp(s->mps, "starting") == 0 ? "starting"
                                                                               : "running");
}

static void json_uptime(FILE *f, const void *rec, const void *ctx)
{
    fprintf(f, "%.3f", gs_status_uptime_s(rec, *(const long long *)ctx));
}

#define JOB(name, type, flags, field)                                                              \
    {name, NULL, type, (flags), offsetof(gs_status_t, field), sizeof(((gs_status_t *)0)->field),   \
     NULL, NULL, NULL}
#define F GS_REC_FILE
#define J GS_REC_JSON

/* The job's part: "key value" lines, and the members of its JSON object. */
const gs_rec_field_t gs_status_fields[] = {
    JOB("job", GS_REC_STR, J, job), /* the reader's: the job dir's name */
    JOB("uid", GS_REC_INT, J, uid),
    {"state", NULL, GS_REC_CUSTOM, J, 0, 0, NULL, NULL, json_state},
    JOB("mps", GS_REC_STR, F | J, mps),
    JOB("message", GS_REC_STR, F | J, message),
    JOB("job_dir", GS_REC_STR, J, job_dir),
    JOB("agent_pid", GS_REC_INT, F | J, agent_pid),
    JOB("launcher_pid", GS_REC_INT, F | J, launcher_pid),
    JOB("gsrun_pid", GS_REC_INT, F | J, gsrun_pid),
    JOB("started_ms", GS_REC_LLONG, F, started_ms),
    {"uptime_s", NULL, GS_REC_CUSTOM, J, 0, 0, NULL, NULL, json_uptime},
    JOB("local_size", GS_REC_INT, F | J, local_size),
    JOB("registered", GS_REC_INT, F | J, registered),
    JOB("alive", GS_REC_INT, F | J, alive),
    JOB("memory_limit_mb", GS_REC_LLONG, F | J, memory_limit_mb),
    JOB("shared", GS_REC_STR, F | J, shared),
    JOB("pids", GS_REC_STR, F | J, pids),
    JOB("memory_every_ms", GS_REC_LLONG, F | J, memory_every_ms),
    GS_REC_END,
};

/* Files without the server lines have one server per GPU, in order: the
 * entry's index is its GPU's, and its GPU has one server. */
static void json_index(FILE *f, const void *rec, const void *ctx)
{
    const gs_status_server_t *x = rec;
    fprintf(f, "%d", x->gpu_servers > 0 ? x->gpu : *(const int *)ctx);
}

static void json_servers(FILE *f, const void *rec, const void *ctx)
{
    const gs_status_server_t *x = rec;
    (void)ctx;
    fprintf(f, "%d", x->gpu_servers > 0 ? x->gpu_servers : 1);
}

#define SRV(name, type, flags, field)                                                              \
    {name, NULL, type, (flags), offsetof(gs_status_server_t, field),                               \
     sizeof(((gs_status_server_t *)0)->field), NULL, NULL, NULL}

/* Each server's (each GPU's without MPS): "gpu.<entry>.key value". */
const gs_rec_field_t gs_status_server_fields[] = {
    {"index", NULL, GS_REC_CUSTOM, J, 0, 0, NULL, NULL, json_index},
    SRV("uuid", GS_REC_STR, F | J, uuid),
    SRV("name", GS_REC_STR, F | J, name),
    SRV("server", GS_REC_INT, F | J, server),
    {"servers", NULL, GS_REC_INT, F | J, offsetof(gs_status_server_t, gpu_servers), 0, NULL, NULL,
     json_servers},
    SRV("pipe_dir", GS_REC_STR, F | J, pipe_dir),
    SRV("daemon_pid", GS_REC_INT, F | J, daemon_pid),
    SRV("server_pid", GS_REC_INT, F | J, server_pid),
    SRV("core", GS_REC_STR, F | J, core),
    SRV("percentage", GS_REC_STR, F | J | GS_REC_NULL_EMPTY, pct),
    SRV("ranks", GS_REC_STR, F | J, ranks),
    SRV("registered", GS_REC_INT, F | J, registered),
    SRV("alive", GS_REC_INT, F | J, alive),
    SRV("gpu", GS_REC_INT, F, gpu),
    SRV("node_gpu", GS_REC_INT, F | J, node_gpu),
    SRV("jobs", GS_REC_STR, F | J, jobs),
    SRV("fault", GS_REC_STR, F | J | GS_REC_NULL_EMPTY, fault),
    SRV("wedged", GS_REC_STR, F | J | GS_REC_NULL_EMPTY, wedged),
    SRV("clients", GS_REC_STR, F | J | GS_REC_NULL_EMPTY, clients),
    SRV("mps_clients", GS_REC_INT, F | J | GS_REC_NULL_NEG, nclients),
    SRV("server_memory_mib", GS_REC_LLONG, F | J | GS_REC_NULL_NEG, server_mib),
    SRV("clients_memory_mib", GS_REC_LLONG, F | J | GS_REC_NULL_NEG, clients_mib),
    GS_REC_END,
};

#undef F
#undef J

double gs_status_uptime_s(const gs_status_t *s, long long now_ms)
{
    return s->started_ms > 0 && now_ms > s->started_ms ? (double)(now_ms - s->started_ms) / 1000.0
                                                      : 0.0;
}

/* The file's size at most: 64 servers of 22 lines each, their strings
 * full, and 1024 ranks of 7 lines. */
#define GS_STATUS_MAX (512 * 1024)

int gs_status_write(const char *node_dir, const gs_status_t *s, gs_error_t *err)
{
    char *buf = malloc(GS_STATUS_MAX), prefix[32];
    size_t used = 0;
    int rc = 0;

    if (buf == NULL) {
        return gs_error_set(err, ENOMEM, "out of memory for the status");
    }
    rc = gs_rec_put(buf, GS_STATUS_MAX, &used, "gsrun-status 1\n");
    rc = rc != 0 ? rc : gs_rec_format(gs_status_fields, s, "", buf, GS_STATUS_MAX, &used);
    for (int g = 0; rc == 0 && g < s->nservers; g++) {
        snprintf(prefix, sizeof(prefix), "gpu.%d.", g);
        rc = gs_rec_format(gs_status_server_fields, &s->server[g], prefix, buf, GS_STATUS_MAX,
                           &used);
    }
    for (int r = 0; rc == 0 && r < s->nranks && r < GS_STATUS_MAX_RANKS; r++) {
        snprintf(prefix, sizeof(prefix), "rank.%d.", r);
        rc = gs_rec_format(gs_status_rank_fields, &s->rank[r], prefix, buf, GS_STATUS_MAX, &used);
    }
    rc = rc != 0 ? rc : gs_rec_put(buf, GS_STATUS_MAX, &used, "end\n");
    if (rc != 0) {
        rc = gs_error_set(err, ENOSPC, "the status of '%s' does not fit in its buffer", node_dir);
    } else {
        rc = gs_rec_publish(node_dir, GS_STATUS_FILE, buf, err);
    }
    free(buf);
    return rc;
}

/* One line: "gpu.<entry>.<key>" is that entry's, "rank.<i>.<key>" that
 * rank's, else the job's. Unknown
 * keys and bad values are passed over (a reader of a newer agent's file). */
static void set_field(gs_status_t *s, const char *key, const char *val)
{
    int g, n = 0;
    if (sscanf(key, "gpu.%d.%n", &g, &n) == 1 && n > 0) {
        if (g < 0 || g >= GS_MAX_GPUS) {
            return;
        }
        s->nservers = g + 1 > s->nservers ? g + 1 : s->nservers;
        gs_rec_parse(gs_status_server_fields, &s->server[g], key + n, val);
    } else if (sscanf(key, "rank.%d.%n", &g, &n) == 1 && n > 0) {
        if (g < 0 || g >= GS_STATUS_MAX_RANKS) {
            return;
        }
        s->nranks = g + 1 > s->nranks ? g + 1 : s->nranks;
        gs_rec_parse(gs_status_rank_fields, &s->rank[g], key + n, val);
    } else {
        gs_rec_parse(gs_status_fields, s, key, val);
    }
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
    /* Bounded: root's `gsrun status` reads what users wrote (a sparse
     * 16 GiB file took it 36 s). */
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > GS_STATUS_MAX_BYTES) {
        fclose(f);
        return gs_error_set(err, EFBIG, "'%s' is larger than a status file can be (%d bytes)",
                            path, GS_STATUS_MAX_BYTES);
    }
    if (fgets(line, sizeof(line), f) == NULL || strcmp(line, "gsrun-status 1\n") != 0) {
        fclose(f);
        return gs_error_set(err, EINVAL, "'%s' is not a gsrun status file", path);
    }
    for (int g = 0; g < GS_MAX_GPUS; g++) { /* an older agent's file tells no memory */
        s->server[g].server_mib = s->server[g].clients_mib = GS_STATUS_MIB_UNKNOWN;
        s->server[g].nclients = -1;
    }
    for (int r = 0; r < GS_STATUS_MAX_RANKS; r++) {
        s->rank[r].memory_mib = s->rank[r].peak_mib = GS_STATUS_MIB_UNKNOWN;
        s->rank[r].entry = -1;
    }
    long total = 0;
    while (fgets(line, sizeof(line), f) != NULL && (total += (long)strlen(line)) <= GS_STATUS_MAX_BYTES) {
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

void gs_status_clean_placement(gs_ledger_summary_t *pl)
{
    for (int g = 0; g < pl->n; g++) {
        gs_status_clean(pl->gpu[g].uuid);
        gs_status_clean(pl->gpu[g].jobs);
    }
}

static void clean_all(gs_status_t *s)
{
    gs_rec_each_str(gs_status_fields, s, gs_status_clean);
    for (int g = 0; g < s->nservers; g++) {
        gs_rec_each_str(gs_status_server_fields, &s->server[g], gs_status_clean);
    }
    for (int r = 0; r < s->nranks; r++) {
        gs_rec_each_str(gs_status_rank_fields, &s->rank[r], gs_status_clean);
    }
}

static int pid_gone(int pid)
{
    return pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH);
}

/* The PID in a job dir's owner file (its gsrun, or the agent that claimed
 * it away from gsrun's node), or 0. */
static int owner_pid(const char *job_dir)
{
    char path[320], buf[32] = "";
    snprintf(path, sizeof(path), "%s/" GS_OWNER_FILE, job_dir);
    int fd = gs_rundir_open_regular(path);
    if (fd < 0) {
        return 0;
    }
    ssize_t r = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return r > 0 ? atoi(buf) : 0;
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
        /* No status yet: an agent starting, or one killed before it wrote
         * (a crashed job): stale once the process that made the job dir
         * is gone (as the next gsrun judges it: preflight.c), or 60 s on. */
        int owner = owner_pid(job_dir);
        snprintf(s->mps, sizeof(s->mps), "starting");
        if (owner > 1 && pid_gone(owner)) {
            s->stale = 1;
            snprintf(s->message, sizeof(s->message),
                     "no agent status, and the gsrun (or agent) that made its directory, PID %d, "
                     "is gone",
                     owner);
        } else if (time(NULL) - sb.st_mtime > 60) {
            s->stale = 1;
            snprintf(s->message, sizeof(s->message),
                     "no agent status 60 s after its node directory was made");
        }
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
           strncmp(n, "slurm-", 6) == 0 || strncmp(n, "exec-", 5) == 0 ||
           strcmp(n, "mps-share") == 0;
}

/* A user's private base in a TMPDIR, "gsrun-<uid>": the rank prefix's jobs
 * (gsrun exec) and a user's own batch jobs live there. */
static int is_user_base(const char *n)
{
    if (strncmp(n, "gsrun-", 6) != 0 || n[6] == '\0') {
        return 0;
    }
    /* gsrun-<uid>.<k>: the name after another user took gsrun-<uid>;
     * gsrun-<uid>.x<6 letters or digits>: after others took all those
     * (gs_rundir_user_base_any). */
    const char *p = n + 6;
    while (*p >= '0' && *p <= '9') {
        p++;
    }
    if (p == n + 6) {
        return 0;
    }
    if (*p == '\0') {
        return 1;
    }
    if (*p++ != '.') {
        return 0;
    }
    if (*p == 'x' && strlen(p) == 7) {
        for (const char *q = p + 1; *q != '\0'; q++) {
            if (!((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))) {
                return 0;
            }
        }
        return 1;
    }
    const char *q = p;
    while (*q >= '0' && *q <= '9') {
        q++;
    }
    return q > p && *q == '\0';
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

/* The job dir a shared agent was started with (--job-dir on its command
 * line): 0, or -1 when pid is not one. */
static int shared_agent_dir(const char *pid, char *out, size_t len)
{
    char path[64], buf[GS_LINE_MAX];
    if (gs_proc_comm(NULL, (pid_t)atoi(pid), buf, sizeof(buf)) != 0 ||
        strcmp(buf, GS_AGENT_SHARED_COMM) != 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    for (const char *a = buf; a < buf + n; a += strlen(a) + 1) {
        const char *next = a + strlen(a) + 1;
        if (strcmp(a, "--job-dir") == 0 && next < buf + n) {
            snprintf(out, len, "%s", next);
            return 0;
        }
    }
    return -1;
}

int gs_status_scan_shared(int all_users, const gs_status_t *listed, int n, gs_status_t *out,
                          int max)
{
    char node[64];
    int added = 0;
    DIR *d = opendir("/proc");
    if (d == NULL) {
        return 0;
    }
    gs_rundir_node_name(node, sizeof(node));
    for (struct dirent *e; added < max && (e = readdir(d)) != NULL;) {
        char dir[256], path[64];
        struct stat st;
        if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
            shared_agent_dir(e->d_name, dir, sizeof(dir)) != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%s", e->d_name);
        int known = stat(path, &st) != 0 || (!all_users && st.st_uid != getuid());
        for (int i = 0; i < n && !known; i++) {
            known = strcmp(listed[i].job_dir, dir) == 0;
        }
        for (int i = 0; i < added && !known; i++) {
            known = strcmp(out[i].job_dir, dir) == 0;
        }
        char *slash = strrchr(dir, '/');
        if (known || slash == NULL || slash == dir) {
            continue;
        }
        *slash = '\0'; /* its base, and the dir's name there */
        added += read_job(dir, slash + 1, node, st.st_uid != getuid(), &out[added]);
    }
    closedir(d);
    return added;
}
