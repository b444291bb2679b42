#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Every source file of gsrun (C, CUDA, headers, scripts, m4, automake and
# autoconf input; the RPM spec, the Spack recipe, debian/rules, templates)
# names its license in an SPDX line within its first three lines. Generated and third-party files (build-aux, aclocal.m4,
# gs_autoconf.h, build trees, a package build's debian/ output) are not
# looked at. TAP output.
S=${GS_TOP_SRCDIR:?run through make check}
n=0 bad=0
while IFS= read -r f; do
    n=$((n + 1))
    if head -3 "$f" | grep -q "SPDX-License-Identifier: BSD-3-Clause"; then
        echo "ok $n - ${f#"$S"/}"
    else
        bad=$((bad + 1))
        echo "not ok $n - ${f#"$S"/}: no 'SPDX-License-Identifier: BSD-3-Clause' in its first 3 lines"
    fi
done < <(find "$S" \( -name .git -o -name build-aux -o -name autom4te.cache -o -name '_build*' -o -name '.devcarry' -o -name .thirdparty \
    -o -path "$S/debian/tmp" -o -path "$S/debian/gsrun*" -o -path "$S/debian/.debhelper" \) -prune -o -type f \
    \( -name '*.[ch]' -o -name '*.cu' -o -name '*.sh' -o -name '*.m4' -o -name Makefile.am -o -name configure.ac \
    -o -name '*.py' -o -name '*.spec' -o -name '*.lua.in' -o -name '*.conf.in' -o -path "$S/debian/rules" \
    -o -path "$S/.ci/run" \) ! -name aclocal.m4 ! -name gs_autoconf.h -print | sort)
[ $n -gt 0 ] || { echo "not ok 1 - no source file found under $S"; n=1; bad=1; }
[ -f "$S/LICENSE" ] && echo "ok $((n + 1)) - LICENSE is there" || { echo "not ok $((n + 1)) - no LICENSE"; bad=$((bad + 1)); }
echo "1..$((n + 1))"
[ $bad -eq 0 ]
