#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Makes the Slurm tree that tests/gpu/slurm.sh takes as SLURM_ROOT, for a GPU
# machine without Slurm and without a package archive: this machine's
# distribution packages (Debian 12: Slurm 22.05) downloaded and unpacked into
# DIR, the daemons under their own names, the libraries they need from this
# machine beside them (DIR/extra-lib; slurm.sh uses only those the GPU
# machine lacks). About 20 MB.
#
#   tests/gpu/slurm_carry.sh DIR
set -eu
dir=${1:?usage: $0 DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download slurmd slurmctld slurm-client slurm-wlm-basic-plugins 'libslurm[0-9]*' libpmix2 >/dev/null)
mkdir -p "$tmp/root"
for f in "$tmp"/*.deb; do dpkg -x "$f" "$tmp/root"; done
r=$tmp/root
lib=usr/lib/x86_64-linux-gnu
rm -rf "$dir"
mkdir -p "$dir/usr/sbin" "$dir/usr/bin" "$dir/$lib/slurm-wlm" "$dir/extra-lib"
for d in slurmd slurmctld slurmstepd; do
    # Debian's alternatives name them; Slurm knows its daemons by these names.
    if [ -e "$r/usr/sbin/$d-wlm" ]; then
        cp -a "$r/usr/sbin/$d-wlm" "$dir/usr/sbin/" && ln -s "$d-wlm" "$dir/usr/sbin/$d"
    else
        cp -a "$r/usr/sbin/$d" "$dir/usr/sbin/"
    fi
done
for b in srun scontrol sinfo squeue scancel sbatch; do cp -a "$r/usr/bin/$b" "$dir/usr/bin/"; done
cp -a "$r/$lib"/libslurm* "$dir/$lib/"
cp -a "$r/$lib"/slurm-wlm/*.so "$dir/$lib/slurm-wlm/"
if [ -d "$r/$lib/pmix2" ]; then
    cp -a "$r/$lib/pmix2" "$dir/$lib/"
    rm -rf "$dir/$lib/pmix2/share"
    # Slurm's mpi/pmix opens it by the unversioned name (libpmix-dev's link).
    (cd "$dir/$lib/pmix2/lib" && ln -sf "$(ls libpmix.so.*.*.* | head -1)" libpmix.so)
fi
# Every library they load from this machine, but the C library's own.
for f in "$dir"/usr/sbin/* "$dir"/usr/bin/* "$dir/$lib"/slurm-wlm/*.so "$dir/$lib"/pmix2/lib/libpmix.so.*; do
    [ -L "$f" ] && continue
    LD_LIBRARY_PATH=$dir/$lib/slurm-wlm:$dir/$lib ldd "$f" 2>/dev/null | awk '/=> \// {print $3}'
done | sort -u | grep -v "^$dir" |
    grep -v -E "/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libutil)\.so" |
    while read -r l; do cp -L "$l" "$dir/extra-lib/"; done
echo "$dir: $(du -sh "$dir" | cut -f1), $(LD_LIBRARY_PATH=$dir/$lib/slurm-wlm:$dir/$lib:$dir/extra-lib "$dir/usr/sbin/slurmd" -V)"
