/* SPDX-License-Identifier: BSD-3-Clause */
/* After the launcher: the node agents' end and their reports. */
#include "gs_autoconf.h"

#include "launcher/reports.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "runtime/core/proc.h"
#include "runtime/files/rundir.h"
#include "runtime/files/status_end.h"
#include "runtime/core/limits.h"

static void on_alarm(int sig)
{
    (void)sig; /* only interrupts a blocking flock */
}

/* An agent removes its node dir (under the dir's lock) after its report:
 * the dir still there, unlocked and without a report, is an agent that was
 * killed with its guard (nothing else ends both). */
static int gone_unreported(const char *job_dir, const char *node)
{
    char dir[GS_PATH_MAX], report[GS_PATH_MAX];
    struct stat st;
    snprintf(dir, sizeof(dir), "%s/%s", job_dir, node);
    snprintf(report, sizeof(report), "%s/%s.report", job_dir, node);
    return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && lstat(report, &st) != 0;
}

void gs_wait_for_agents(const char *job_dir, int timeout_ms)
{
    int fds[64];
    char names[64][64];
    long long deadline = gs_proc_now_ms() + timeout_ms;
    int n = gs_rundir_open_nodes(job_dir, fds, names, 64);
    struct sigaction alrm;

    memset(&alrm, 0, sizeof(alrm));
    alrm.sa_handler = on_alarm;
    sigemptyset(&alrm.sa_mask);
    sigaction(SIGALRM, &alrm, NULL);

    for (int i = 0; i < n; i++) {
        long long left = deadline - gs_proc_now_ms();
        int locked;
        if (left > 0) {
            struct itimerval it = {{0, 0}, {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000}};
            struct itimerval off = {{0, 0}, {0, 0}};
            setitimer(ITIMER_REAL, &it, NULL);
            locked = flock(fds[i], LOCK_EX) == 0;
            setitimer(ITIMER_REAL, &off, NULL);
        } else {
            locked = flock(fds[i], LOCK_EX | LOCK_NB) == 0;
        }
        if (!locked) {
            fprintf(stderr,
                    "gsrun: the node agent of %s has not finished stopping MPS after %d s; "
                    "leaving it running (its directory is %s/%s)\n",
                    names[i], timeout_ms / 1000, job_dir, names[i]);
        } else if (gone_unreported(job_dir, names[i])) {
            fprintf(stderr,
                    "gsrun: problem: node %s: the node agent ended without its report (it and "
                    "its guard were killed): the job's ranks there ran unwatched and unplaced "
                    "from then on, and its MPS servers may not have been stopped\n",
                    names[i]);
        }
        close(fds[i]);
    }
}

int gs_print_reports(const char *job_dir, int verbose, int job_status, int *fault_end)
{
    DIR *d = opendir(job_dir);
    struct dirent *e;
    int problems = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 8 || strcmp(e->d_name + n - 7, ".report") != 0) {
            continue;
        }
        char path[GS_PATH_MAX], line[1024];
        int p = 0, fe = 0;
        snprintf(path, sizeof(path), "%s/%s", job_dir, e->d_name);
        int fd = gs_rundir_open_regular(path);
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        if (f == NULL) {
            if (fd >= 0) {
                close(fd);
            }
            continue;
        }
        if (fgets(line, sizeof(line), f) != NULL) {
            sscanf(line, "gsrun-report problems=%d fault_end=%d", &p, &fe);
        }
        if (fe && fault_end != NULL) {
            *fault_end = 1;
        }
        problems += p;
        while ((verbose || p > 0) && fgets(line, sizeof(line), f) != NULL) {
            if (verbose || strncmp(line, "problem: ", 9) == 0) {
                char told[1300];
                gs_status_end_fill(line, job_status, told, sizeof(told));
                fprintf(stderr, "gsrun: %s", told);
            }
        }
        fclose(f);
    }
    closedir(d);
    return problems;
}
