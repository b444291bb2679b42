#!/bin/sh
# Installs what gsrun needs to build and test on Debian or Ubuntu.
# Runs apt-get as root, or through sudo.
set -e
pkgs="build-essential autoconf automake pkg-config libopenmpi-dev openmpi-bin libpmix-dev
      libhwloc-dev hwloc libcmocka-dev"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
echo "gsrun: installing:$missing"
$sudo apt-get update -q
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing
