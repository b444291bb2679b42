/* SPDX-License-Identifier: BSD-3-Clause */
/* A program that links no MPI library and prints the named variables of
 * its environment on one line, "NAME=value" or "NAME unset" each, in one
 * write: lines of several ranks through one launcher never interleave, as
 * printenv's whole environment (over 4 KiB, written in pieces) did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char line[8192];
    size_t n = 0;
    for (int i = 1; i < argc && n < sizeof(line); i++) {
        const char *v = getenv(argv[i]);
        int w = v != NULL ? snprintf(line + n, sizeof(line) - n, "%s%s=%s", i > 1 ? " " : "",
                                     argv[i], v)
                          : snprintf(line + n, sizeof(line) - n, "%s%s unset", i > 1 ? " " : "",
                                     argv[i]);
        n += w > 0 ? (size_t)w : 0;
    }
    if (n >= sizeof(line)) {
        n = sizeof(line) - 1;
    }
    line[n++] = '\n';
    return write(1, line, n) == (ssize_t)n ? 0 : 1;
}
