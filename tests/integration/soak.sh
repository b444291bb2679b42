#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: the whole job path, 30 jobs in a row (tests/soak.sh: 200)
# The soak test, shortened for CI: 30 jobs (tests/soak.sh runs 200).
exec "$GS_TOP_SRCDIR/tests/soak.sh" --build "$GS_TOP_BUILDDIR" --jobs 30
