# cmake/mpi.cmake — MPI for `modattn index --mpi` and `modattn search --mpi` (cli/cmd_mpi.c).
# AUTO (the default) uses MPI when find_package finds it (Debian: libopenmpi-dev openmpi-bin);
# without it the CLI still builds, and `--mpi` says how to install MPI and rebuild. Only the
# `modattn` program links MPI: the library never does (MPI_Init runs only behind --mpi).
set(MODATTN_MPI AUTO CACHE STRING "MPI scale-out of index/search (--mpi): AUTO, ON (required) or OFF")
set_property(CACHE MODATTN_MPI PROPERTY STRINGS AUTO ON OFF)
set(MODATTN_HAVE_MPI OFF CACHE INTERNAL "the modattn CLI is built with MPI")
if(NOT MODATTN_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(MODATTN_HAVE_MPI ON CACHE INTERNAL "the modattn CLI is built with MPI")
    find_program(MODATTN_MPIEXEC NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
  elseif(MODATTN_MPI STREQUAL "ON")
    message(FATAL_ERROR "MODATTN_MPI=ON but no MPI for C was found: apt-get install libopenmpi-dev openmpi-bin")
  endif()
endif()
message(STATUS "MPI (index/search --mpi): ${MODATTN_HAVE_MPI}")
