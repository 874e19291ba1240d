#!/usr/bin/env bash
# tests/cli/mpi_absent.sh MODATTN — a build without MPI: `index --mpi` and `search --mpi` fail
# (exit 1) saying how to install MPI and rebuild, and nothing else changes.
set -u
BIN=$1
. "$(dirname "$0")/../pipeline/harness.sh"
for cmd in index search; do
  out=$("$BIN" "$cmd" --mpi x 2>&1); rc=$?
  check "$cmd --mpi without MPI: exit 1 (got $rc)" test "$rc" -eq 1
  check "$cmd --mpi without MPI says how to install it: $out" grep -q "apt-get install libopenmpi-dev openmpi-bin" <<< "$out"
  check "$cmd --mpi without MPI says to rebuild and how to run it" grep -q "mpirun -np 2 modattn $cmd --mpi" <<< "$out"
done
check "--help without MPI still lists --mpi" grep -q -- "--mpi" <<< "$("$BIN" index --help)"
finish mpi_absent
