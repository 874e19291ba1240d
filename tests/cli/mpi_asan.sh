#!/usr/bin/env bash
# tests/cli/mpi_asan.sh MODATTN MODEL_DIR MPIRUN — the MPI commands under ASan+UBSan (the sanitizer
# build), two ranks: `index --mpi` writes the plain index's store (tests/cli/store_diff.py --ids)
# and `search --mpi` (hybrid, --json --queries) prints the plain search's results; a rank with a
# memory error, undefined behaviour or a leak of ours exits non-zero, and so does mpirun. Open
# MPI's own allocations that outlive MPI_Finalize are suppressed by library name
# (tests/cli/lsan_openmpi.supp, set by CTest), so a leak in our code is still reported. The full
# comparison (every mode, incremental runs, a rank killed) is mpi_cli in the plain build.
set -u
BIN=$1
MODEL=$2
MPIRUN=$3
. "$(dirname "$0")/../pipeline/harness.sh"
need_model "$MODEL" mpi_asan
scratch mpi-asan
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_base_warn_component_unused=0
MPI=("$MPIRUN" --oversubscribe --bind-to none -np 2)
C=$T/c
mkdir -p "$C/sub"
cp "$REPO"/demo/corpus/jargon-*.txt "$C/"
cp "$REPO/demo/corpus/alice-ch07-a-mad-tea-party.html" "$C/sub/"
cp "$C/jargon-cruft.txt" "$C/sub/cruft-again.txt"
: > "$C/empty.txt"

"$BIN" --threads 1 index --json --model "$MODEL" --db "$T/plain.db" "$C" > "$T/plain.json" 2> "$T/plain.err" \
  || bad "plain index: $(tail -c 2000 "$T/plain.err")"
"${MPI[@]}" "$BIN" --threads 1 index --mpi --json --model "$MODEL" --db "$T/mpi.db" "$C" > "$T/mpi.json" 2> "$T/mpi.err"
rc=$?
[ "$rc" = 0 ] && ok || bad "index --mpi under ASan: exit $rc: $(tail -c 3000 "$T/mpi.err")"
check "index --mpi under ASan: the plain store, ids and vectors bit for bit" python3 "$HERE/store_diff.py" "$T/plain.db" "$T/mpi.db" --ids
check "index --mpi under ASan: two ranks, files indexed: $(head -c 300 "$T/mpi.json")" python3 -c "
import json, sys; j = json.load(open(sys.argv[1])); assert j['ranks'] == 2 and j['files_indexed'] >= 5, j" "$T/mpi.json"

printf 'what is cruft\nthe tea party goes wrong\nyak shaving\n' > "$T/q.txt"
"$BIN" --threads 1 search --json -k 5 --model "$MODEL" --db "$T/plain.db" --queries "$T/q.txt" > "$T/p.json" 2> "$T/p.err" \
  || bad "plain search: $(tail -c 2000 "$T/p.err")"
"${MPI[@]}" "$BIN" --threads 1 search --mpi --json -k 5 --model "$MODEL" --db "$T/plain.db" --queries "$T/q.txt" \
  > "$T/m.json" 2> "$T/m.err"
rc=$?
[ "$rc" = 0 ] && ok || bad "search --mpi under ASan: exit $rc: $(tail -c 3000 "$T/m.err")"
check "search --mpi under ASan: the plain search's results" python3 - "$T/p.json" "$T/m.json" <<'PY'
import json, sys
def load(f):  # one JSON document per query
    out, txt, dec, i = [], open(f).read(), json.JSONDecoder(), 0
    while True:
        while i < len(txt) and txt[i].isspace(): i += 1
        if i >= len(txt): return out
        o, i = dec.raw_decode(txt, i)
        o.pop("index", None); o.pop("index_note", None); out.append(o)
a, b = load(sys.argv[1]), load(sys.argv[2])
assert len(a) == 3 and a == b and all(r["results"] for r in a), (a[:1], b[:1])
PY
finish mpi_asan
