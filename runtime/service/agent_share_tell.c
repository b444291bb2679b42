/* SPDX-License-Identifier: BSD-3-Clause */
/* The node service's word to the jobs that lease a server: a line of
 * runtime/wire/lease.h's (lost, fault, renew) written once to each. */
#include "gs_autoconf.h"

#include <unistd.h>

#include "runtime/service/service_int.h"

void gs_agent_tell_leases(gs_agent_t *a, int s, const char *line, int n)
{
    const gs_service_t *sv = gs_service_const(a);
    for (int i = 0; i < sv->nleases && n > 0; i++) {
        const gs_agent_lease_t *l = &sv->leases[i];
        for (int e = 0; e < l->n && !l->waiting; e++) {
            if (l->server[e] == s) {
                /* Short: one write the job's agent reads whole. */
                if (write(l->fd, line, (size_t)n) < 0) {
                    /* Its job is gone: the lease ends at its hang-up. */
                }
                break;
            }
        }
    }
}
