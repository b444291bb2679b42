# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests that make Debian roots (tests/packaging/root.sh,
# tests/ompi5/check.sh): the Debian archive this machine's apt already uses
# (deb822 .sources first, then sources.list), so that a site's own mirror
# is used and no host is written into the tree. Prints the URI, or nothing
# when none is configured.
debian_archive() {
    local uri
    uri=$(sed -n 's/^URIs: *\(http[^ ]*debian\/*\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
    [ -n "$uri" ] || uri=$(awk '/^deb / && $2 ~ /debian\/?$/ { print $2; exit }' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null)
    echo "$uri"
}
DEBIAN_ARCHIVE_NONE="no Debian archive is configured for apt on this machine (no 'URIs: .../debian' in /etc/apt/sources.list.d/*.sources, no 'deb .../debian' line in /etc/apt/sources.list): add one, or set mirror=URI"
