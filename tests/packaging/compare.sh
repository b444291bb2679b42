#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The .debs and the RPMs hold the same files, package by package: each list
# with the distribution's own directories named by role (the library dir,
# Slurm's plugin dir), compressed man pages and docs by their names, and the
# docs dir by its package's name (rpm on Debian appends the version), the
# files each format adds by itself (Debian's copyright and changelog, RPM's
# license dir, build ids) left out.
#   tests/packaging/compare.sh WORKDIR VERSION
. "$(dirname "$0")/lib.sh"
W=$1 V=$2
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
normalize() {
    sed -e "s|^/usr/lib/$ma/slurm-wlm/|SLURMPLUGINDIR/|" -e 's|^/usr/lib64/slurm/|SLURMPLUGINDIR/|' \
        -e "s|^/usr/lib/$ma/|LIBDIR/|" -e 's|^/usr/lib64/|LIBDIR/|' -e 's|\.gz$||' \
        -e 's|^/usr/share/doc/\([a-z-]*\)-[0-9][0-9.]*/|/usr/share/doc/\1/|' |
        grep -vE '^/usr/share/doc/[^/]+/(copyright|changelog\.Debian)$|^/usr/share/licenses/|^/usr/lib/\.build-id' |
        sort
}
n=0
for p in gsrun gsrun-openmpi gsrun-slurm; do
    d=$W/deb/${p}_$V-1_$arch.deb
    r=$(ls "$W"/rpm/RPMS/*/"$p-$V"-1*.rpm 2>/dev/null | head -1)
    if [ ! -f "$d" ] || [ -z "$r" ]; then
        skip "$p: the .deb's and the RPM's files" "both packages are needed (built: ${d##*/}: $([ -f "$d" ] && echo yes || echo no), RPM: ${r:-no})"
        continue
    fi
    # Files and links only: directories are owned differently by design.
    dpkg-deb -c "$d" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\.||' | normalize >"$W/$p.deb.files"
    rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$r" | awk '$1 !~ /^d/ { print $2 }' |
        normalize >"$W/$p.rpm.files"
    if check "$p: the .deb and the RPM hold the same $(wc -l <"$W/$p.deb.files") files" \
        cmp -s "$W/$p.deb.files" "$W/$p.rpm.files"; then :; else
        diff "$W/$p.deb.files" "$W/$p.rpm.files" | sed 's/^</deb/; s/^>/rpm/' | diag
    fi
    n=$((n + 1))
done
