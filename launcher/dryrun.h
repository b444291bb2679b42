/* SPDX-License-Identifier: BSD-3-Clause */
/* gsrun --dry-run: every setting, where the run directory would go, and
 * the plan gsrun would make on this node; nothing is started. */
#ifndef GS_DRYRUN_H
#define GS_DRYRUN_H

#include <stdio.h>

#include "runtime/core/config.h"

/* Prints the "# " lines before the launcher's command: the settings (each
 * as its option), the run directory, and for ranks_at_most ranks on this
 * node (0: the command line does not say) the GPUs, servers and shares. */
void gs_dryrun_print(FILE *f, const gs_config_t *cfg, int ranks_at_most);

#endif
