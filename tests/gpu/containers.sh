#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: ranks in containers with real MPS (GPU machine; issue 59)
# Ranks started the way container runtimes start them get MPS with no flag,
# on an NVIDIA GPU machine (not run by CI; passes on 1, 2 and 4 GPUs):
#
#   tests/gpu/containers.sh [BUILD_DIR] [DEBS_DIR]
#
# BUILD_DIR defaults to ./_build (built if missing). DEBS_DIR (default
# ./_thirdparty/ch, git-ignored) holds Debian 12's Charliecloud and the
# libraries its ch-run needs, unpacked here (nothing is installed):
#   apt-get download charliecloud-runtime libsquashfuse0 libfuse3-3 liblzo2-2
# Each case runs 2 ranks a GPU of examples/solo_jacobi (CUDA without MPI, as
# a program in an image may be), gsrun -v, TMPDIR unset (gsrun's dirs in
# /dev/shm). While the ranks run, nvidia-smi's type of each is sampled: an
# MPS client is M+C, a context of its own C.
#   1. a fresh tmpfs on /tmp in each rank (what enroot does): every rank
#      M+C, gsrun "served N of N"
#   2. a private IPC namespace: the same
#   1b. the same with gsrun's dirs in a TMPDIR under /tmp (where they were
#      before, in /tmp): every rank C, each told which directory to bind
#   3. a fresh tmpfs on /dev/shm (what podman does): each rank told which
#      directory to bind, and gsrun "served 0 of N"
#   3b. ranks run as another user (root's job, ranks as nobody): each told
#      that MPS takes clients of its own user only
#   4. Charliecloud: ch-run of a directory image that holds the program and
#      the driver's libraries: every rank M+C
#   5. the same as another user (nobody): nobody's own servers
# Nothing of MPS is left after each case. Ends with "N passed, N failed".
set -u
export GSRUN_MPS_LINGER=${GSRUN_MPS_LINGER:-0}
unset TMPDIR
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build}
debs=${2:-$top/_thirdparty/ch}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
notok() { fail=$((fail + 1)); echo "not ok - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; return 1; fi; }

. "$(dirname "$0")/procs.sh"
gpu_ready "$top" "$build"
ngpus=$(nvidia-smi -L | grep -c '^GPU ')
echo "# $ngpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); gsrun's dirs in $GS_ROOT"
G=$build/launcher/gsrun
T=$(mktemp -d /var/tmp/gsct.XXXXXX)
chmod 755 "$T"
# The program where every case's rank sees it (not /tmp, which case 1 hides).
mkdir -p "$T/bin"
cp "$build/examples/solo_jacobi" "$T/bin/"
P=$T/bin/solo_jacobi
n=$((2 * ngpus))
ARGS="--n 4096 --iters 40000"

# run NAME [PREFIX...]: PREFIX... gsrun -v -np n "${RANK[@]}" P ARGS (RANK:
# what each rank runs before the program), nvidia-smi's types of the ranks
# sampled every 0.2 s while it runs (the most "M+C" and "C" seen at once, in
# $T/NAME.types).
RANK=()
run() {
    local name=$1 pid mc=0 c=0 a b
    shift
    "$@" "$G" -v -np $n "${RANK[@]}" "$P" $ARGS >"$T/$name.out" 2>"$T/$name.err" &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
        a=$(nvidia-smi | grep solo_jacobi | awk '{print $(NF-3)}' | grep -c '^M+C$')
        b=$(nvidia-smi | grep solo_jacobi | awk '{print $(NF-3)}' | grep -c '^C$')
        [ "$a" -gt $mc ] && mc=$a
        [ "$b" -gt $c ] && c=$b
        sleep 0.2
    done
    wait $pid
    echo $? >"$T/$name.rc"
    echo "$mc $c" >"$T/$name.types"
}
types() { echo "M+C $(cut -d' ' -f1 "$T/$1.types"), C $(cut -d' ' -f2 "$T/$1.types")"; }
served() { grep -o 'served [0-9]* of [0-9]* ranks as MPS clients[^;(]*' "$T/$1.err" | awk '{s += $2; r += $4} END {print "served " s " of " r}'; }
all_clients() { # every rank an MPS client: nvidia-smi and gsrun agree
    [ "$(cat "$T/$1.rc")" = 0 ] && [ "$(cut -d' ' -f1 "$T/$1.types")" = $n ] &&
        [ "$(cut -d' ' -f2 "$T/$1.types")" = 0 ] && [ "$(served "$1")" = "served $n of $n" ]
}
# told_all NAME WHAT PATTERN: every rank of case NAME ran without MPS (as
# nvidia-smi saw them: n of type C, none M+C) and was told (a line matching
# PATTERN each); the first such line shown.
told_all() {
    local told mc c
    told=$(grep -c "$3" "$T/$1.err")
    mc=$(cut -d' ' -f1 "$T/$1.types")
    c=$(cut -d' ' -f2 "$T/$1.types")
    check "$2: $(types "$1"); $told of $n ranks told; gsrun $(served "$1")" \
        eval "[ '$told' = $n ] && [ '$mc' = 0 ] && [ '$c' = $n ] && [ '$(served "$1")' = 'served 0 of $n' ]" ||
        sed 's/^/# /' "$T/$1.err" | tail -20
    grep -m1 "$3" "$T/$1.err" | sed 's/^/#   /'
}
clean() {
    local left
    for _ in $(seq 100); do
        left=$(live_procs 'nvidia-cuda-mps*')$(ls -d "$GS_ROOT"/gsrun.* 2>/dev/null)
        [ -z "$left" ] && break
        sleep 0.1
    done
    check "  ... no MPS process and no run dir left ($left)" [ -z "$left" ]
}
fresh() { # a rank's command that hides $1 under a fresh tmpfs first
    echo "exec unshare -m sh -c 'mount -t tmpfs gsrun-ct $1 && exec \"\$0\" \"\$@\"' \"\$0\" \"\$@\""
}

# 1. A fresh /tmp.
RANK=(sh -c "$(fresh /tmp)")
run tmp
check "1. a fresh /tmp in each of $n ranks: $(types tmp); gsrun $(served tmp); status $(cat "$T/tmp.rc")" \
    all_clients tmp || sed 's/^/# /' "$T/tmp.err" "$T/tmp.out" | tail -20
clean

# 1b. The same with gsrun's dirs under /tmp (where they were before; TMPDIR=/tmp
# itself now means the default): the ranks cannot reach their servers, run
# without MPS, and are told.
RANK=(sh -c "$(fresh /tmp)")
TT=$(mktemp -d /tmp/gsct-tmpdir.XXXXXX)
run tmp1 env TMPDIR="$TT"
rm -rf "$TT"
told_all tmp1 "1b. the same with TMPDIR=$TT" 'is not there where it runs'
clean

# 2. A private IPC namespace.
RANK=(unshare -i)
run ipc
check "2. a private IPC namespace: $(types ipc); gsrun $(served ipc)" all_clients ipc ||
    sed 's/^/# /' "$T/ipc.err" | tail -20
clean

# 3. A fresh /dev/shm: the rank cannot reach its server, and is told the bind.
RANK=(sh -c "$(fresh /dev/shm)")
run shm
told_all shm "3. a fresh /dev/shm" 'is not there where it runs'
clean

# 3b. A rank run as another user (as a container root mapped to another host
# uid is): it cannot enter the job user's pipe dir; told why.
if [ "$(id -u)" = 0 ]; then
    RANK=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    run uid
    told_all uid "3b. ranks run as uid 65534 in root's job" "it runs as uid 65534, not as uid 0"
    clean
fi

# 4-5. Charliecloud, unpacked from its .deb (ch-run needs libsquashfuse and
# libfuse3, which need not be here: they are given to ch-run alone).
ch=$T/ch
mkdir -p "$ch"
for d in "$debs"/*.deb; do [ -e "$d" ] && dpkg-deb -x "$d" "$ch"; done
if [ ! -x "$ch/usr/bin/ch-run" ]; then
    notok "4. Charliecloud: no ch-run in $debs (apt-get download charliecloud-runtime libsquashfuse0 libfuse3-3 liblzo2-2 there)"
else
    mkdir -p "$T/path"
    cat >"$T/path/ch-run" <<EOF
#!/bin/sh
exec /lib64/ld-linux-x86-64.so.2 --library-path "$ch/usr/lib/x86_64-linux-gnu:$ch/lib/x86_64-linux-gnu" "$ch/usr/bin/ch-run" "\$@"
EOF
    chmod 755 "$T/path/ch-run"
    # The image: the program and its libraries, the driver's CUDA libraries,
    # at their paths here; what ch-run binds onto (/dev is the host's: the
    # GPUs and gsrun's /dev/shm).
    img=$T/img
    mkdir -p "$img"/{bin,dev,proc,sys,tmp,home,mnt,run,etc,var/tmp}
    touch "$img"/etc/{passwd,group,hosts,resolv.conf}
    libs=$(ldconfig -p | grep -E 'lib(cuda|nvidia-ptxjitcompiler|nvidia-nvvm|nvidia-gpucomp)\.so' |
        grep -o '/[^ ]*$' | sort -u)
    for f in "$P" /bin/sh $libs; do
        for l in "$f" $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*'); do
            [ -e "$img$l" ] && continue
            mkdir -p "$img$(dirname "$l")"
            cp -L "$l" "$img$l"
        done
    done
    # The image's loader finds the copied libraries (its own cache).
    for l in $libs; do dirname "$l"; done | sort -u >"$img/etc/ld.so.conf"
    /sbin/ldconfig -r "$img" 2>/dev/null
    chmod -R a+rX "$T"
    echo "# image: $(du -sh "$img" | cut -f1), $(echo $libs | wc -w) driver libraries; ch-run $(USER=root "$T/path/ch-run" --version 2>&1)"
    RANK=(ch-run "$img" --)
    run ch env PATH="$T/path:$PATH" USER=root
    check "4. ch-run, $n ranks: $(types ch); gsrun $(served ch); status $(cat "$T/ch.rc")" all_clients ch ||
        sed 's/^/# /' "$T/ch.err" "$T/ch.out" | tail -20
    clean

    # 5. As nobody (MPS serves only its own user: nobody's job, nobody's servers).
    if setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$G" 2>/dev/null; then
        mkdir -m 700 "$T/nb" && chown 65534 "$T/nb"
        run nb env PATH="$T/path:$PATH" setpriv --reuid=65534 --regid=65534 --clear-groups env \
            -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM USER=nobody HOME="$T/nb" \
            OMPI_MCA_orte_tmpdir_base="$T/nb" PRTE_MCA_prte_tmpdir_base="$T/nb"
        check "5. ch-run as nobody: $(types nb); gsrun $(served nb); status $(cat "$T/nb.rc")" all_clients nb ||
            sed 's/^/# /' "$T/nb.err" "$T/nb.out" | tail -20
        clean
    else
        notok "5. ch-run as nobody: nobody cannot run $G (its build dir is closed to others): build in a directory others can read"
    fi
fi

rmdir /dev/shm/gsrun-65534/place /dev/shm/gsrun-65534 2>/dev/null # nobody's base, left empty
rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
