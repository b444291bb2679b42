#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Spack is not here to run the recipe; this keeps it from drifting from
# configure: every configure option the recipe uses exists, every gsrun
# option of configure --help is used or named as left at its default, every
# variant is used, and the recipe compiles as Python.
#   tests/packaging/spack.sh CONFIGURE RECIPE
. "$(dirname "$0")/lib.sh"
configure=$1 recipe=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$configure" --help | sed -n 's/^  --with-\([a-z0-9-]*\).*/\1/p' | grep -v '^$' | sort -u >"$W/configure"
grep -o -- '--with\(out\)\?-[a-z0-9-]*' "$recipe" | sed 's/^--with\(out\)\?-//' | sort -u >"$W/recipe"
check "configure --help lists gsrun's options ($(tr '\n' ' ' <"$W/configure"))" test -s "$W/configure"
missing=$(comm -23 "$W/configure" "$W/recipe" | tr '\n' ' ')
check "every configure option is in the recipe${missing:+ (missing: $missing)}" test -z "$missing"
unknown=$(comm -13 "$W/configure" "$W/recipe" | tr '\n' ' ')
check "every option of the recipe is configure's${unknown:+ (unknown: $unknown)}" test -z "$unknown"
bad=""
for v in $(sed -n 's/^ *variant("\([a-z_]*\)".*/\1/p' "$recipe"); do
    # "+name" in a spec test (not a depends_on's when=), variants["name"], or a
    # row ("name", ...) of the recipe's table of switches
    grep -qE "(^|[^=])\"\\+$v\"|variants\\[\"$v\"\\]|^ *\\(\"$v\"," "$recipe" || bad="$bad $v"
done
check "every variant changes configure's arguments${bad:+ (unused:$bad)}" test -z "$bad"
bad=""
for v in $(grep -o 'when="+[a-z_]*"' "$recipe" | sed 's/when="+//; s/"//' | sort -u); do
    grep -q "^ *variant(\"$v\"" "$recipe" || bad="$bad $v"
done
check "every when= names a variant${bad:+ (not a variant:$bad)}" test -z "$bad"
check "the recipe's license is BSD-3-Clause" grep -q 'license("BSD-3-Clause")' "$recipe"
if command -v python3 >/dev/null; then
    check "the recipe is valid Python" python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$recipe"
else
    skip "the recipe is valid Python" "no python3"
fi
