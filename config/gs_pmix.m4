# SPDX-License-Identifier: BSD-3-Clause
# GS_CHECK_PMIX: --with-pmix[=DIR]. Default: use PMIx if pkg-config or the
# system finds it; without it the shim falls back to the launcher's variables.
# Asked for explicitly and not found: configure stops.
AC_DEFUN([GS_CHECK_PMIX], [
  AC_ARG_WITH([pmix],
    [AS_HELP_STRING([--with-pmix@<:@=DIR@:>@], [PMIx for node-local rank discovery (default: if found)])],
    [], [with_pmix=check])
  gs_have_pmix=no
  gs_pmix_summary=""
  # PMIX_CFLAGS and PMIX_LIBS given to configure are used as given (as
  # PKG_CHECK_MODULES does): a package build drops pmix.pc's rpath that way.
  AS_CASE(["$with_pmix"],
    [no], [],
    [yes|check], [
      PKG_CHECK_MODULES([PMIX], [pmix], [gs_have_pmix=yes], [
        gs_save_LIBS=$LIBS
        AC_CHECK_HEADER([pmix.h], [AC_CHECK_LIB([pmix], [PMIx_Init],
          [gs_have_pmix=yes; PMIX_LIBS=-lpmix])])
        LIBS=$gs_save_LIBS])],
    [
      gs_save_CPPFLAGS=$CPPFLAGS; gs_save_LDFLAGS=$LDFLAGS
      CPPFLAGS="$CPPFLAGS -I$with_pmix/include"
      for gs_libdir in lib64 lib; do
        AS_IF([test -d "$with_pmix/$gs_libdir"], [break])
      done
      LDFLAGS="$LDFLAGS -L$with_pmix/$gs_libdir"
      AC_CHECK_HEADER([pmix.h], [AC_CHECK_LIB([pmix], [PMIx_Init], [
        gs_have_pmix=yes
        PMIX_CFLAGS="-I$with_pmix/include"
        PMIX_LIBS="-L$with_pmix/$gs_libdir -Wl,-rpath,$with_pmix/$gs_libdir -lpmix"])])
      CPPFLAGS=$gs_save_CPPFLAGS; LDFLAGS=$gs_save_LDFLAGS])
  AS_IF([test "$gs_have_pmix" = no && test "$with_pmix" != no && test "$with_pmix" != check],
    [AC_MSG_ERROR([--with-pmix was given but PMIx (pmix.h, libpmix) was not found there; install libpmix-dev or fix the path])])
  AS_IF([test "$gs_have_pmix" = no && test "$with_pmix" = check],
    [AC_MSG_WARN([PMIx not found: gsrun-shim will discover ranks from launcher variables only])])
  AS_IF([test "$gs_have_pmix" = no], [PMIX_CFLAGS=""; PMIX_LIBS=""])
  AS_IF([test "$gs_have_pmix" = yes], [
    AC_DEFINE([GS_HAVE_PMIX], [1], [Define if PMIx is available])
    gs_pmix_summary="($($PKG_CONFIG --modversion pmix 2>/dev/null))"])
  AM_CONDITIONAL([GS_HAVE_PMIX], [test "$gs_have_pmix" = yes])
  AC_SUBST([PMIX_CFLAGS])
  AC_SUBST([PMIX_LIBS])
])
