# SPDX-License-Identifier: BSD-3-Clause
# GS_CHECK_OMPI: --with-ompi[=DIR]. The Open MPI 4.x (ORTE) run-time control
# component mca_rtc_gsrun is built when ORTE's development headers are found:
# Debian's and Ubuntu's libopenmpi-dev have them (pkg-config orte); an Open MPI
# built from source has them only with --with-devel-headers. DIR is that
# installation's prefix.
AC_DEFUN([GS_CHECK_OMPI], [
  AC_ARG_WITH([ompi],
    [AS_HELP_STRING([--with-ompi@<:@=DIR@:>@], [build the Open MPI 4 component mca_rtc_gsrun against the Open MPI in DIR (default: if its headers are found)])],
    [], [with_ompi=check])
  gs_have_ompi_rtc=no
  OMPI_RTC_CFLAGS=""; OMPI_RTC_LIBS=""
  AS_CASE(["$with_ompi"],
    [no], [],
    [yes|check], [PKG_CHECK_EXISTS([orte], [
        OMPI_RTC_CFLAGS=$($PKG_CONFIG --cflags orte)
        OMPI_RTC_LIBS="$($PKG_CONFIG --libs orte) -lopen-pal"])],
    [
      for gs_libdir in lib64 lib; do
        AS_IF([test -d "$with_ompi/$gs_libdir"], [break])
      done
      OMPI_RTC_CFLAGS="-I$with_ompi/include -I$with_ompi/include/openmpi"
      OMPI_RTC_LIBS="-L$with_ompi/$gs_libdir -lopen-rte -lopen-pal"])
  AS_IF([test -n "$OMPI_RTC_CFLAGS"], [
    AC_MSG_CHECKING([for ORTE's rtc framework headers])
    gs_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $OMPI_RTC_CFLAGS"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#include "orte_config.h"
#include "orte/mca/rtc/rtc.h"
#include "orte/runtime/orte_globals.h"
]], [[orte_rtc_base_module_t m; orte_job_t *j = 0; (void)m; return j ? (int)j->num_local_procs : 0;]])],
      [gs_have_ompi_rtc=yes], [gs_have_ompi_rtc=no])
    CPPFLAGS=$gs_save_CPPFLAGS
    AC_MSG_RESULT([$gs_have_ompi_rtc])])
  AS_IF([test "$gs_have_ompi_rtc" = no && test "$with_ompi" != no && test "$with_ompi" != check],
    [AC_MSG_ERROR([--with-ompi was given but ORTE's headers (orte/mca/rtc/rtc.h) were not found; install libopenmpi-dev, or an Open MPI 4 built with --with-devel-headers, or fix the path])])
  AS_IF([test "$gs_have_ompi_rtc" = no], [OMPI_RTC_CFLAGS=""; OMPI_RTC_LIBS=""])
  AM_CONDITIONAL([GS_HAVE_OMPI_RTC], [test "$gs_have_ompi_rtc" = yes])
  AC_SUBST([OMPI_RTC_CFLAGS])
  AC_SUBST([OMPI_RTC_LIBS])
])
