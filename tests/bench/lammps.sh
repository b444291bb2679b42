#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# LAMMPS with its GPU package under plain mpirun and gsrun, side by side
# (GPU machine; not CI). The source is LAMMPS 4Feb2025 from Debian 13's
# source package (lammps_20250204+dfsg.1.orig.tar.xz), of which a subset is
# enough: src/ (top level, MAKE, GPU, MOLECULE, KSPACE, RIGID, fmt), lib/gpu
# and bench/in.lj, in.rhodo, data.rhodo:
#
#   tests/bench/lammps.sh --src TARBALL|DIR --build GSRUN_BUILD [--bench lj|rhodo]
#                         [--ranks "1 4 16"] [--configs "plain gsrun off fixed"]
#                         [--reps N] [--first-rep K] [--size N] [--steps N] [--csv FILE] [--work DIR]
#                         [--gpus N] [--packages "gpu molecule kspace rigid"]
#
# Builds lib/gpu (CUDA, the GPU's architecture) and lmp_mpi once in --work
# (default /tmp/gslammps), then runs bench/in.<bench> with the GPU package
# for each rank count and config. --gpus N (default 1) uses the node's first
# N GPUs (CUDA_VISIBLE_DEVICES=0,..,N-1 unless set): plain mpirun lets LAMMPS
# deal the ranks over them (-pk gpu N); under gsrun each rank sees only its
# own GPU as device 0 (-pk gpu 1) and gsrun deals them, one MPS server per GPU. --packages: the
# LAMMPS packages to build (in.lj needs only gpu). Configs:
#   plain  mpirun, no MPS            gsrun  gsrun --mps=on, the default share
#   off    gsrun --mps-percentage=off (100 %)
#   fixed  gsrun --mps-percentage=25
#   pP     gsrun --mps-percentage=P (any share: p37.5, p50)
# Problem size: in.lj's box times --size in each direction (default 3: 27 x
# 32,000 atoms); in.rhodo as it is (32,000 atoms); --steps for either
# (default 1000). Rows: bench,np,config,rep,loop_s,perf (LAMMPS's own "Loop time" and
# its performance line's first figure).
set -u
src="" build="" bench=lj ranks="1 4 16" configs="plain gsrun off fixed" reps=1 first=1 size=3 steps=1000
gpus=1 packages="gpu molecule kspace rigid"
csv="" work=/tmp/gslammps
while [ $# -gt 0 ]; do
    case $1 in
    --src) src=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --first-rep) first=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --packages) packages=$2; shift 2 ;;
    *) echo "usage: see the head of $0" >&2; exit 2 ;;
    esac
done
[ -n "$src" ] && [ -n "$build" ] || { echo "usage: see the head of $0" >&2; exit 2; }
case $gpus in '' | *[!0-9]* | 0) echo "lammps.sh: --gpus $gpus: give a count of GPUs, 1 or more" >&2; exit 2 ;; esac
build=$(cd "$build" && pwd) || exit 2 # the runs start in the bench dir
# gsrun would spread the ranks over every GPU it sees; LAMMPS uses the first N.
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-$(seq -s, 0 $((gpus - 1)))}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work" && work=$(cd "$work" && pwd) # the build steps cd away
csv=${csv:-$work/lammps.csv}
jobs=$(nproc)

# --- build ----------------------------------------------------------------------
top=$work/lammps
if [ ! -x "$top/src/lmp_mpi" ]; then
    rm -rf "$top" && mkdir -p "$top"
    src=$(cd "$(dirname "$src")" && pwd)/$(basename "$src")
    if [ -d "$src" ]; then cp -a "$src"/. "$top"/; else tar xJf "$src" -C "$top" --strip-components=0 || exit 1; fi
    [ -d "$top/src" ] || { d=$(ls -d "$top"/*/ | head -1); mv "$d"/* "$top"/; }
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
    # CUDA 13 gave cuCtxCreate a parameters argument; the primary context
    # (which geryon can use instead) needs no change of API.
    (cd "$top/lib/gpu" &&
        make -s -f Makefile.linux -j"$jobs" CUDA_HOME=/usr/local/cuda CUDA_ARCH="-arch=sm_$cap" \
            CUDR_OPTS="-O2 -DLAMMPS_SMALLBIG -DGERYON_NVD_PRIMARY_CONTEXT=1" >"$work/libgpu.log" 2>&1) ||
        { tail -30 "$work/libgpu.log"; exit 1; }
    (cd "$top/src" && for p in $packages; do make -s "yes-$p" >/dev/null || exit 1; done &&
        make -s -j"$jobs" mpi >"$work/lmp.log" 2>&1) || { grep -m20 -B2 -A3 "error" "$work/lmp.log"; tail -20 "$work/lmp.log"; exit 1; }
fi
lmp=$top/src/lmp_mpi
echo "# built: $lmp"

run() { # run NP CONFIG: prints "loop_s perf"
    local np=$1 config=$2 out=$work/out.$np.$config
    local args=(-sf gpu -pk gpu "$gpus" -log none)
    [ "$config" = plain ] || args[4]=1 # gsrun: each rank sees one device
    if [ "$bench" = lj ]; then
        args+=(-in in.lj -var x "$size" -var y "$size" -var z "$size")
    else
        args+=(-in in.rhodo -var x "$size" -var y 1 -var z 1)
    fi
    cd "$top/bench" || return
    # in.lj runs 100 steps; the step count is the last line's.
    sed "s/^run[[:space:]].*/run $steps/" "in.$bench" >"in.$bench.gs"
    args=("${args[@]/in.$bench/in.$bench.gs}")
    case $config in
    plain) mpirun -np "$np" --oversubscribe "$lmp" "${args[@]}" -screen "$out" ;;
    gsrun) "$build/launcher/gsrun" --mps=on -np "$np" --oversubscribe "$lmp" "${args[@]}" -screen "$out" ;;
    off) "$build/launcher/gsrun" --mps=on --mps-percentage=off -np "$np" --oversubscribe "$lmp" \
        "${args[@]}" -screen "$out" ;;
    fixed) "$build/launcher/gsrun" --mps=on --mps-percentage=25 -np "$np" --oversubscribe "$lmp" \
        "${args[@]}" -screen "$out" ;;
    p[0-9]*) "$build/launcher/gsrun" --mps=on --mps-percentage="${config#p}" -np "$np" --oversubscribe "$lmp" \
        "${args[@]}" -screen "$out" ;;
    *) echo "lammps.sh: unknown config '$config' (plain gsrun off fixed pP)" >&2; false ;;
    esac >"$out.err" 2>&1
    local rc=$?
    local loop perf
    loop=$(sed -n 's/^Loop time of \([0-9.e+-]*\) on .*/\1/p' "$out" | tail -1)
    perf=$(sed -n 's/^Performance: \([0-9.e+-]*\) .*/\1/p' "$out" | tail -1)
    [ $rc -eq 0 ] && [ -n "$loop" ] || { loop=NA; perf=NA; tail -n 3 "$out" "$out.err" | sed 's/^/# /' >&2; }
    echo "$loop ${perf:-NA}"
}

[ -s "$csv" ] || echo "bench,np,config,rep,loop_s,perf" >"$csv"
[ "$gpus" = 1 ] || bench_tag="$bench-${gpus}gpu"
for rep in $(seq "$first" $((first + reps - 1))); do
    for np in $ranks; do
        for config in $configs; do
            [ "$np" = 1 ] && [ "$config" != plain ] && [ "$config" != gsrun ] && continue
            read -r loop perf < <(run "$np" "$config")
            echo "${bench_tag:-$bench},$np,$config,$rep,$loop,$perf" | tee -a "$csv"
        done
    done
done
[ -n "${OUT:-}" ] && cp "$csv" "$OUT/lammps-$bench.csv" 2>/dev/null
exit 0
