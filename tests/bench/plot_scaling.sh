#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Strong-scaling curves from the real-application benches' CSVs
# (tests/bench/lammps.sh, tests/bench/cloverleaf.sh: bench,np,config,rep,time,...):
# time against ranks on the GPU, one line per config (the median of its
# runs), into an SVG. Needs gnuplot (Debian: gnuplot-nox).
#   tests/bench/plot_scaling.sh results.csv out.svg "title" ["x axis label"]
set -eu
csv=$1 svg=$2 title=${3:-} xlabel=${4:-MPI ranks on one GPU}
command -v gnuplot >/dev/null || { echo "plot_scaling.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One file per config: "np median" rows, np ascending. NA runs are skipped.
awk -F, -v dir="$tmp" '
NR == 1 || $5 == "NA" { next }
{ k = $3 " " $2; v[k] = v[k] " " $5; c[$3] = 1 }
END {
    for (k in v) {
        n = split(v[k], a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        split(k, f, " ")
        print f[2], (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) >> (dir "/" f[1] ".dat")
    }
}' "$csv"
plots=""
for config in plain gsrun off fixed; do
    f=$tmp/$config.dat
    [ -f "$f" ] || continue
    sort -n "$f" -o "$f"
    case $config in
    plain) label="plain mpirun (no MPS)" ;;
    gsrun) label="gsrun, default share (200/n)" ;;
    off) label="gsrun --mps-percentage=off (100 %)" ;;
    fixed) label="gsrun --mps-percentage=25" ;;
    esac
    plots="$plots${plots:+, }'$f' using 1:2 with linespoints lw 2 title '$label'"
done
# Room around the first and last rank counts, so their tics are labelled.
lo=$(cat "$tmp"/*.dat | sort -n | head -1 | cut -d' ' -f1)
hi=$(cat "$tmp"/*.dat | sort -n | tail -1 | cut -d' ' -f1)
gnuplot <<GP
set terminal svg size 720,480 dynamic font 'sans,12'
set output '$svg'
set title '$title'
set xlabel '$xlabel'
set ylabel 'time (s)'
set logscale x 2
set xrange [$lo / 1.25 : $hi * 1.25]
set xtics (1, 2, 4, 8, 16, 32, 64)
set yrange [0:*]
set grid
set key below
plot $plots
GP
