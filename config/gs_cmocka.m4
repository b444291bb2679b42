# SPDX-License-Identifier: BSD-3-Clause
# GS_CHECK_CMOCKA: the unit tests need cmocka; building gsrun does not.
AC_DEFUN([GS_CHECK_CMOCKA], [
  PKG_CHECK_MODULES([CMOCKA], [cmocka >= 1.0], [gs_have_cmocka=yes], [
    gs_have_cmocka=no
    AC_MSG_WARN([cmocka not found: 'make check' will skip the unit tests (install libcmocka-dev)])])
  AM_CONDITIONAL([GS_HAVE_CMOCKA], [test "$gs_have_cmocka" = yes])
])
