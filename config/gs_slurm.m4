# SPDX-License-Identifier: BSD-3-Clause
# GS_CHECK_SLURM: --with-slurm[=DIR]. The SPANK plugin gsrun_spank.so is built
# when Slurm's headers (slurm/spank.h) are found: Debian's libslurm-dev, or DIR
# (a Slurm installation's prefix, its headers in DIR/include). It uses only the
# SPANK API, which slurmstepd provides when it loads the plugin: nothing is
# linked from Slurm.
AC_DEFUN([GS_CHECK_SLURM], [
  AC_ARG_WITH([slurm],
    [AS_HELP_STRING([--with-slurm@<:@=DIR@:>@], [build the Slurm SPANK plugin gsrun_spank.so against the Slurm in DIR (default: if its headers are found)])],
    [], [with_slurm=check])
  AC_ARG_WITH([slurm-plugindir],
    [AS_HELP_STRING([--with-slurm-plugindir=DIR], [where to install gsrun_spank.so (default: LIBDIR/gsrun/slurm; plugstack.conf names the path)])],
    [], [with_slurm_plugindir='${pkglibdir}/slurm'])
  gs_have_slurm=no
  SLURM_CFLAGS=""
  AS_CASE(["$with_slurm"],
    [no], [],
    [yes|check], [],
    [SLURM_CFLAGS="-I$with_slurm/include"])
  AS_IF([test "$with_slurm" != no], [
    AC_MSG_CHECKING([for Slurm's SPANK header])
    gs_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $SLURM_CFLAGS"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#include <stdint.h>
#include <slurm/spank.h>
]], [[spank_t sp = 0; uint32_t n = 0; (void)spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &n); return 0;]])],
      [gs_have_slurm=yes], [gs_have_slurm=no])
    CPPFLAGS=$gs_save_CPPFLAGS
    AC_MSG_RESULT([$gs_have_slurm])])
  AS_IF([test "$gs_have_slurm" = no && test "$with_slurm" != no && test "$with_slurm" != check],
    [AC_MSG_ERROR([--with-slurm was given but slurm/spank.h was not found; install libslurm-dev (Debian, Ubuntu) or slurm-devel, or fix the path])])
  AM_CONDITIONAL([GS_HAVE_SLURM], [test "$gs_have_slurm" = yes])
  slurmplugindir=$with_slurm_plugindir
  AC_SUBST([slurmplugindir])
  AC_SUBST([SLURM_CFLAGS])
])
