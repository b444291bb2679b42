#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The soak test, shortened for CI: 30 jobs (tests/soak.sh runs 200).
exec "$GS_TOP_SRCDIR/tests/soak.sh" --build "$GS_TOP_BUILDDIR" --jobs 30
