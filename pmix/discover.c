/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "pmix/discover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GS_HAVE_PMIX
#include <pmix.h>
#endif

#ifdef GS_HAVE_PMIX
static int pmix_discover(gs_local_t *loc)
{
    pmix_proc_t me, wild;
    pmix_value_t *val = NULL;
    int ok = 0;

    if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) {
        return -ENOENT;
    }
    memset(loc, 0, sizeof(*loc));
    loc->node_id = -1;
    PMIX_PROC_CONSTRUCT(&wild);
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    snprintf(loc->job, sizeof(loc->job), "%s", me.nspace);

    if (PMIx_Get(&me, PMIX_LOCAL_RANK, NULL, 0, &val) == PMIX_SUCCESS && val != NULL) {
        loc->local_rank = val->data.uint16;
        PMIX_VALUE_RELEASE(val);
        ok++;
    }
    val = NULL;
    if (PMIx_Get(&wild, PMIX_LOCAL_SIZE, NULL, 0, &val) == PMIX_SUCCESS && val != NULL) {
        loc->local_size = (int)val->data.uint32;
        PMIX_VALUE_RELEASE(val);
        ok++;
    }
    val = NULL;
    if (PMIx_Get(&wild, PMIX_LOCAL_PEERS, NULL, 0, &val) == PMIX_SUCCESS && val != NULL) {
        if (val->type == PMIX_STRING && val->data.string != NULL) {
            snprintf(loc->peers, sizeof(loc->peers), "%s", val->data.string);
        }
        PMIX_VALUE_RELEASE(val);
    }
    val = NULL;
    if (PMIx_Get(&me, PMIX_NODEID, NULL, 0, &val) == PMIX_SUCCESS && val != NULL) {
        loc->node_id = (int)val->data.uint32;
        PMIX_VALUE_RELEASE(val);
    }
    /* The program calls PMIx_Init itself after exec; this client must be
     * gone first. */
    PMIx_Finalize(NULL, 0);
    if (ok != 2 || loc->local_size < 1 || loc->local_rank >= loc->local_size) {
        return -EPROTO;
    }
    loc->source = "pmix";
    return 0;
}
#endif

int gs_discover(gs_local_t *loc, gs_error_t *err)
{
    const char *how = getenv("GSRUN_DISCOVERY");
    int have_vars = getenv("OMPI_COMM_WORLD_LOCAL_RANK") != NULL &&
                    getenv("OMPI_COMM_WORLD_LOCAL_SIZE") != NULL;
    int rc = gs_discover_check_env(err);

    if (rc != 0) {
        return rc;
    }
#ifdef GS_HAVE_PMIX
    /* Open MPI gives every rank its local rank and size; PMIx then adds
     * nothing, and a PMIx client in this process before exec made 3 of 12
     * 16-rank jobs hang in MPI_Init (Open MPI 4.1.4, PMIx 4.2.2). So PMIx
     * is used where the launcher's variables are missing, or when asked. */
    int want_pmix = how != NULL ? strcmp(how, "pmix") == 0 : !have_vars;
    if (want_pmix && (getenv("PMIX_SERVER_URI2") != NULL || getenv("PMIX_SERVER_URI21") != NULL ||
                      getenv("PMIX_SERVER_URI3") != NULL || getenv("PMIX_SERVER_URI4") != NULL ||
                      getenv("PMIX_NAMESPACE") != NULL)) {
        if (pmix_discover(loc) == 0) {
            return 0;
        }
    }
#else
    (void)have_vars;
#endif
    return gs_discover_from_env(loc, err);
}
