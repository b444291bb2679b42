/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "runtime/wire/protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fits(int n, size_t len)
{
    return n >= 0 && (size_t)n < len ? n : -1;
}

int gs_protocol_hello_format(char *buf, size_t len, int local_rank, const char *cpus, int parent)
{
    return fits(snprintf(buf, len, "hello %d %s%s\n", local_rank,
                         cpus != NULL && cpus[0] ? cpus : "-", parent ? " parent" : ""),
                len);
}

int gs_protocol_hello_parse(const char *line, int *local_rank, char *cpus, size_t cpuslen,
                            int *parent)
{
    char list[4100] = "", who[16] = "";
    int n = sscanf(line, "hello %d %4099s %15s", local_rank, list, who);
    if (n < 1 || *local_rank < 0 || strlen(list) >= cpuslen) {
        return -1;
    }
    snprintf(cpus, cpuslen, "%s", strcmp(list, "-") == 0 ? "" : list);
    *parent = n == 3 && strcmp(who, "parent") == 0;
    return 0;
}

int gs_protocol_answer_format(char *buf, size_t len, int by_pidfd, int gpu, int generation)
{
    return fits(snprintf(buf, len, "ok %s gpu=%d state=%d\n", by_pidfd ? "pidfd" : "socket", gpu,
                         generation),
                len);
}

int gs_protocol_answer_parse(const char *line, int *by_pidfd, int *gpu, int *generation)
{
    char how[16];
    int g, gen = 0;
    if (sscanf(line, "ok %15s gpu=%d state=%d", how, &g, &gen) < 2 ||
        (strcmp(how, "pidfd") != 0 && strcmp(how, "socket") != 0) || gen < 0) {
        return -1;
    }
    *by_pidfd = strcmp(how, "pidfd") == 0;
    *gpu = g >= 0 ? g : -1;
    *generation = gen;
    return 0;
}

int gs_protocol_size_format(char *buf, size_t len, int local_size, int launcher_pid)
{
    return fits(snprintf(buf, len, "size %d %d\n", local_size, launcher_pid), len);
}

int gs_protocol_size_parse(const char *line, int *local_size, int *launcher_pid)
{
    int n = 0, pid = 0;
    if (sscanf(line, "size %d %d", &n, &pid) < 1 || n <= 0 || n > 1 << 20) {
        return -1;
    }
    *local_size = n;
    *launcher_pid = pid > 1 ? pid : 0;
    return 0;
}

int gs_protocol_servers_format(char *buf, size_t len, int n, const int *gpu)
{
    size_t used = 0;
    int w = snprintf(buf, len, "servers %d", n);
    for (int i = 0; w >= 0 && (size_t)w < len - used && i < n; i++) {
        used += (size_t)w;
        w = snprintf(buf + used, len - used, " %d", gpu[i]);
    }
    if (w < 0 || (size_t)w >= len - used) {
        return -1;
    }
    used += (size_t)w;
    return fits(snprintf(buf + used, len - used, "\n"), len - used) < 0 ? -1 : 0;
}

int gs_protocol_servers_parse(const char *line, int max, int *n, int *gpu)
{
    int count = 0, used = 0;
    if (sscanf(line, "servers %d%n", &count, &used) != 1 || count < 1 || count > max) {
        return -1;
    }
    line += used;
    for (int i = 0; i < count; i++) {
        if (sscanf(line, " %d%n", &gpu[i], &used) != 1 || gpu[i] < 0 || gpu[i] >= max) {
            return -1;
        }
        line += used;
    }
    *n = count;
    return 0;
}

int gs_protocol_ready_format(char *buf, size_t len, int code)
{
    return fits(code == 0 ? snprintf(buf, len, "listening 0 0\n")
                          : snprintf(buf, len, "error %d 0\n", code),
                len);
}

int gs_protocol_ready_parse(const char *line)
{
    int code = 0;
    if (strncmp(line, "listening", 9) == 0) {
        return 0;
    }
    if (sscanf(line, "error %d", &code) == 1 && code > 0) {
        return code;
    }
    return 1;
}

#define NOT_NOW_END "' is not taken by the agent now"

int gs_protocol_not_now_format(char *buf, size_t len, const char *line)
{
    size_t n = strcspn(line, " \n");
    int k = snprintf(buf, len, "error '%.*s" NOT_NOW_END "\n", (int)(n < 32 ? n : 32), line);
    return k < 0 || (size_t)k >= len ? -1 : k;
}

int gs_protocol_not_now_parse(const char *line)
{
    size_t n = strcspn(line, "\n");
    size_t e = strlen(NOT_NOW_END);
    return strncmp(line, "error '", 7) == 0 && n >= 7 + e &&
           strncmp(line + n - e, NOT_NOW_END, e) == 0;
}
