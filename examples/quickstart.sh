#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Sets everything up and runs a real gsrun job:
#   installs what building gsrun and running a job need (Debian/Ubuntu: the
#   compiler, autotools, pkg-config, Open MPI; tests/install-deps.sh build),
#   builds gsrun in _build/, and runs 4 ranks through gsrun. With an NVIDIA
#   GPU and MPS the ranks run examples/mps_probe and share the GPU through
#   MPS; without one gsrun says so, runs the CPU example examples/hello_ranks,
#   and then shows what it would set up for the same job on a node with one
#   GPU (gsrun --dry-run against the test suite's stand-in GPU: nothing runs).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
sh tests/install-deps.sh build || exit 1
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
fi
echo "quickstart: no NVIDIA GPU here, so there is no MPS to set up; gsrun says so and the job runs anyway:"
(set -x; _build/launcher/gsrun -v -np "$np" --oversubscribe _build/examples/hello_ranks)
rc=$?
# The stand-in GPU library and MPS daemon the tests use (tests/fake).
(cd _build && make -s tests/fake/libnvidia-ml.so.1 tests/fake/nvidia-cuda-mps-control) >/dev/null 2>&1 || exit $rc
echo
echo "quickstart: on a node with one NVIDIA GPU, gsrun would set up this for the same job."
echo "  (This machine has none: the test suite's stand-in GPU library and MPS daemon stand in"
echo "  for the driver, and --dry-run starts nothing. Lines starting with '#' are the plan;"
echo "  the last line is the mpirun command gsrun would run.)"
LD_LIBRARY_PATH="$top/_build/tests/fake" FAKE_NVML_GPUS=1 \
    _build/launcher/gsrun --dry-run --mps-control="$top/_build/tests/fake/nvidia-cuda-mps-control" \
    -np "$np" --oversubscribe _build/examples/hello_ranks
echo "quickstart: each rank would be an MPS client of that GPU's one server, with the share"
echo "  above; the server stays up 60 s after your last job on the node (gsrun stop ends it)."
exit $rc
