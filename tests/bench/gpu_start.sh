# SPDX-License-Identifier: BSD-3-Clause
# What every GPU benchmark does first (sourced, bash):
#   gpu_bench_start PROGRAM...
# pass/fail counts with ok and notok; without a GPU, says so and exits 77
# (a TAP skip, "0 passed, 0 failed, 1 skipped"); each PROGRAM must be built
# (else bails out); mpirun's root opt-in when run as root.
gpu_bench_start() {
    local p
    pass=0 fail=0
    if ! nvidia-smi -L >/dev/null 2>&1; then
        echo "1..0 # SKIP no NVIDIA GPU here"
        echo "0 passed, 0 failed, 1 skipped"
        exit 77
    fi
    for p in "$@"; do
        [ -x "$p" ] || { echo "Bail out! $p is not built (needs nvcc)"; exit 1; }
    done
    if [ "$(id -u)" = 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
}
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
