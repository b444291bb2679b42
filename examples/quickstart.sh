#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Sets everything up and runs a real gsrun job:
#   installs the build dependencies (Debian/Ubuntu), builds gsrun in _build/,
#   and runs 4 ranks through gsrun. With an NVIDIA GPU and MPS the ranks run
#   examples/mps_probe and share the GPU through MPS; without one gsrun says
#   so and runs the CPU example, examples/hello_ranks.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
sh tests/install-deps.sh || exit 1
if [ ! -x _build/launcher/gsrun ]; then
    ./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; exit 1; }
    mkdir -p _build && (cd _build && ../configure -q && make -s -j"$(nproc)") || exit 1
fi
if [ "$(id -u)" = 0 ]; then
    echo "quickstart: running as root, so mpirun's root opt-in is set for this demo"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
np=${NP:-4}
if nvidia-smi -L >/dev/null 2>&1 && [ -x _build/examples/mps_probe ]; then
    echo "quickstart: NVIDIA GPU found; $np ranks share it through MPS:"
    set -x
    exec _build/launcher/gsrun -v -np "$np" --oversubscribe _build/examples/mps_probe --expect-mps
else
    echo "quickstart: no NVIDIA GPU here, so there is no MPS to set up; gsrun says so and the job runs anyway:"
    set -x
    exec _build/launcher/gsrun -v -np "$np" --oversubscribe _build/examples/hello_ranks
fi
