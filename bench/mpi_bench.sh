#!/usr/bin/env bash
# bench/mpi_bench.sh [MODATTN] [CORPUS] — `modattn index` throughput on one process against
# `mpirun -np 2 modattn index --mpi`, each from an empty store, median of 3 runs (wall time of the
# whole command: start-up, model load, plan, embedding, writing, vector file), and what linking
# MPI costs a command that does not use it (`modattn --version`, 20 times).
#   1 rank x T threads:  modattn --threads T index ...             (T = 1 and 2)
#   2 ranks x 1 thread:  mpirun -np 2 modattn --threads 1 index --mpi ...
# Prints a Markdown table (bench/results/mpi.md holds one). MODATTN_NOMPI=path to a build
# without MPI (-DMODATTN_MPI=OFF) adds the start-up comparison.
set -euo pipefail
BIN=${1:-build/modattn}
CORPUS=${2:-demo/corpus}
MODEL=${MODATTN_MODEL:-.models/all-MiniLM-L6-v2}
MPIRUN=${MPIRUN:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader,tcp
T=$(mktemp -d /tmp/modattn-mpi-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# run NAME CMD...: 3 runs from an empty store, the median seconds and tokens/s
run() {
  local name=$1; shift
  local secs=() tokens=0
  for i in 1 2 3; do
    rm -f "$T"/s.db*
    local t0 t1
    t0=$(date +%s.%N)
    "$@" --db "$T/s.db" "$CORPUS" > "$T/out.json"
    t1=$(date +%s.%N)
    secs+=("$(echo "$t1 - $t0" | bc -l)")
    tokens=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_embedded'])" "$T/out.json")
  done
  local med
  med=$(printf '%s\n' "${secs[@]}" | median)
  printf '| %s | %s | %.2f | %.0f |\n' "$name" "$(printf '%.2f ' "${secs[@]}")" "$med" "$(echo "$tokens / $med" | bc -l)"
}

echo "corpus: $CORPUS ($(find "$CORPUS" -type f | wc -l) files, $(du -sb "$CORPUS" | cut -f1) bytes); $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo
echo "| run | seconds (3 runs) | median s | tokens/s (median) |"
echo "|---|---|---|---|"
run "1 rank x 1 thread" "$BIN" --threads 1 index --json --quiet --model "$MODEL"
run "1 rank x 2 threads" "$BIN" --threads 2 index --json --quiet --model "$MODEL"
run "2 ranks x 1 thread (mpirun --bind-to none)" "$MPIRUN" --oversubscribe --bind-to none -np 2 "$BIN" --threads 1 index --mpi --json --quiet --model "$MODEL"
run "2 ranks x 1 thread (mpirun, bound to a core each)" "$MPIRUN" -np 2 "$BIN" --threads 1 index --mpi --json --quiet --model "$MODEL"

# start-up: what linking libmpi costs a command that never calls MPI_Init
startup() {
  local b=$1 t0 t1
  "$b" --version > /dev/null
  t0=$(date +%s.%N)
  for i in $(seq 20); do "$b" --version > /dev/null; done
  t1=$(date +%s.%N)
  echo "($t1 - $t0) * 1000 / 20" | bc -l
}
echo
printf '`modattn --version`, mean of 20: with MPI linked %.1f ms' "$(startup "$BIN")"
if [ -n "${MODATTN_NOMPI:-}" ]; then printf ', without MPI %.1f ms' "$(startup "$MODATTN_NOMPI")"; fi
echo
