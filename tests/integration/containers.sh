#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# covers: runtime/files/rundir.c, runtime/core/container.c, runtime/job/attach.c
# Ranks in containers get MPS with no flag (issue 59), with the fake MPS and
# NVML. Each rank is started the way container runtimes start one: in a
# mount namespace with a fresh /tmp (enroot), a fresh /dev/shm (podman, its
# private IPC), a private IPC namespace, and under Charliecloud's ch-run (a
# directory image holding the test program and its libraries), as root and
# as another user. A rank is an MPS client only when it reaches its server's
# pipe dir (tests/progs/ct_client, the fakes); one that cannot is told which
# directory to bind, and with which option of its runtime.
#   1. no TMPDIR (or /tmp, which Slurm sets): gsrun's dirs in /dev/shm;
#      another TMPDIR: where it says
#   2. a fresh /tmp: every rank a client (before, with gsrun's dirs in /tmp,
#      all ran without MPS)
#   3. a private IPC namespace: clients
#   4. a fresh /dev/shm: each rank told the directory to bind, the job's
#      status its own; a rank run as another user told why it cannot attach
#   5. ch-run as root: clients; with a TMPDIR (ch-run binds it at the
#      guest's /tmp and unsets it), told the bind as ch-run takes it; the
#      rank prefix (gsrun exec) in front of ch-run under plain mpirun
#   6. ch-run as nobody: clients of nobody's own servers
#   7. podman run --rootfs, where podman runs here
# The whole test runs in a mount namespace of its own with a private tmpfs
# on /dev/shm, so that its jobs' dirs there are its own.
if [ -z "${GS_CT_INNER:-}" ]; then
    if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
        exec unshare -m --propagation private env GS_CT_INNER=1 bash "$0" "$@"
    fi
    echo "1..0 # SKIP needs root and mount namespaces (unshare -m) to start ranks as container runtimes do"
    exit 0 # a TAP plan of 0 with SKIP; 77 would count as an error
fi
mount -t tmpfs -o mode=1777,size=256m gsrun-ct /dev/shm || {
    echo "1..0 # SKIP cannot mount a private tmpfs on /dev/shm"
    exit 0
}
. "$GS_TOP_SRCDIR/tests/integration/lib.sh"

# The program and the fake libcuda.so.1 it loads from beside its folder,
# copied out of the build tree (which may be under the /tmp a case hides).
CT=/dev/shm/gsct/progs/ct_client
mkdir -p /dev/shm/gsct/progs /dev/shm/gsct/fake/cuda
cp "$B/tests/progs/ct_client" /dev/shm/gsct/progs/
cp "$B/tests/fake/cuda/libcuda.so.1" /dev/shm/gsct/fake/cuda/
chmod -R a+rX /dev/shm/gsct
SHM_CTX=/dev/shm/ctx # the fake NVML's contexts where the rank can write them
mkdir -m 1777 -p "$SHM_CTX"
me=$(id -u)

# job NAME CTXDIR args...: gsrun on the fakes (1 GPU, -v), with the
# environment's TMPDIR, or none where NOTMP=1 (then gsrun chooses).
job() {
    local n=$1 c=$2
    shift 2
    ${NOTMP:+env -u TMPDIR} env USER="$(id -un)" LD_LIBRARY_PATH="$FAKE_LIB" FAKE_NVML_GPUS=1 \
        FAKE_NVML_CTX_DIR="$c" \
        "$GSRUN" --mps-control="$FAKE_CONTROL" -v "$@" >"$OUT.$n" 2>"$ERR.$n"
    echo $? >"$OUT.$n.rc"
}
clients() { grep -c 'client=ok' "$OUT.$1"; }
served() { grep -o 'served [0-9]* of [0-9]* ranks as MPS clients[^(]*' "$ERR.$1"; }
rc_of() { cat "$OUT.$1.rc"; }
pipes() { grep -o 'pipe=[^ ]*' "$OUT.$1" | sort -u | tr '\n' ' '; }
shm_left() { # what jobs left in /dev/shm (a user's empty base stays by design)
    rmdir /dev/shm/gsrun-[0-9]*/place /dev/shm/gsrun-[0-9]* 2>/dev/null
    ls -A /dev/shm | grep -v '^ctx$\|^img$\|^nobody$\|^gsct$\|^libpod_lock$'
}

# --- 1. where the dirs go --------------------------------------------------
NOTMP=1 job d $SHM_CTX -np 2 "$CT" --sleep 1200
check "1. no TMPDIR: the job's pipe dir is in /dev/shm ($(pipes d))" \
    eval "[ $(rc_of d) = 0 ] && [ \"\$(grep -c 'pipe=/dev/shm/gsrun\.' '$OUT.d')\" = 2 ]" || diag "$ERR.d"
check "  ... both ranks MPS clients: $(served d)" [ "$(clients d)" = 2 ]
check "  ... nothing left in /dev/shm" [ -z "$(shm_left)" ] || shm_left | diag
NOTMP=1 GSRUN_MPS_SHARE=node job s $SHM_CTX -np 2 "$CT" --sleep 600
check "  ... the user's shared servers in /dev/shm/gsrun-$me ($(pipes s))" \
    eval "[ \"\$(grep -c 'pipe=/dev/shm/gsrun-$me/mps-share/' '$OUT.s')\" = 2 ]" || diag "$ERR.s"
TMPDIR=/tmp job slurm "$SHM_CTX" -np 2 "$CT" --sleep 600
check "  ... TMPDIR=/tmp (what Slurm sets for every task) is the default: /dev/shm ($(pipes slurm))" \
    eval "[ \"\$(grep -c 'pipe=/dev/shm/gsrun\.' '$OUT.slurm')\" = 2 ]" || diag "$ERR.slurm"
job t "$SHM_CTX" -np 2 "$CT" --sleep 600
check "  ... TMPDIR set: its meaning kept, the pipe dir in it ($(pipes t))" \
    eval "[ \"\$(grep -c 'pipe=$TMPDIR/gsrun\.' '$OUT.t')\" = 2 ]" || diag "$OUT.t"
check_clean "1."

# --- 2. a fresh /tmp, as enroot makes ----------------------------------------
# The rank's own mount namespace, a tmpfs on its /tmp, then the program.
fresh() { # sh -c "$(fresh DIR)" PROG ARGS...: PROG with DIR hidden under a fresh tmpfs
    echo "exec unshare -m sh -c 'mount -t tmpfs gsrun-ct $1 && exec \"\$0\" \"\$@\"' \"\$0\" \"\$@\""
}
NOTMP=1 job tmp $SHM_CTX -np 2 sh -c "$(fresh /tmp)" "$CT" --sleep 1500
check "2. a fresh /tmp in each rank: both MPS clients ($(clients tmp)), status $(rc_of tmp)" \
    [ "$(clients tmp)" = 2 -a "$(rc_of tmp)" = 0 ] || diag "$OUT.tmp" "$ERR.tmp"
check "  ... and gsrun says so: $(served tmp)" grep -q 'served 2 of 2 ranks as MPS clients' "$ERR.tmp"

# --- 3. a private IPC namespace ---------------------------------------------
NOTMP=1 job ipc $SHM_CTX -np 2 unshare -i "$CT" --sleep 1500
check "3. a private IPC namespace: both MPS clients ($(clients ipc)): $(served ipc)" \
    [ "$(clients ipc)" = 2 -a "$(rc_of ipc)" = 0 ] || diag "$OUT.ipc" "$ERR.ipc"

# --- 4. a fresh /dev/shm, as podman makes --------------------------------------
mkdir -p "$TEST_TMP/ctx"
NOTMP=1 job shm "$TEST_TMP/ctx" -np 2 sh -c "$(fresh /dev/shm)" "$B/tests/progs/ct_client" --sleep 3000
bind=$(grep -o -m1 'bind [^ ]* into it' "$ERR.shm" | cut -d' ' -f2)
check "4. a fresh /dev/shm: each rank told the directory to bind ($(grep -c 'is not there where it runs' "$ERR.shm"))" \
    [ "$(grep -c 'is not there where it runs (a container or mount namespace hides it)' "$ERR.shm")" = 2 ] ||
    diag "$ERR.shm"
check "  ... the job's run dir ($bind), with each runtime's option" \
    grep -q "bind /dev/shm/gsrun\.[^/ ]* into it at the same path (podman run -v $bind:$bind, ch-run -b $bind:$bind, apptainer exec -B $bind, srun --container-mounts=$bind:$bind (Pyxis), enroot start -m $bind:$bind)" "$ERR.shm"
check "  ... none served, the job's status its own ($(rc_of shm)): $(served shm)" \
    eval "[ $(rc_of shm) = 0 ] && grep -q 'served 0 of 2 ranks as MPS clients; 2 ran on the GPU without MPS' '$ERR.shm'"
check_clean "2-4."

# --- the uid rule: a rank that runs as another user --------------------------
# (a container that maps its root to another host uid does the same.)
if getent passwd nobody >/dev/null; then
    NOTMP=1 job uid $SHM_CTX -np 2 setpriv --reuid=65534 --regid=65534 --clear-groups "$CT" --sleep 2500
    check "4b. a rank run as another user: each told why it cannot attach ($(grep -c 'runs as uid 65534' "$ERR.uid"))" \
        [ "$(grep -c "without MPS: it runs as uid 65534, not as uid $me, whose MPS servers serve the job; MPS takes clients of its own user only" "$ERR.uid")" = 2 ] ||
        diag "$ERR.uid"
else
    ok "4b. # SKIP no user nobody"
fi

# --- 5-6. Charliecloud -------------------------------------------------------
# A directory image: the program and the fake libcuda.so.1 at their paths
# here (the program finds it beside its folder), their libraries, and what
# ch-run binds onto.
IMG=/dev/shm/img
image() { # the libraries at their paths here (the program is seen in the host's /dev/shm: ch-run binds /dev)
    local f l
    mkdir -p "$IMG"/{bin,dev,proc,sys,tmp,home,mnt,run,etc}
    touch "$IMG"/etc/{passwd,group,hosts,resolv.conf}
    for f in "$CT" /dev/shm/gsct/fake/cuda/libcuda.so.1 /bin/sh; do
        for l in "$f" $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*'); do
            mkdir -p "$IMG$(dirname "$l")"
            cp -L "$l" "$IMG$l"
        done
    done
    chmod -R a+rX "$IMG"
}
ch_why=
if ! command -v ch-run >/dev/null; then
    ch_why="ch-run is not installed (Debian: charliecloud-runtime)"
elif ! image 2>"$ERR.img"; then
    ch_why="the image could not be made: $(head -1 "$ERR.img")"
elif ! USER=$(id -un) ch-run "$IMG" -- /bin/sh -c true 2>"$ERR.img"; then
    ch_why="ch-run cannot start a container here: $(head -1 "$ERR.img")"
fi
if [ -n "$ch_why" ]; then
    ok "5-6. # SKIP $ch_why"
else
    NOTMP=1 job ch $SHM_CTX -np 2 ch-run "$IMG" -- "$CT" --sleep 1500
    check "5. ch-run as root: both MPS clients ($(clients ch)), status $(rc_of ch): $(served ch)" \
        eval "[ $(clients ch) = 2 -a $(rc_of ch) = 0 ] && grep -q 'served 2 of 2 ranks as MPS clients' '$ERR.ch'" ||
        diag "$OUT.ch" "$ERR.ch"
    # With a TMPDIR, ch-run binds it at the guest's /tmp: gsrun's path is not
    # there inside, and the rank is told the bind as ch-run takes it.
    job cht $SHM_CTX -np 2 ch-run "$IMG" -- "$CT" --sleep 2500
    check "  ... with a TMPDIR ch-run moves: told as Charliecloud's ($(grep -o -m1 '(ch-run -b [^)]*)' "$ERR.cht"))" \
        grep -q "(its Charliecloud container hides it): bind $TMPDIR/gsrun\.[^ ]* into it at the same path (ch-run -b $TMPDIR/gsrun\." "$ERR.cht" ||
        diag "$ERR.cht"
    # The rank prefix in front of the runtime, under any launcher.
    env -u TMPDIR USER="$(id -un)" LD_LIBRARY_PATH="$FAKE_LIB" FAKE_NVML_GPUS=1 FAKE_NVML_CTX_DIR=$SHM_CTX \
        GSRUN_MPS_CONTROL="$FAKE_CONTROL" mpirun -np 2 "$GSRUN" exec -- ch-run "$IMG" -- "$CT" --sleep 1500 \
        >"$OUT.chx" 2>"$ERR.chx"
    rc=$?
    check "  ... mpirun -np 2 gsrun exec -- ch-run IMG -- prog: both clients ($(clients chx)), status $rc, in /dev/shm/gsrun-$me ($(pipes chx))" \
        eval "[ $(clients chx) = 2 -a $rc = 0 ] && [ \"\$(grep -c 'pipe=/dev/shm/gsrun-$me/exec-' '$OUT.chx')\" = 2 ]" ||
        diag "$OUT.chx" "$ERR.chx"
    check_clean "5."

    # Another user: nobody's job, nobody's servers, in nobody's own dirs.
    if getent passwd nobody >/dev/null; then
        NB=/dev/shm/nobody
        mkdir -m 700 "$NB" && chown nobody "$NB"
        setpriv --reuid=65534 --regid=65534 --clear-groups env -u TMPDIR USER=nobody HOME="$NB" \
            OMPI_MCA_orte_tmpdir_base="$NB" PRTE_MCA_prte_tmpdir_base="$NB" \
            OMPI_MCA_btl_vader_backing_directory="$NB" OMPI_MCA_btl_sm_backing_directory="$NB" \
            LD_LIBRARY_PATH="$FAKE_LIB" FAKE_NVML_GPUS=1 FAKE_NVML_CTX_DIR=$SHM_CTX \
            "$GSRUN" --mps-control="$FAKE_CONTROL" -v -np 2 ch-run "$IMG" -- "$CT" --sleep 1500 \
            >"$OUT.nb" 2>"$ERR.nb"
        rc=$?
        check "6. ch-run as nobody: both MPS clients ($(clients nb)) as uid 65534, status $rc: $(served nb)" \
            eval "[ $(clients nb) = 2 -a $rc = 0 ] && [ \"\$(grep -c 'uid=65534 pipe=/dev/shm/gsrun\.' '$OUT.nb')\" = 2 ]" ||
            diag "$OUT.nb" "$ERR.nb"
        rm -rf "$NB"
    else
        ok "6. # SKIP no user nobody"
    fi
fi

# --- 7. podman ---------------------------------------------------------------
if ! command -v podman >/dev/null; then
    ok "7. # SKIP podman is not installed"
elif ! podman run --rm --rootfs "$IMG" /bin/sh -c true >/dev/null 2>"$ERR.pm"; then
    ok "7. # SKIP podman cannot start a container here: $(grep -m1 . "$ERR.pm")"
else
    NOTMP=1 job pm "$TEST_TMP/ctx" -np 1 podman run --rm --rootfs "$IMG" --env-host \
        -v "$TEST_TMP/ctx:$TEST_TMP/ctx" "$CT" --sleep 3000
    check "7. podman run --rootfs: told the bind as podman takes it" \
        grep -q "its podman container hides it): bind /dev/shm/gsrun\.[^ ]* into it at the same path (podman run -v " "$ERR.pm" ||
        diag "$OUT.pm" "$ERR.pm"
fi
check_clean "5-7."
check "nothing left in /dev/shm but the test's own" [ -z "$(shm_left)" ] || shm_left | diag
finish
