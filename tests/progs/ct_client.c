/* SPDX-License-Identifier: BSD-3-Clause */
/* A CUDA program without MPI for the container tests: what a rank runs
 * inside a container image, whose files are the image's (no Open MPI there).
 * It starts CUDA as the fakes play it (tests/progs/fake_client.h), becomes
 * an MPS client where the pipe dir is there to reach, else holds a context
 * without MPS, and prints one line:
 *
 *   ct_client [--sleep MS]
 *   pid=P pipe=DIR client=ok ... | client=none | client=refused (...)
 *
 * It holds its context MS milliseconds (the agent sees it), then exits 0;
 * a refused client exits 46 as CUDA's cudaErrorDevicesUnavailable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/progs/fake_client.h"

int main(int argc, char **argv)
{
    int sleep_ms = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sleep") == 0 && i + 1 < argc) {
            sleep_ms = atoi(argv[++i]);
        }
    }
    char reply[256] = "none";
    int fd = -1;
    cuda_start();
    if (!pipe_visible()) {
        ctx_file(plain_gpu(), "plain");
    } else if ((fd = mps_client(reply, sizeof(reply))) >= 0) {
        int n = 0, g = 0;
        if (sscanf(reply, "ok %d %d", &n, &g) == 2) {
            ctx_file(g, "mps");
        }
    }
    printf("pid=%d uid=%d pipe=%s client=%s%s\n", (int)getpid(), (int)getuid(),
           env("CUDA_MPS_PIPE_DIRECTORY"), fd >= 0 || strcmp(reply, "none") == 0 ? "" : "refused ",
           reply);
    fflush(stdout);
    if (sleep_ms > 0) {
        usleep((useconds_t)sleep_ms * 1000);
    }
    if (fd >= 0) {
        close(fd);
    }
    return fd < 0 && strcmp(reply, "none") != 0 ? 46 : 0;
}
