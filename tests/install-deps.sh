#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Installs what gsrun needs on Debian or Ubuntu, through apt-get as root or
# through sudo:
#   tests/install-deps.sh build   what building gsrun and running a job need:
#                                 the compiler, autotools, pkg-config and Open
#                                 MPI (examples/quickstart.sh);
#   tests/install-deps.sh         all that the whole test suite uses besides
#                                 (tests/run-all.sh): PMIx, hwloc, cmocka,
#                                 Slurm's daemons, MPICH, the packaging tools,
#                                 Charliecloud, podman, and promtool and
#                                 node_exporter (tests/integration/status_prom.sh).
set -e
pkgs="build-essential autoconf automake pkg-config libopenmpi-dev openmpi-bin"
if [ "${1:-}" != build ]; then
    pkgs="$pkgs libpmix-dev libhwloc-dev hwloc libcmocka-dev iproute2 procps util-linux debootstrap
      slurmctld slurmd slurm-client libslurm-dev
      dpkg-dev debhelper lintian rpm lmod mpich libmpich-dev charliecloud-runtime podman
      prometheus prometheus-node-exporter"
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
echo "gsrun: installing:$missing"
if $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing; then
    exit 0
fi
# No package source (an offline machine): go on if the essentials are there.
for t in cc make autoreconf pkg-config mpicc mpirun; do
    command -v $t >/dev/null 2>&1 || { echo "gsrun: cannot install$missing and $t is missing" >&2; exit 1; }
done
echo "gsrun: could not install$missing; building with what is installed (optional parts may be left out)" >&2
