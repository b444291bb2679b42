# SPDX-License-Identifier: BSD-3-Clause
# Spack recipe for gsrun. To use it, put it in a Spack package repository of
# your own as packages/gsrun/package.py (`spack repo create`, `spack repo add`)
# and give the release tarball's checksum (`spack checksum gsrun 0.1.0`, or a
# local mirror). tests/packaging/spack.sh checks that every configure option
# used here exists in configure --help, and that every gsrun option of
# configure is mapped or listed below as left at its default.

from spack.package import *


class Gsrun(AutotoolsPackage):
    """Automatic NVIDIA MPS (Multi-Process Service) for MPI jobs: one MPS
    control daemon per node and GPU, started when the job starts and quit
    when it ends, with each rank's share of the GPU. Front ends: the gsrun
    command, an Open MPI 4 component for plain mpirun, a Slurm SPANK plugin."""

    url = "gsrun-0.1.0.tar.gz"

    license("BSD-3-Clause")

    version("0.1.0")

    variant("openmpi", default=False,
            description="Open MPI 4 component mca_rtc_gsrun (plain mpirun, no wrapper)")
    variant("slurm", default=False, description="Slurm SPANK plugin gsrun_spank.so (srun --mps)")
    variant("hwloc", default=True, description="pin each MPS daemon near its GPU (hwloc)")
    variant("pmix", default=True, description="node-local rank discovery through PMIx")
    variant("cuda", default=False, description="build the CUDA examples (mps_probe, jacobi)")
    variant("root_rundir", default="/run/gsrun", values=str,
            description="base of the run dirs root makes for batch jobs and Slurm steps")

    depends_on("c", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("cmocka", type="test")
    # The component uses ORTE's internal headers: Open MPI 4 only, and the
    # Open MPI it is loaded into.
    depends_on("openmpi@4", when="+openmpi")
    depends_on("slurm", when="+slurm")
    depends_on("hwloc@2:", when="+hwloc")
    depends_on("pmix", when="+pmix")
    depends_on("cuda", when="+cuda")
    depends_on("mpi", when="+cuda")
    conflicts("platform=darwin", msg="gsrun needs Linux (pidfds, inotify, signalfd)")

    # configure options left at their defaults: --with-slurm-plugindir
    # (LIBDIR/gsrun/slurm; plugstack.conf names the installed path).

    # Each variant: the configure option that turns it on (with the dependency's
    # prefix) and the one that turns it off.
    _switches = (
        ("openmpi", "openmpi", "--with-ompi=", "--without-ompi"),
        ("slurm", "slurm", "--with-slurm=", "--without-slurm"),
        ("hwloc", "hwloc", "--with-hwloc=", "--without-hwloc"),
        ("pmix", "pmix", "--with-pmix=", "--without-pmix"),
        ("cuda", "cuda", "--with-cuda=", "--without-cuda"),
    )

    def configure_args(self):
        spec = self.spec
        args = ["--with-root-rundir=" + spec.variants["root_rundir"].value]
        for variant, dep, on, off in self._switches:
            if spec.satisfies("+" + variant):
                args.append(on + spec[dep].prefix)
            else:
                args.append(off)
        return args

    def check(self):
        # The unit tests; the integration tests need an MPI launcher.
        make("check-unit")

    def setup_run_environment(self, env):
        # As the Lmod module does: plain mpirun of Open MPI 4 loads the component.
        if self.spec.satisfies("+openmpi"):
            env.append_path("OMPI_MCA_mca_base_component_path", "SYS_DEFAULT")
            env.append_path("OMPI_MCA_mca_base_component_path",
                            join_path(self.prefix.lib, "gsrun", "openmpi"))
