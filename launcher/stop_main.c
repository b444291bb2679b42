/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun stop [--now]: ends the user's shared MPS on this node (the agent
 * of --mps-share=node that outlives a job for --mps-linger); the work is
 * runtime/batch/share_stop.c's. */
#include "gs_autoconf.h"

#include <stdio.h>
#include <string.h>

#include "launcher/stop_main.h"
#include "runtime/batch/share_stop.h"
#include "runtime/core/gs_error.h"

int gs_stop_main(int argc, char **argv)
{
    gs_error_t err;
    int now = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--now") == 0) {
            now = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("Usage: gsrun stop [--now]\n"
                   "Ends the caller's shared MPS on this node (--mps-share=node: the agent\n"
                   "and servers that the user's jobs share, kept --mps-linger seconds after\n"
                   "the last job). It takes no new job from now on (a job that starts\n"
                   "meanwhile runs MPS servers of its own) and ends once the jobs that use\n"
                   "it have ended; --now ends it at once (its jobs' ranks lose MPS, and\n"
                   "each job says so). Exit status 0 when it has ended, or none ran.\n");
            return 0;
        } else {
            fprintf(stderr, "gsrun stop: unknown argument '%s'; usage: gsrun stop [--now]\n",
                    argv[i]);
            return GS_EXIT_USAGE;
        }
    }
    int rc = gs_share_stop(now, stdout, &err);
    if (rc == 1) {
        printf("gsrun stop: %s\n", err.text);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "gsrun stop: error: %s\n", err.text);
        return 1;
    }
    return 0;
}
