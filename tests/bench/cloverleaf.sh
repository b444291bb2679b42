#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: strong scaling of a CUDA grid code under plain mpirun and gsrun (GPU machine)
# CloverLeaf (UoB-HPC/CloverLeaf, its CUDA model with MPI: a 2D structured
# hydrodynamics code, the domain split over the ranks, halos exchanged every
# step) under plain mpirun and gsrun, side by side (GPU machine; not CI):
#
#   tests/bench/cloverleaf.sh --src DIR --build GSRUN_BUILD [--ranks "1 4 16"]
#                             [--configs "plain gsrun off fixed"] [--reps N] [--first-rep K]
#                             [--cells N] [--steps N] [--csv FILE] [--work DIR] [--gpus N]
#
# --src: a CloverLeaf tree (CMakeLists.txt, cmake/, driver/, src/cuda/). Built
# once in --work (default /tmp/gsclover) with -DMODEL=cuda -DENABLE_MPI=ON
# for the GPU's architecture. The deck: --cells x --cells cells (default
# 3840, as clover_bm16), --steps steps (default 300). --gpus N (default 1)
# uses the node's first N GPUs (CUDA_VISIBLE_DEVICES=0,..,N-1 unless set):
# under plain mpirun a wrapper gives local rank r of n the GPU r * N / n (in
# blocks, as gsrun deals them) as device 0; under gsrun each rank sees its
# own GPU as device 0 and gsrun deals them, one MPS server per GPU.
# Configs as tests/bench/lammps.sh: plain (mpirun, no MPS), gsrun (the
# default share), off (--mps-percentage=off), fixed (--mps-percentage=25),
# pP (--mps-percentage=P).
# Rows: bench,np,config,rep,wall_s (CloverLeaf's own "Wall clock").
set -u
src="" build="" ranks="1 4 16" configs="plain gsrun off fixed" reps=1 first=1 cells=3840 steps=300
csv="" work=/tmp/gsclover gpus=1
while [ $# -gt 0 ]; do
    case $1 in
    --src) src=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --first-rep) first=$2; shift 2 ;;
    --cells) cells=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    *) echo "usage: see the head of $0" >&2; exit 2 ;;
    esac
done
[ -n "$src" ] && [ -n "$build" ] || { echo "usage: see the head of $0" >&2; exit 2; }
case $gpus in '' | *[!0-9]* | 0) echo "cloverleaf.sh: --gpus $gpus: give a count of GPUs, 1 or more" >&2; exit 2 ;; esac
src=$(cd "$src" && pwd) && build=$(cd "$build" && pwd) || exit 2
# The first N GPUs (gsrun would spread the ranks over every GPU it sees).
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-$(seq -s, 0 $((gpus - 1)))}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work" && work=$(cd "$work" && pwd)
csv=${csv:-$work/cloverleaf.csv}

# --- build ----------------------------------------------------------------------
bin=$work/build/cuda-cloverleaf
if [ ! -x "$bin" ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
    cuda=${CUDA_HOME:-/usr/local/cuda}
    (cmake -S "$src" -B "$work/build" -DMODEL=cuda -DENABLE_MPI=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDA_ARCH="sm_$cap" &&
        cmake --build "$work/build" -j"$(nproc)") >"$work/build.log" 2>&1 ||
        { grep -m20 -iB2 -A3 "error" "$work/build.log"; tail -20 "$work/build.log"; exit 1; }
    [ -x "$bin" ] || bin=$(find "$work/build" -maxdepth 1 -name '*cloverleaf' -type f -perm -u+x | head -1)
fi
echo "# built: $bin"
cat >"$work/clover.in" <<DECK
*clover
 state 1 density=0.2 energy=1.0
 state 2 density=1.0 energy=2.5 geometry=rectangle xmin=0.0 xmax=5.0 ymin=0.0 ymax=2.0
 x_cells=$cells
 y_cells=$cells
 xmin=0.0
 ymin=0.0
 xmax=10.0
 ymax=10.0
 initial_timestep=0.04
 timestep_rise=1.5
 max_timestep=0.04
 end_step=$steps
*endclover
DECK

run() { # run NP CONFIG: prints the wall clock in s, or NA
    local np=$1 config=$2 out=$work/out.$np.$config
    local args=(--device 0 --file "$work/clover.in" --out "$out.clover")
    case $config in
    plain) mpirun -np "$np" --oversubscribe "$work/onegpu" "$bin" "${args[@]}" ;;
    gsrun) "$build/launcher/gsrun" --mps=on -np "$np" --oversubscribe "$bin" "${args[@]}" ;;
    off) "$build/launcher/gsrun" --mps=on --mps-percentage=off -np "$np" --oversubscribe "$bin" "${args[@]}" ;;
    fixed) "$build/launcher/gsrun" --mps=on --mps-percentage=25 -np "$np" --oversubscribe "$bin" "${args[@]}" ;;
    p[0-9]*) "$build/launcher/gsrun" --mps=on --mps-percentage="${config#p}" -np "$np" --oversubscribe "$bin" "${args[@]}" ;;
    *) echo "cloverleaf.sh: unknown config '$config' (plain gsrun off fixed pP)" >&2; false ;;
    esac >"$out" 2>&1
    local rc=$? wall
    wall=$(sed -n 's/^ *Wall clock *\([0-9.e+-]*\).*/\1/p' "$out" | tail -1)
    [ $rc -eq 0 ] && [ -n "$wall" ] || { wall=NA; tail -n 3 "$out" | sed 's/^/# /' >&2; }
    echo "$wall"
}

# plain mpirun: local rank r of n on GPU r * N / n of CUDA_VISIBLE_DEVICES, as device 0.
cat >"$work/onegpu" <<'WRAP'
#!/bin/sh
n=$(echo "$CUDA_VISIBLE_DEVICES" | tr , '\n' | wc -l)
i=$((${OMPI_COMM_WORLD_LOCAL_RANK:-0} * n / ${OMPI_COMM_WORLD_LOCAL_SIZE:-1}))
CUDA_VISIBLE_DEVICES=$(echo "$CUDA_VISIBLE_DEVICES" | cut -d, -f$((i + 1))) exec "$@"
WRAP
chmod +x "$work/onegpu"
cd "$work" || exit 1
tag=""
[ "$gpus" = 1 ] || tag="-${gpus}gpu"
[ -f "$csv" ] || echo "bench,np,config,rep,wall_s" >"$csv"
for rep in $(seq "$first" $((first + reps - 1))); do
    for np in $ranks; do
        for config in $configs; do
            [ "$np" = 1 ] && [ "$config" != plain ] && [ "$config" != gsrun ] && continue
            echo "cloverleaf${cells}x${steps}${tag},$np,$config,$rep,$(run "$np" "$config")" | tee -a "$csv"
        done
    done
done
exit 0
