#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# gsrun as a site installs it, built from the release tarball (`make dist`):
#   debs.sh    the Debian packages (dpkg-buildpackage -b) and lintian
#   rpm.sh     the RPMs of packaging/rpm/gsrun.spec (rpmbuild -bb)
#   compare.sh the .debs and the RPMs hold the same files
#   spack.sh   the Spack recipe matches configure's options
#   lmod.sh    the Lmod module file, installed in a prefix of its own
#   root.sh    the .debs installed, used and purged in a fresh Debian 12 root
#
#   tests/packaging/check.sh [--keep DIR] BUILD_DIR
#
# BUILD_DIR is a configured build tree (make dist runs there). Work files go
# to a directory of their own, removed at the end (--keep DIR keeps them).
# TAP; ends with "N passed, N failed, N skipped". A step whose tools are
# missing says so and is skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
keep=""
[ "${1:-}" = --keep ] && { keep=${2:?--keep needs a directory}; shift 2; }
B=$(cd "${1:?usage: check.sh [--keep DIR] BUILD_DIR}" && pwd) || exit 1
if [ -n "$keep" ]; then
    rm -rf "$keep" && mkdir -p "$keep" && W=$(cd "$keep" && pwd)
else
    W=$(mktemp -d /var/tmp/gsrun-pkg.XXXXXX)
fi
cleanup() { [ -n "$keep" ] || rm -rf --one-file-system "$W"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

t0=$(date +%s)
{
    if make -s -C "$B" dist >"$W/dist.log" 2>&1; then
        tarball=$(ls -t "$B"/gsrun-*.tar.gz | head -1)
        echo "ok - make dist: ${tarball##*/}"
        V=$(basename "$tarball" .tar.gz | sed 's/^gsrun-//')
        bash "$here/debs.sh" "$W" "$tarball"
        bash "$here/rpm.sh" "$W" "$tarball"
        bash "$here/compare.sh" "$W" "$V"
        bash "$here/spack.sh" "$top/configure" "$top/packaging/spack/package.py"
        bash "$here/lmod.sh" "$W" "$top"
        bash "$here/root.sh" "$W" "$V"
    else
        echo "not ok - make dist"
        sed 's/^/# /' "$W/dist.log" | tail -20
    fi
} 2>&1 | awk '
    /^(not )?ok - / {
        n++
        if ($0 ~ /^not ok/) { f++; sub(/^not ok - /, "not ok " n " - ") }
        else { if ($0 ~ /# SKIP /) s++; else p++; sub(/^ok - /, "ok " n " - ") }
    }
    { print; fflush() }
    END { print "1.." n; printf "# packaging: %d passed, %d failed, %d skipped\n", p, f, s
          printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f > 0 || n == 0) }'
rc=$?
echo "# packaging suite: $(($(date +%s) - t0)) s in all"
exit $rc
