#!/usr/bin/env bash
# tests/cli/mpi_options.sh MODATTN MODEL_DIR MPIRUN — `index --mpi` reads its options as `index`
# does (one reader, cli/cli_index_args.c) and finishes as it does (cli/cmd_index.c,
# cli/cli_index_out.c):
#   - every usage error says the same, once (rank 0), with the same exit status;
#   - --ann KIND (which the MPI form once lacked) builds the same ANN index and reports it;
#   - with no PATH it refreshes the folders the store was indexed from, as index does;
#   - search --mpi says a bad number once.
set -u
BIN=$1
MODEL=$2
MPIRUN=$3
. "$(dirname "$0")/../pipeline/harness.sh"
need_model "$MODEL" mpi_options
scratch mpi-options
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_base_warn_component_unused=0
MPI=("$MPIRUN" --oversubscribe --bind-to none -np 2)
C=$T/c
mkdir -p "$C"
printf 'The cat sat on the mat and looked at the rain.\n' > "$C/a.txt"
printf 'Honey bees make honey from the nectar of flowers.\n' > "$C/b.md"
printf 'A write-ahead log keeps a database consistent after a crash.\n' > "$C/c.txt"

# ---- usage errors: what modattn says (mpirun adds its own lines: only ours are compared)
ours() { grep -E '^(modattn: |usage: modattn index)' "$1"; }
same_error() {
  local d=$1; shift
  "$BIN" index "$@" > /dev/null 2> "$T/p.err"; local prc=$?
  "${MPI[@]}" "$BIN" index --mpi "$@" > /dev/null 2> "$T/m.err"; local mrc=$?
  check "index --mpi $d: exit $mrc as index's $prc" test "$prc" -eq 2 -a "$mrc" -eq "$prc"
  check "index --mpi $d: the same message, once: $(ours "$T/m.err" | head -3)" cmp <(ours "$T/p.err") <(ours "$T/m.err")
}
same_error "--chunk-tokens x" --chunk-tokens x "$C"
same_error "--overlap -1" --overlap -1 "$C"
same_error "--batch 0" --batch 0 "$C"
same_error "--wait abc" --wait abc "$C"
same_error "--file-timeout -1" --file-timeout -1 "$C"
same_error "--ann nonsense" --ann nonsense "$C"
same_error "--ann-params without --ann" --ann-params M=8 "$C"
same_error "--max-file-size 0" --max-file-size 0 "$C"
same_error "an unknown option" --bogus "$C"
same_error "--db without a value" "$C" --db
same_error "no PATH and a store that records none" --db "$T/none.db"
check "no PATH: the usage is shown once" test "$(grep -c '^usage: modattn index' "$T/m.err")" -eq 1

# ---- --ann on two ranks: the same index as index --ann builds, reported the same
"$BIN" --threads 1 index --json --ann f16 --model "$MODEL" --db "$T/p.db" "$C" > "$T/p.json" 2> "$T/p.err" \
  || bad "index --ann f16: $(cat "$T/p.err")"
"${MPI[@]}" "$BIN" --threads 1 index --mpi --json --ann f16 --model "$MODEL" --db "$T/m.db" "$C" > "$T/m.json" 2> "$T/m.err" \
  || bad "index --mpi --ann f16: $(cat "$T/m.err")"
check "index --mpi --ann f16: the ANN index reported as index reports it: $(head -c 500 "$T/m.json")" python3 - "$T/p.json" "$T/m.json" <<'PY'
import json, sys
p, m = (json.load(open(f)) for f in sys.argv[1:3])
assert m["ranks"] == 2 and "ranks" not in p, m
for k in ("files_seen", "files_indexed", "chunks_embedded", "vector_file"):
    assert p[k] == m[k], (k, p[k], m[k])
pa, ma = dict(p["ann"]), dict(m["ann"])
pa.pop("seconds"); ma.pop("seconds")
assert pa == ma and pa["kind"] == "f16" and pa["action"] == "built", (pa, ma)
PY
check "index --mpi --ann f16: the ANN file is there" test -s "$T/m.db.ann"
"${MPI[@]}" "$BIN" --threads 1 index --mpi --model "$MODEL" --db "$T/m.db" "$C" > "$T/m.txt" 2> "$T/m.err" \
  || bad "index --mpi (text): $(cat "$T/m.err")"
check "index --mpi (text): the summary and the ANN line: $(cat "$T/m.txt")" \
  grep -q "^ANN index f16.*: current, 3 rows" "$T/m.txt"
check "index --mpi (text): on 2 ranks" grep -q " on 2 ranks$" "$T/m.txt"

# ---- no PATH: the folders the store was indexed from, refreshed (as index does)
"${MPI[@]}" "$BIN" --threads 1 index --mpi --json --model "$MODEL" --db "$T/m.db" > "$T/r.json" 2> "$T/r.err" \
  || bad "index --mpi with no PATH: $(cat "$T/r.err")"
check "index --mpi with no PATH: the recorded folder again, unchanged: $(head -c 300 "$T/r.json")" python3 - "$T/r.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["files_seen"] == 3 and j["files_unchanged"] == 3 and j["files_indexed"] == 0, j
PY
"${MPI[@]}" "$BIN" --threads 1 index --mpi --model "$MODEL" --db "$T/m.db" > /dev/null 2> "$T/r.err"
check "index --mpi with no PATH: says so once: $(cat "$T/r.err")" \
  test "$(grep -c 'refreshing the 1 folder and file' "$T/r.err")" -eq 1

# ---- search --mpi: a bad number said once
"${MPI[@]}" "$BIN" search --mpi --db "$T/m.db" --rrf-k x cat > /dev/null 2> "$T/s.err"
check "search --mpi --rrf-k x: said once: $(ours "$T/s.err")" test "$(grep -c "^modattn: --rrf-k: 'x'" "$T/s.err")" -eq 1
finish mpi_options
