/* SPDX-License-Identifier: BSD-3-Clause */
/* The status's rank rows: each rank of the job on this node, its MPS state
 * and GPU memory ("rank.<i>.key value" in the file, an object of the JSON's
 * "ranks" array); the job's and the servers' rows are in status.c. */
#include "gs_autoconf.h"

#include <stddef.h>

#include "runtime/files/status.h"

#define F GS_REC_FILE
#define J GS_REC_JSON

static void json_alive(FILE *f, const void *rec, const void *ctx)
{
    (void)ctx;
    fputs(((const gs_status_rank_t *)rec)->alive ? "true" : "false", f);
}

/* The rank's GPU and server as the "gpus" array names them (ctx: the
 * job's status): -1 where it has none. */
static void json_rank_gpu(FILE *f, const void *rec, const void *ctx)
{
    const gs_status_rank_t *r = rec;
    const gs_status_t *s = ctx;
    fprintf(f, "%d", r->entry >= 0 && r->entry < s->nservers ? s->server[r->entry].node_gpu : -1);
}

static void json_rank_uuid(FILE *f, const void *rec, const void *ctx)
{
    const gs_status_rank_t *r = rec;
    const gs_status_t *s = ctx;
    if (r->entry >= 0 && r->entry < s->nservers) {
        gs_rec_json_str(f, s->server[r->entry].uuid);
    } else {
        fputs("null", f);
    }
}

#define RANK(name, type, flags, field)                                                             \
    {name, NULL, type, (flags), offsetof(gs_status_rank_t, field),                                 \
     sizeof(((gs_status_rank_t *)0)->field), NULL, NULL, NULL}

/* Each rank's: "rank.<i>.key value", an object of the "ranks" array. */
const gs_rec_field_t gs_status_rank_fields[] = {
    RANK("rank", GS_REC_INT, F | J, rank),
    RANK("pid", GS_REC_INT, F | J, pid),
    RANK("entry", GS_REC_INT, F | J, entry),
    {"gpu", NULL, GS_REC_CUSTOM, J, 0, 0, NULL, NULL, json_rank_gpu},
    {"gpu_uuid", NULL, GS_REC_CUSTOM, J, 0, 0, NULL, NULL, json_rank_uuid},
    RANK("state", GS_REC_STR, F | J, state),
    {"alive", NULL, GS_REC_INT, F | J, offsetof(gs_status_rank_t, alive), 0, NULL, NULL,
     json_alive},
    RANK("memory_mib", GS_REC_LLONG, F | J | GS_REC_NULL_NEG, memory_mib),
    RANK("peak_memory_mib", GS_REC_LLONG, F | J | GS_REC_NULL_NEG, peak_mib),
    GS_REC_END,
};

#undef F
#undef J
