# SPDX-License-Identifier: BSD-3-Clause
# GS_CHECK_HWLOC: --with-hwloc[=DIR]. Without hwloc the MPS daemons are not pinned.
AC_DEFUN([GS_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--with-hwloc@<:@=DIR@:>@], [hwloc to pin each MPS daemon near its GPU (default: if found)])],
    [], [with_hwloc=check])
  gs_have_hwloc=no
  HWLOC_CFLAGS=""; HWLOC_LIBS=""
  AS_CASE(["$with_hwloc"],
    [no], [],
    [yes|check], [PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [gs_have_hwloc=yes], [
        gs_save_LIBS=$LIBS
        AC_CHECK_HEADER([hwloc.h], [AC_CHECK_LIB([hwloc], [hwloc_topology_init],
          [gs_have_hwloc=yes; HWLOC_LIBS=-lhwloc])])
        LIBS=$gs_save_LIBS])],
    [
      gs_save_CPPFLAGS=$CPPFLAGS; gs_save_LDFLAGS=$LDFLAGS
      CPPFLAGS="$CPPFLAGS -I$with_hwloc/include"
      for gs_libdir in lib64 lib; do
        AS_IF([test -d "$with_hwloc/$gs_libdir"], [break])
      done
      LDFLAGS="$LDFLAGS -L$with_hwloc/$gs_libdir"
      AC_CHECK_HEADER([hwloc.h], [AC_CHECK_LIB([hwloc], [hwloc_topology_init], [
        gs_have_hwloc=yes
        HWLOC_CFLAGS="-I$with_hwloc/include"
        HWLOC_LIBS="-L$with_hwloc/$gs_libdir -Wl,-rpath,$with_hwloc/$gs_libdir -lhwloc"])])
      CPPFLAGS=$gs_save_CPPFLAGS; LDFLAGS=$gs_save_LDFLAGS])
  AS_IF([test "$gs_have_hwloc" = no && test "$with_hwloc" != no && test "$with_hwloc" != check],
    [AC_MSG_ERROR([--with-hwloc was given but hwloc >= 2 was not found there; install libhwloc-dev or fix the path])])
  AS_IF([test "$gs_have_hwloc" = yes], [AC_DEFINE([GS_HAVE_HWLOC], [1], [Define if hwloc is available])])
  AC_SUBST([HWLOC_CFLAGS])
  AC_SUBST([HWLOC_LIBS])
])
