# tests/cli: `mpirun -np 2 modattn index --mpi` and `search --mpi` against the plain commands
# (cli/cmd_mpi.c, cli/cmd_mpi_search.c), when the CLI is built with MPI (cmake/mpi.cmake). Without
# mpirun it is a failing test (not an absent one). Under the sanitizers mpi_asan runs the two
# commands on two ranks (Open MPI's own allocations outlive MPI_Finalize by design: suppressed by
# library name in lsan_openmpi.supp, so that a leak of ours is still reported).
if(MODATTN_HAVE_MPI AND MODATTN_MPIEXEC AND NOT MODATTN_SANITIZE)
  add_test(NAME mpi_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpi_cli.sh $<TARGET_FILE:modattn_cli>
           ${CMAKE_SOURCE_DIR}/.models/all-MiniLM-L6-v2 ${MODATTN_MPIEXEC}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mpi_cli PROPERTIES TIMEOUT 600)
  # index --mpi takes index's options with index's messages (one reader), --ann included
  add_test(NAME mpi_options COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpi_options.sh $<TARGET_FILE:modattn_cli>
           ${CMAKE_SOURCE_DIR}/.models/all-MiniLM-L6-v2 ${MODATTN_MPIEXEC}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mpi_options PROPERTIES TIMEOUT 600)
elseif(MODATTN_HAVE_MPI AND MODATTN_MPIEXEC AND MODATTN_SANITIZE)
  # under ASan+UBSan: index --mpi and search --mpi on two ranks against the plain commands (a short
  # corpus); Open MPI's own leaks suppressed by library name, ours still reported
  add_test(NAME mpi_asan COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpi_asan.sh $<TARGET_FILE:modattn_cli>
           ${CMAKE_SOURCE_DIR}/.models/all-MiniLM-L6-v2 ${MODATTN_MPIEXEC}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mpi_asan PROPERTIES TIMEOUT 900
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0;LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan_openmpi.supp")
  # (fast_unwind_on_malloc=0: Open MPI's components are built without frame pointers, so the fast
  # unwinder stops in them and their leaks could not be matched to libmpi; DWARF unwinding can)
elseif(MODATTN_HAVE_MPI AND MODATTN_SANITIZE)
  add_test(NAME mpi_asan COMMAND sh -c "echo 'FAIL: the CLI is built with MPI, but no mpirun or mpiexec was found to run mpi_asan (Debian: apt-get install openmpi-bin; make deps), then configure again'; exit 1")
elseif(MODATTN_HAVE_MPI)
  # the CLI is built with MPI but nothing can run it: a failure, not a missing test
  add_test(NAME mpi_cli COMMAND sh -c "echo 'FAIL: the CLI is built with MPI, but no mpirun or mpiexec was found to run mpi_cli (Debian: apt-get install openmpi-bin; make deps), then configure again'; exit 1")
endif()
# without MPI: --mpi says how to get it (tests/cli/mpi_absent.sh)
if(NOT MODATTN_HAVE_MPI)
  add_test(NAME mpi_absent COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpi_absent.sh $<TARGET_FILE:modattn_cli>
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# ctest labels (docs/ARCHITECTURE.md; modattn_test adds unit)
modattn_label(cli mpi_cli mpi_asan mpi_absent mpi_options)
modattn_label(slow mpi_cli mpi_asan mpi_options)
modattn_label(sanitizer-only mpi_asan)
