#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The .debs as a site installs them: a fresh Debian 12 root (debootstrap,
# the machine's own archive and suites), `apt-get install` of the three
# packages (apt pulls in only what they declare), then a 4-rank gsrun job
# (no GPU: it says so and runs), the exit status of a failing job, `gsrun
# status`, plain mpirun with the component once its snippet is enabled, the
# same through `module load gsrun`, and `apt-get purge`, after which no file
# of the packages is left. Commands run in a mount and PID namespace of their
# own (private /tmp and /run, /proc, /dev, /sys); the root is removed by
# check.sh with the work dir.
#   tests/packaging/root.sh WORKDIR VERSION
. "$(dirname "$0")/lib.sh"
W=$1 V=$2
arch=$(dpkg --print-architecture)
R=$W/root
debs="$W/deb/gsrun_$V-1_$arch.deb $W/deb/gsrun-openmpi_$V-1_$arch.deb $W/deb/gsrun-slurm_$V-1_$arch.deb"
[ "$(id -u)" = 0 ] || { skip "installing the .debs in a Debian 12 root" "needs root (debootstrap, chroot)"; exit 0; }
command -v debootstrap >/dev/null || { skip "installing the .debs in a Debian 12 root" "needs debootstrap"; exit 0; }
for d in $debs; do [ -f "$d" ] || { skip "installing the .debs in a Debian 12 root" "${d##*/} was not built"; exit 0; }; done
. /etc/os-release
. "$(dirname "$0")/../debian_archive.sh"
mirror=${mirror:-$(debian_archive)}
[ -n "$mirror" ] || { skip "installing the .debs in a Debian 12 root" "$DEBIAN_ARCHIVE_NONE"; exit 0; }
t0=$(date +%s)
debootstrap --variant=minbase bookworm "$R" "$mirror" >"$W/debootstrap.log" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "Failed getting release file" "$W/debootstrap.log"; then
    skip "installing the .debs in a Debian 12 root" "the Debian archive $mirror cannot be reached"
    exit 0
fi
check "debootstrap of a minimal Debian 12 root ($(($(date +%s) - t0)) s)" test $rc = 0 ||
    { tail -20 "$W/debootstrap.log" | diag; exit 0; }
chmod 755 "$R"
# The same suites as this machine (its security and updates suites too: the
# packages were built against their libraries). Services are never started.
rm -f "$R/etc/apt/sources.list"
cp /etc/apt/sources.list.d/*.sources "$R/etc/apt/sources.list.d/" 2>/dev/null
[ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$R/etc/apt/"
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
chmod 755 "$R/usr/sbin/policy-rc.d"
mkdir -p "$R/debs"
cp $debs "$R/debs/"

# in_root 'commands': bash in the root, in namespaces of its own.
in_root() {
    unshare --mount --pid --fork --mount-proc="$R/proc" /bin/bash -c '
        mount -t tmpfs tmpfs "$1/tmp" && mount -t tmpfs tmpfs "$1/run" &&
        mount --rbind /dev "$1/dev" && mount -t sysfs sysfs "$1/sys" || exit 99
        shift_root=$1; shift
        exec chroot "$shift_root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            DEBIAN_FRONTEND=noninteractive OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
            /bin/bash -c "$1"' in_root "$R" "$1"
}

in_root 'dpkg-query -W -f="\${Package}\n" | sort' >"$W/before.pkgs"
t0=$(date +%s)
in_root 'apt-get update -q && apt-get install -y -q /debs/*.deb' >"$W/install.log" 2>&1
rc=$?
check "apt-get install of gsrun, gsrun-openmpi and gsrun-slurm ($(($(date +%s) - t0)) s)" test $rc = 0 ||
    { tail -30 "$W/install.log" | diag; exit 0; }
in_root 'dpkg-query -W -f="\${Package}\n" | sort' >"$W/after.pkgs"
echo "# apt pulled in $(comm -13 "$W/before.pkgs" "$W/after.pkgs" | wc -l) packages, among them:" \
    "$(comm -13 "$W/before.pkgs" "$W/after.pkgs" | grep -E '^(openmpi-bin|libopenmpi|libpmix|libhwloc|slurm)' | tr '\n' ' ')"
check "nothing of gsrun is running after the install (nothing started at install)" \
    eval '! in_root "cat /proc/[0-9]*/comm" | grep -q gsrun'

out=$(in_root 'cd /tmp && gsrun -np 4 hostname; echo "rc=$?"; ls -A /tmp | grep -c gsrun' 2>&1)
echo "$out" | diag
check "a 4-rank job runs: 4 ranks' output, status 0" \
    eval '[ "$(echo "$out" | grep -cx "$(hostname)")" = 4 ] && echo "$out" | grep -qx "rc=0"'
check "without a GPU it says so plainly" eval 'echo "$out" | grep -q "no NVIDIA GPU found"'
check "nothing of the job is left in /tmp" eval '[ "$(echo "$out" | tail -1)" = 0 ]'
out=$(in_root 'cd /tmp && gsrun -np 4 sh -c "exit 3"; echo "rc=$?"' 2>&1)
check "a failing job's status comes through (3)" eval 'echo "$out" | grep -qx "rc=3"' || echo "$out" | diag
out=$(in_root 'gsrun status; echo "rc=$?"' 2>&1)
echo "$out" | diag
check "gsrun status works" eval 'echo "$out" | grep -qx "rc=0"'
out=$(in_root 'gsrun --version' 2>&1)
check "gsrun --version names the packaged features ($(echo "$out" | tail -1))" \
    eval 'echo "$out" | grep -q "Open MPI 4 component: yes; Slurm SPANK plugin: yes"'

# The component: not loaded until enabled; enabled by the snippet's line.
check "ompi_info does not list the component before it is enabled" \
    eval '! in_root "ompi_info" | grep -q "MCA rtc: gsrun"'
# Debian's openmpi-mca-params.conf ends without a newline: the line goes on
# one of its own (appended as is, it would join the file's last setting).
out=$(in_root '{ echo; sed -n "s/^#\(mca_base_component_path.*\)/\1/p" /usr/share/gsrun/gsrun-mca-params.conf; } \
        >>/etc/openmpi/openmpi-mca-params.conf
    ompi_info | grep "MCA rtc"; cd /tmp && mpirun -np 4 --mca rtc_gsrun_verbose 1 hostname; echo "rc=$?"' 2>&1)
echo "$out" | diag
check "with the snippet's line enabled ompi_info lists the component" eval 'echo "$out" | grep -q "MCA rtc: gsrun"'
check "... and plain mpirun runs a 4-rank job through it (the component served 4 ranks)" \
    eval '[ "$(echo "$out" | grep -cx "$(hostname)")" = 4 ] && echo "$out" | grep -qx "rc=0" &&
          echo "$out" | grep -q "gsrun: node .*: served 4 of 4 ranks"'
in_root 'sed -i "/gsrun\/openmpi/d" /etc/openmpi/openmpi-mca-params.conf'

# Lmod: `module load gsrun` turns the component on for the user's jobs.
if in_root 'apt-get install -y -q --no-install-recommends lmod' >"$W/lmod.log" 2>&1; then
    out=$(in_root '. /usr/share/lmod/lmod/init/bash >/dev/null 2>&1
        module use /usr/share/gsrun/modulefiles; module load gsrun
        echo "path=$OMPI_MCA_mca_base_component_path"; ompi_info | grep "MCA rtc"' 2>&1)
    echo "$out" | diag
    check "module load gsrun (packaged): Open MPI's component path has gsrun's, ompi_info lists it" \
        eval 'echo "$out" | grep -q "^path=SYS_DEFAULT:/usr/lib/.*/gsrun/openmpi$" &&
              echo "$out" | grep -q "MCA rtc: gsrun"'
else
    tail -5 "$W/lmod.log" | diag
    check "lmod installs in the root" false
fi

# The plugstack snippet is where Debian's plugstack.conf includes it, commented.
check "/etc/slurm/plugstack.conf.d/gsrun.conf names the installed plugin, commented out" \
    eval 'in_root "cat /etc/slurm/plugstack.conf.d/gsrun.conf" |
          grep -qx "#optional /usr/lib/.*/slurm-wlm/gsrun_spank.so mps=off" &&
          in_root "test -f \$(sed -n \"s/^#optional \([^ ]*\).*/\1/p\" /etc/slurm/plugstack.conf.d/gsrun.conf)"'

# Purge: no file of the packages is left.
for d in $debs; do dpkg-deb -c "$d"; done | awk '{ print $6 }' | sed 's|^\.||; s|/$||' | sort -u >"$W/pkg.paths"
in_root 'apt-get purge -y -q gsrun gsrun-openmpi gsrun-slurm' >"$W/purge.log" 2>&1
check "apt-get purge of the three packages" test $? = 0 || tail -20 "$W/purge.log" | diag
left=""
while read -r p; do
    [ -n "$p" ] || continue
    if [ -d "$R$p" ] && [ ! -L "$R$p" ]; then
        # A directory is ours when nothing but gsrun put it there.
        case $p in *gsrun*) left="$left $p" ;; esac
    elif [ -e "$R$p" ] || [ -L "$R$p" ]; then
        left="$left $p"
    fi
done <"$W/pkg.paths"
check "after the purge no file of the packages is left ($(wc -l <"$W/pkg.paths") paths checked)${left:+:$left}" \
    test -z "$left"
check "dpkg knows none of them any more" eval '! in_root "dpkg -l gsrun gsrun-openmpi gsrun-slurm 2>/dev/null" | grep -q "^[a-z]i"'
