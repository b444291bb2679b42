# SPDX-License-Identifier: BSD-3-Clause
# GS_CHECK_MPI: MPI is needed only for the test programs and examples (gsrun
# itself runs mpirun, it does not link MPI). MPICC may be given.
AC_DEFUN([GS_CHECK_MPI], [
  AC_ARG_VAR([MPICC], [MPI C compiler wrapper, for the tests and examples])
  AC_PATH_PROGS([MPICC], [mpicc], [])
  AC_PATH_PROGS([MPIRUN], [mpirun], [])
  gs_have_mpi=no
  MPI_CFLAGS=""; MPI_LIBS=""
  AS_IF([test -n "$MPICC"], [
    MPI_CFLAGS=$($MPICC --showme:compile 2>/dev/null)
    MPI_LIBS=$($MPICC --showme:link 2>/dev/null)
    AS_IF([test -n "$MPI_LIBS"], [gs_have_mpi=yes])])
  AM_CONDITIONAL([GS_HAVE_MPI], [test "$gs_have_mpi" = yes])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
])
