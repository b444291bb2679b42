#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/gpu/slurm.sh (real slurmctld and slurmd for this machine, the way the
# GPU machine runs them) with the stand-in MPS daemon and NVML: the script
# itself checked where CI runs, and Slurm's front ends once more outside the
# simulated cluster. TAP output (its own).
B=${GS_TOP_BUILDDIR:?run through make check}
. "${GS_TOP_SRCDIR:?}/tests/slurm/slurm.sh"
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs the tasks)"
why=$(slurm_can_run) || skip "$why"
[ -f "$B/slurm/gsrun_spank.so" ] || skip "the SPANK plugin is not built (no slurm/spank.h: libslurm-dev)"
# No shared-memory CMA in containers (as the other tests' jobs).
export OMPI_MCA_btl_vader_single_copy_mechanism=none
unset GSRUN_MPS GSRUN_MPS_PERCENTAGE GSRUN_MPS_CONTROL GSRUN_VERBOSE CUDA_VISIBLE_DEVICES \
    CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
exec "$GS_TOP_SRCDIR/tests/gpu/slurm.sh" --fake "$B"
