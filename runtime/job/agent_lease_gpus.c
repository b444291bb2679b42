/* SPDX-License-Identifier: BSD-3-Clause */
/* --mps-share=node, a job's side: the node's GPUs from the user's shared
 * agent (its lister keeps NVML started: a job that takes them loads no NVML
 * of its own), and where that agent lives (its dirs and socket; a base
 * other users took is said once). */
#include "gs_autoconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/job/job_int.h"
#include "runtime/core/proc.h"
#include "runtime/core/proctree.h"
#include "runtime/core/unixsock.h"
#include "runtime/files/share_dir.h"
#include "runtime/wire/lease.h"

int gs_agent_share_socket(gs_agent_t *a, char *dir, size_t dlen, char *sock, size_t slen,
                          int make, gs_error_t *err)
{
    gs_job_t *j = gs_job(a);
    char taken[512];
    int rc = gs_share_dir_find(make, dir, dlen, j->share_dir, sizeof(j->share_dir), sock, slen,
                               taken, sizeof(taken), err);
    if (rc == 0 && make) {
        gs_agent_tell_base(a, taken, dir);
    }
    return rc;
}

/* How long a job's agent waits for the shared agent's GPUs: a few ms when
 * it runs; past this the job lists them itself. */
#define GPUS_ASK_MS 2000

/* The GPUs the user's shared agent listed, when one runs: 0 with a->gpus
 * set (in this job's CUDA order), or -errno (none answered). */
int gs_agent_share_listing(gs_agent_t *a, gs_gpu_list_t *l)
{
    gs_job_t *j = gs_job(a);
    char dir[560], sock[700];
    gs_error_t ignored;
    size_t cap = (size_t)GS_MAX_GPUS * GS_GPU_LINE_MAX + 256;
    int rc = gs_agent_share_socket(a, dir, sizeof(dir), sock, sizeof(sock), 0, &ignored);
    if (rc != 0) {
        return rc;
    }
    int c = gs_unixsock_connect(sock, &ignored);
    if (c < 0) {
        return c; /* none runs: the job's agent starts one once it has planned */
    }
    if (gs_proctree_stopped(gs_unixsock_peer(c))) {
        close(c);
        return -EAGAIN; /* the job lists them itself; its lease says why */
    }
    char *buf = malloc(cap);
    long got = buf == NULL ? -ENOMEM
               : send(c, GS_LEASE_GPUS_ASK, strlen(GS_LEASE_GPUS_ASK), MSG_NOSIGNAL) !=
                       (ssize_t)strlen(GS_LEASE_GPUS_ASK)
                   ? -EPIPE
                   : gs_proc_read_all(c, buf, cap, gs_proc_now_ms() + GPUS_ASK_MS);
    close(c);
    int count, beyond, cuda;
    char reason[sizeof(l->reason)];
    const char *body, *why_not;
    rc = -EPROTO;
    if (got > 0 &&
        gs_lease_parse_gpus(buf, &count, &cuda, &beyond, reason, sizeof(reason), &body) == 0) {
        char *line = body != NULL ? buf + (body - buf) : NULL;
        memset(l, 0, sizeof(*l));
        l->cuda_version = cuda;
        l->beyond = beyond;
        memcpy(l->reason, reason, sizeof(l->reason));
        rc = 0;
        for (int g = 0; g < count && rc == 0; g++) {
            char *next = line != NULL ? strchr(line + 1, '\n') : NULL;
            if (next == NULL) {
                rc = -EPROTO;
                break;
            }
            *next = '\0';
            rc = gs_gpu_from_line(line + 1, &l->gpu[g]);
            line = next;
        }
        l->count = rc == 0 ? count : 0;
        if (rc == 0) {
            /* In this job's CUDA order, which may not be the shared agent's. */
            const char *order = getenv("CUDA_DEVICE_ORDER");
            gs_gpu_sort(l, order != NULL && strcmp(order, "PCI_BUS_ID") == 0);
        }
    }
    if (rc != 0 && !j->gpus_ask_told) {
        /* Once (the watch asks again while the job runs), with -v. */
        char why[300];
        if (got > 0 && gs_lease_parse_refusal(buf, &why_not) == 0) {
            snprintf(why, sizeof(why), "%.*s", (int)strcspn(why_not, "\n"), why_not);
        } else if (got == -ETIMEDOUT) {
            snprintf(why, sizeof(why), "no answer within %d ms", GPUS_ASK_MS);
        } else {
            snprintf(why, sizeof(why), "%s",
                     got > 0 ? "an answer this gsrun cannot read"
                     : got == 0 ? "it closed the connection without an answer"
                                : strerror((int)-got));
        }
        j->gpus_ask_told = 1;
        gs_report_add(&a->report, 0, "the user's shared MPS on this node could not tell the GPUs "
                      "(%s); this job lists them itself", why);
    }
    free(buf);
    return rc;
}

int gs_agent_share_list_gpus(gs_agent_t *a, gs_error_t *err)
{
    gs_job_t *j = gs_job(a);
    /* NVML's load and start are most of a listing: 25-90 ms alone on the
     * lent GPUs, over a second with two dozen jobs starting at once. */
    long long asked = gs_proc_now_ms();
    int rc, told = (a->mode == GS_MODE_EARLY || a->mode == GS_MODE_PER_JOB) &&
                   a->o->cfg.share_node && a->o->cfg.mps != GS_MPS_OFF &&
               gs_agent_share_listing(a, &a->gpus) == 0;
    if (told) {
        gs_report_add(&a->report, 0, "the GPUs from the user's shared MPS on this node (%s) in "
                      "%lld ms", j->share_dir, gs_proc_now_ms() - asked);
    } else if ((rc = gs_gpu_discover(&a->gpus, err)) != 0) {
        return rc;
    }
    return gs_gpu_filter_visible(&a->gpus, getenv("CUDA_VISIBLE_DEVICES"), err);
}
