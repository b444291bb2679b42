# SPDX-License-Identifier: BSD-3-Clause
# Shared by the packaging tests: each prints "ok - ..." / "not ok - ..." lines
# (check.sh numbers them) and "# ..." diagnostics.
set -u
check() { # check "description" command...: the command's status is the verdict
    local d=$1
    shift
    if "$@"; then echo "ok - $d"; else echo "not ok - $d"; return 1; fi
}
skip() { echo "ok - $1 # SKIP $2"; }
diag() { sed 's/^/# /' "$@"; }
# The release tarball's version: gsrun-0.1.0.tar.gz -> 0.1.0
tarball_version() { basename "$1" .tar.gz | sed 's/^gsrun-//'; }
# A Debian package's upstream version (no epoch, no revision): 22.05.8
deb_upstream() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/^[0-9]*://; s/-[^-]*$//'; }
# A package build's log: how many unit tests passed (echoed); fails when
# none ran or one failed.
units_passed() { # units_passed LOG
    local n
    n=$(grep -cE "^PASS: tests/unit/" "$1")
    echo "$n"
    [ "$n" -gt 0 ] && ! grep -qE "^(FAIL|ERROR): " "$1"
}
