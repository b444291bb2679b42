# SPDX-License-Identifier: BSD-3-Clause
# GS_CHECK_CUDA: --with-cuda[=DIR] locates nvcc for the examples only. gsrun
# never links CUDA: it loads the driver's NVML at run time.
AC_DEFUN([GS_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit for building the examples (default: if nvcc is found)])],
    [], [with_cuda=check])
  AC_ARG_VAR([NVCC], [CUDA compiler for the examples])
  gs_have_nvcc=no
  AS_CASE(["$with_cuda"],
    [no], [NVCC=""],
    [yes|check], [AC_PATH_PROG([NVCC], [nvcc], [], [$PATH:/usr/local/cuda/bin])],
    [AC_PATH_PROG([NVCC], [nvcc], [], [$with_cuda/bin])])
  AS_IF([test -n "$NVCC" && test "$gs_have_mpi" = yes], [gs_have_nvcc=yes])
  AS_IF([test "$gs_have_nvcc" = no && test "$with_cuda" != no && test "$with_cuda" != check],
    [AC_MSG_ERROR([--with-cuda was given but nvcc (and mpicc) was not found; fix the path or install the CUDA toolkit])])
  AM_CONDITIONAL([GS_HAVE_NVCC], [test "$gs_have_nvcc" = yes])
])
