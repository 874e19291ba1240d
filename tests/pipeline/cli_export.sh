#!/usr/bin/env bash
# tests/pipeline/cli_export.sh MODATTN MODEL_DIR — `modattn export`: JSON Lines with every chunk
# (id, path, kind, byte range, line, page, text, vector) and a NumPy .npy of the vectors with its
# row file. The .npy is read by numpy when it is importable, else by a reader of the format's
# header here (the magic, version 1.0, the header dict, then the rows); either way its rows must
# equal the JSON vectors bit for bit, and each vector must be the embedding of its chunk's text
# (`modattn embed`, cosine >= 0.99999), its text the file's bytes start..end. Also: a store whose
# recorded model folder has moved says so, naming the old path and the fix.
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_export
scratch cli-export
mkdir -p "$T/docs"
printf 'The zebra herd crosses the river at dawn.\n' > "$T/docs/zebra.txt"
printf '# Bread\n\nYeast makes the dough rise overnight in a warm kitchen.\n' > "$T/docs/bread.md"
python3 -c "
import sys
words = ' '.join('word%d' % i for i in range(900))
open(sys.argv[1], 'w').write('A long note about lighthouses. ' + words + ' The end of the long note.')" "$T/docs/long.txt"
DB=$T/s.db
"$BIN" index --quiet --model "$MODEL" --db "$DB" "$T/docs" > /dev/null 2>&1 || bad "index"
"$BIN" export --db "$DB" > "$T/e.jsonl" 2> "$T/e.err"
rc=$?
check "export jsonl: exit 0 ($rc: $(cat "$T/e.err"))" test $rc -eq 0
"$BIN" export --db "$DB" --format npy -o "$T/v.npy" 2> "$T/n.err"
rc=$?
check "export npy: exit 0 ($rc: $(cat "$T/n.err"))" test $rc -eq 0
check "npy: the row file beside it" test -s "$T/v.jsonl"
"$BIN" export --db "$DB" --format npy > /dev/null 2>&1
check "npy without -o: a usage error (exit 2)" test $? -eq 2
"$BIN" export --db "$DB" --format csv > /dev/null 2>&1
check "an unknown format: a usage error (exit 2)" test $? -eq 2
"$BIN" export --help | grep -q -- "--format jsonl|npy"
check "export --help names the formats" test $? -eq 0
check "the exports agree with the store and the model" python3 - "$T" "$BIN" "$MODEL" <<'PY'
import json, math, os, struct, subprocess, sys
T, BIN, MODEL = sys.argv[1:4]
rows = [json.loads(l) for l in open(os.path.join(T, "e.jsonl"))]
fields = ["chunk_id", "kind", "seq", "start", "end", "line", "page", "path", "text", "vector"]
assert rows and all(sorted(r) == sorted(fields) for r in rows), rows[0].keys()
ls = json.loads(subprocess.run([BIN, "ls", "--json", "--db", os.path.join(T, "s.db")], capture_output=True, check=True).stdout)
assert len(rows) == sum(d["chunks"] for d in ls["documents"]) and len(rows) >= 4, (len(rows), ls)
assert [r["chunk_id"] for r in rows] == sorted(r["chunk_id"] for r in rows)
for r in rows:  # the text is the file's bytes start..end
    data = open(r["path"], "rb").read()
    assert data[r["start"]:r["end"]].decode() == r["text"], r["path"]
dim = len(rows[0]["vector"])
# the .npy: numpy when it is here, else its header read by hand
raw = open(os.path.join(T, "v.npy"), "rb").read()
try:
    import numpy as np
    a = np.load(os.path.join(T, "v.npy"))
    assert a.dtype == np.float32 and a.shape == (len(rows), dim), (a.dtype, a.shape)
    npy = [list(map(float, row)) for row in a]
    print("read with numpy", np.__version__)
except ImportError:
    assert raw[:6] == b"\x93NUMPY" and raw[6:8] == b"\x01\x00", raw[:8]
    hl = struct.unpack("<H", raw[8:10])[0]
    assert (10 + hl) % 64 == 0 and raw[10 + hl - 1:10 + hl] == b"\n"
    head = eval(raw[10:10 + hl].decode("latin-1"), {})
    assert head == {"descr": "<f4", "fortran_order": False, "shape": (len(rows), dim)}, head
    body = raw[10 + hl:]
    assert len(body) == 4 * len(rows) * dim
    flat = struct.unpack("<%df" % (len(rows) * dim), body)
    npy = [list(flat[i * dim:(i + 1) * dim]) for i in range(len(rows))]
    print("numpy not here: read by its header")
side = [json.loads(l) for l in open(os.path.join(T, "v.jsonl"))]
assert [s["row"] for s in side] == list(range(len(rows)))
assert [s["chunk_id"] for s in side] == [r["chunk_id"] for r in rows] and all("vector" not in s for s in side)
for r, v in zip(rows, npy):  # bit for bit: %.9g round-trips a float32
    assert [struct.unpack("<f", struct.pack("<f", x))[0] for x in r["vector"]] == v, r["chunk_id"]
# each vector is its chunk's embedding
emb = subprocess.run([BIN, "embed", "--model", MODEL, "--jsonl", "-"], input="\n".join(json.dumps(r["text"]) for r in rows),
                     capture_output=True, text=True, check=True).stdout.splitlines()
for r, line in zip(rows, emb):
    e = json.loads(line)["embedding"]
    ne = math.sqrt(sum(x * x for x in e))
    cos = sum(a * b for a, b in zip(r["vector"], e)) / ne
    assert cos >= 0.99999, (r["chunk_id"], cos)
print(len(rows), "chunks,", dim, "dimensions")
PY
"$BIN" export --db "$DB" --no-vectors > "$T/nv.jsonl"
check "--no-vectors: no vector field" python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(0 if r and all('vector' not in x for x in r) else 1)" "$T/nv.jsonl"
"$BIN" export --db "$T/none.db" > /dev/null 2> "$T/x.err"
rc=$?
check "a missing store: exit 1 with a message ($rc: $(cat "$T/x.err"))" test $rc -eq 1 -a -s "$T/x.err"

# the store's model folder moved: the note names where it was and the fix; --model at its new
# place works, and `index --model` records it so that a plain search works again
mkdir "$T/m" && ln -s "$(realpath "$MODEL")"/* "$T/m/"
"$BIN" index --quiet --model "$T/m" --db "$T/m.db" "$T/docs" > /dev/null 2>&1 || bad "index with the linked model"
mv "$T/m" "$T/m2"
"$BIN" search --db "$T/m.db" "zebra herd" > /dev/null 2> "$T/mv.err"
check "moved model folder: the note names the old path and the fix: $(cat "$T/mv.err")" \
  grep -q "this store's model was loaded from $T/m, which is not there any more.*--model DIR" "$T/mv.err"
"$BIN" index --quiet --model "$T/m2" --db "$T/m.db" "$T/docs" > /dev/null 2>&1
"$BIN" search --db "$T/m.db" "zebra herd" > "$T/mv.out" 2> "$T/mv2.err"
rc=$?
check "after index --model NEW: a plain search works, no note ($rc: $(cat "$T/mv2.err"))" \
  test $rc -eq 0 -a ! -s "$T/mv2.err"
finish cli_export
