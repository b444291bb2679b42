/* SPDX-License-Identifier: BSD-3-Clause */
/* Records as tables of fields (runtime/files/record.c): every row of the
 * node state's and the status's tables survives its file, and every JSON
 * row is in `gsrun status --json`. A new row is covered without a new
 * test: the records are filled row by row from the tables themselves. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/files/record.h"
#include "runtime/files/rundir.h"
#include "runtime/files/state.h"
#include "runtime/files/status.h"

/* Gives every typed file row of rec a value of its own (seed makes the
 * values differ between rows and records); returns how many rows it set. */
static int fill(const gs_rec_field_t *rows, void *rec, int seed)
{
    int n = 0;
    for (const gs_rec_field_t *r = rows; r->name != NULL; r++, seed++) {
        char *at = (char *)rec + r->off;
        if (!(r->flags & GS_REC_FILE)) {
            continue;
        }
        switch (r->type) {
        case GS_REC_INT:
            *(int *)at = 1 + seed % 7; /* small: the state's server line checks ranges */
            break;
        case GS_REC_LLONG:
            *(long long *)at = 1000000000000LL + seed;
            break;
        case GS_REC_STR:
            snprintf(at, r->size, "v%d \"x\"", seed);
            break;
        default:
            continue; /* the caller's sample sets what a custom row reads */
        }
        n++;
    }
    return n;
}

static void test_state_every_field(void **state)
{
    static gs_state_t a, b;
    static char buf[65536];
    gs_error_t err;
    (void)state;
    memset(&a, 0, sizeof(a));
    int set = fill(gs_state_fields, &a, 10);
    assert_true(set >= 6);
    a.kind = GS_STATE_ON;
    a.nservers = 3;
    for (int e = 0; e < a.nservers; e++) {
        gs_state_server_t *s = &a.server[e];
        assert_true(fill(gs_state_server_fields, s, 20 + e * 10) >= 3);
        /* The custom rows: ranks, server, percentage. */
        s->first_rank = e * 5;
        s->nranks = 5;
        s->gpu = 0;
        s->server = e;
        s->gpu_servers = 3;
        s->gpu_ranks = 15;
        s->pct_set = e != 1;
        snprintf(s->pct, sizeof(s->pct), "%s", e != 1 ? "13.3333" : "");
    }
    assert_int_equal(gs_state_format(&a, buf, sizeof(buf)), 0);
    memset(&b, 0xff, sizeof(b));
    assert_int_equal(gs_state_parse(buf, &b, &err), 0);
    /* Every byte: a row that is written but not read (or the reverse)
     * leaves its field different. */
    assert_memory_equal(&a, &b, sizeof(a));
    /* A buffer too small for the whole file is refused, never cut. */
    char small[64];
    assert_int_equal(gs_state_format(&a, small, sizeof(small)), -ENOSPC);
    size_t used = 60;
    assert_int_equal(gs_rec_put(small, sizeof(small), &used, "%s", "12345"), -ENOSPC);
    assert_int_equal(used, 60);
    assert_int_equal(gs_rec_put(small, sizeof(small), &used, "%s", "123"), 0);
    assert_int_equal(used, 63);
    /* Each row of the table is a line of the file. */
    for (const gs_rec_field_t *r = gs_state_fields; r->name != NULL; r++) {
        char key[64];
        snprintf(key, sizeof(key), "\n%s ", r->name);
        assert_non_null(strstr(buf, key));
    }
}

static void test_status_every_field(void **state)
{
    static gs_status_t a, b;
    char dir[] = "/tmp/gs_test_record.XXXXXX";
    gs_error_t err;
    (void)state;
    assert_non_null(mkdtemp(dir));
    memset(&a, 0, sizeof(a));
    /* What the reader leaves where the file says nothing: not known. */
    for (int e = 0; e < GS_MAX_GPUS; e++) {
        a.server[e].server_mib = a.server[e].clients_mib = GS_STATUS_MIB_UNKNOWN;
        a.server[e].nclients = -1;
    }
    for (int r = 0; r < GS_STATUS_MAX_RANKS; r++) {
        a.rank[r].memory_mib = a.rank[r].peak_mib = GS_STATUS_MIB_UNKNOWN;
        a.rank[r].entry = -1;
    }
    assert_true(fill(gs_status_fields, &a, 1) >= 10);
    a.nservers = 2;
    for (int e = 0; e < a.nservers; e++) {
        assert_true(fill(gs_status_server_fields, &a.server[e], 40 + e * 20) >= 12);
    }
    a.nranks = 3;
    for (int r = 0; r < a.nranks; r++) {
        assert_true(fill(gs_status_rank_fields, &a.rank[r], 80 + r * 20) >= 7);
    }
    assert_int_equal(gs_status_write(dir, &a, &err), 0);
    memset(&b, 0, sizeof(b));
    assert_int_equal(gs_status_read(dir, &b, &err), 0);
    assert_memory_equal(&a, &b, sizeof(a));

    /* Every JSON row is a member of the JSON, in the table's order. */
    static char json[65536];
    FILE *f = fmemopen(json, sizeof(json), "w");
    gs_status_print_json(f, "n", &b, 1, 0);
    fclose(f);
    const char *at = json;
    for (const gs_rec_field_t *r = gs_status_fields; r->name != NULL; r++) {
        char key[64];
        if (r->flags & GS_REC_JSON) {
            snprintf(key, sizeof(key), "\"%s\":", r->json ? r->json : r->name);
            at = strstr(at, key);
            assert_non_null(at);
        }
    }
    at = strstr(json, "\"gpus\":[");
    for (const gs_rec_field_t *r = gs_status_server_fields; at != NULL && r->name != NULL; r++) {
        char key[64];
        if (r->flags & GS_REC_JSON) {
            snprintf(key, sizeof(key), "\"%s\":", r->json ? r->json : r->name);
            at = strstr(at, key);
        }
    }
    assert_non_null(at);
    at = strstr(json, "\"ranks\":[");
    for (const gs_rec_field_t *r = gs_status_rank_fields; at != NULL && r->name != NULL; r++) {
        char key[64];
        if (r->flags & GS_REC_JSON) {
            snprintf(key, sizeof(key), "\"%s\":", r->json ? r->json : r->name);
            at = strstr(at, key);
        }
    }
    assert_non_null(at);
    gs_rundir_remove(dir);
}

static void test_parse_rejects(void **state)
{
    static gs_state_t st;
    (void)state;
    memset(&st, 0, sizeof(st));
    assert_int_equal(gs_rec_parse(gs_state_fields, &st, "exit", "12x"), -EINVAL);
    assert_int_equal(gs_rec_parse(gs_state_fields, &st, "memory_limit", "0"), -EINVAL);
    assert_int_equal(gs_rec_parse(gs_state_fields, &st, "nope", "1"), -ENOENT);
    assert_int_equal(gs_rec_parse(gs_state_fields, &st, "exit", "70"), 0);
    assert_int_equal(st.exit_code, 70);
    char longer[sizeof(st.socket) + 2];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    assert_int_equal(gs_rec_parse(gs_state_fields, &st, "socket", longer), -EINVAL);
}

static void test_publish_is_whole(void **state)
{
    char dir[] = "/tmp/gs_test_record2.XXXXXX", path[128], got[64] = "";
    gs_error_t err;
    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(gs_rec_publish(dir, "f", "one\n", &err), 0);
    assert_int_equal(gs_rec_publish(dir, "f", "two\n", &err), 0);
    snprintf(path, sizeof(path), "%s/f", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(got, sizeof(got), f));
    fclose(f);
    assert_string_equal(got, "two\n");
    /* A link in the file's place is replaced, never written through. */
    char target[128];
    snprintf(target, sizeof(target), "%s/target", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(gs_rec_publish(dir, "f", "three\n", &err), 0);
    assert_int_equal(access(target, F_OK), -1);
    gs_rundir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_every_field),
        cmocka_unit_test(test_status_every_field),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_publish_is_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
