#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The Lmod module file as installed by `make install` in a prefix of its own:
# `module load gsrun` puts that gsrun on PATH and its man page on MANPATH, and
# `module unload` takes them away. (With the Debian packages, tests/packaging/
# root.sh checks the module's Open MPI component setting.)
#   tests/packaging/lmod.sh WORKDIR SRCDIR
. "$(dirname "$0")/lib.sh"
W=$1 S=$2
init=/usr/share/lmod/lmod/init/bash
if [ ! -f "$init" ]; then
    skip "Lmod module" "needs Lmod (apt-get install lmod)"
    exit 0
fi
P=$W/lmod-prefix
mkdir -p "$W/lmod-build"
(cd "$W/lmod-build" && "$S/configure" -q --prefix="$P" --without-ompi --without-slurm --without-cuda &&
    make -s -j"$(nproc)" && make -s install) >"$W/lmod-build.log" 2>&1
check "make install into a prefix of its own ($P)" test $? = 0 || { tail -20 "$W/lmod-build.log" | diag; exit 0; }
V=$(sed -n 's/^PACKAGE_VERSION = //p' "$W/lmod-build/Makefile")
check "the module file is installed as share/gsrun/modulefiles/gsrun/$V.lua" \
    test -f "$P/share/gsrun/modulefiles/gsrun/$V.lua"
# A login shell's view: Lmod initialised, the module path added, the module loaded.
out=$(env -i HOME="$W" PATH=/usr/bin:/bin bash -c '
    . '"$init"' >/dev/null 2>&1
    module use "$1/share/gsrun/modulefiles"
    module load gsrun 2>&1
    echo "which=$(command -v gsrun)"
    echo "manpath=$MANPATH"
    echo "version=$(gsrun --version | head -1)"
    echo "ompi=${OMPI_MCA_mca_base_component_path-unset}"
    echo "list=$(module -t list 2>&1 | tr "\n" " ")"
    module unload gsrun
    echo "after=$(command -v gsrun || echo none)"
' lmod "$P" 2>&1)
echo "$out" | diag
check "module load gsrun: gsrun on PATH is the module's" eval 'echo "$out" | grep -qx "which=$P/bin/gsrun"'
check "module load gsrun: MANPATH has its man pages" \
    eval 'echo "$out" | grep -q "^manpath=$P/share/man" && [ -f "$P/share/man/man1/gsrun.1" ]'
check "module load gsrun: it runs (gsrun $V)" eval 'echo "$out" | grep -qx "version=gsrun $V"'
check "module list shows gsrun/$V" eval 'echo "$out" | grep -q "^list=.*gsrun/$V"'
check "a build without the Open MPI component leaves Open MPI's component path alone" \
    eval 'echo "$out" | grep -qx "ompi=unset"'
check "module unload gsrun takes it off PATH" eval 'echo "$out" | grep -qx "after=none"'
