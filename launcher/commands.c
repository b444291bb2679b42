/* SPDX-License-Identifier: BSD-3-Clause */
#include "gs_autoconf.h"

#include "launcher/commands.h"

#include <stddef.h>
#include <string.h>

#include "launcher/batch_main.h"
#include "launcher/exec_main.h"
#include "launcher/status_main.h"
#include "launcher/stop_main.h"

static const gs_command_t commands[] = {
    {"status", gs_status_main, "what runs on this node (text or JSON)"},
    {"stop", gs_stop_main, "end the user's shared MPS on this node (--now: at once)"},
    {"exec", gs_exec_main, "the rank prefix, for launchers gsrun does not start"},
    {"prolog", gs_batch_main, "a batch job's node: MPS for the whole job (root or the user)"},
    {"epilog", gs_batch_main, "the end of that job: its agent and MPS stopped"},
    {"task-prolog", gs_batch_main, "each task of that job: its MPS client environment"},
};

const gs_command_t *gs_command_find(const char *word)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(word, commands[i].name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}
