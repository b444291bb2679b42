#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Plots throughput against np per configuration from gpu_bench.sh's CSV
# (median of the runs), one panel per program, into a PNG. Needs gnuplot.
# Without a one-rank plain run in the CSV it plots time to solution instead.
#   tests/bench/plot.sh bench.csv out.png
set -eu
csv=$1 png=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Throughput relative to one rank's plain run: (np * t1 / t) for the
# microbenchmark (each rank does the same work), (t1 / t) for the mini-app
# (fixed total work).
awk -F, -v dir="$tmp" '
NR == 1 || $10 != 1 { next }
{ k = $1 " " $2 " " $3; v[k] = v[k] " " $6; }
END {
    for (k in v) {
        n = split(v[k], a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        m[k] = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    for (k in m) {
        split(k, f, " ")
        base = m[f[1] " 1 plain"]
        if (base == "") { print f[2], m[k] >> (dir "/" f[1] "." f[3] ".dat"); print "tts" > (dir "/mode"); continue }
        thr = (f[1] == "small_kernels" ? f[2] : 1) * base / m[k]
        print f[2], thr >> (dir "/" f[1] "." f[3] ".dat")
    }
}' "$csv"
for f in "$tmp"/*.dat; do sort -n "$f" -o "$f"; done
rm -f "$tmp/mode.dat"
{
    echo "set terminal pngcairo size 1200,500 font 'sans,10' noenhanced"
    echo "set output '$png'"
    echo "set multiplot layout 1,2"
    for p in small_kernels jacobi; do
        if [ -e "$tmp/mode" ]; then
            echo "set title '$p: time to solution, s (median of runs; lower is better)'"
            echo "set logscale x 2; set xlabel 'ranks on one GPU'; set ylabel 'seconds'; set key top left; set grid"
        else
            echo "set title '$p: throughput relative to one rank without MPS (median of runs)'"
            echo "set logscale x 2; set xlabel 'ranks on one GPU'; set ylabel 'relative throughput'; set key top left; set grid"
        fi
        cmd="plot"
        for c in plain hand pre gsrun gsrun-100 gsrun-equal gsrun-floor; do
            [ -s "$tmp/$p.$c.dat" ] && cmd="$cmd '$tmp/$p.$c.dat' with linespoints title '$c',"
        done
        echo "${cmd%,}"
    done
    echo "unset multiplot"
} >"$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
