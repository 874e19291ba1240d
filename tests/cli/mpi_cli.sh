#!/usr/bin/env bash
# tests/cli/mpi_cli.sh MODATTN MODEL_DIR MPIRUN — `mpirun -np 2 modattn index --mpi` and
# `search --mpi` (issue 16 part 5) against the plain, one-process commands on the same corpus:
#   - index --mpi writes the same store: documents, chunks, chunk ids and vectors bit for bit
#     (tests/cli/store_diff.py --ids), the same vector file byte for byte, the same counts;
#   - an incremental run (one file changed, one added, one removed with --prune) too;
#   - search --mpi prints what search prints, in every mode, text and --json, one query and
#     --queries (ranks, scores, cosines, BM25, paths; the corpus holds two files with the same
#     text, so that equal scores are ranked by chunk id as one scan would);
#   - a rank killed mid-run (MODATTN_TEST_MPI_DIE_AFTER=N: rank 1 raises SIGKILL after sending N
#     documents) fails the run with a clear message, leaves a store that passes integrity_check
#     and holds whole documents only, and a re-run embeds only what is missing (the rest reported
#     unchanged) and ends with the plain run's store;
#   - --mpi without mpirun runs as one rank (the plain index).
# Two ranks of one thread each (the CI host has 2 cores); mpirun runs as root only with
# OMPI_ALLOW_RUN_AS_ROOT (set here).
set -u
BIN=$1
MODEL=$2
MPIRUN=$3
. "$(dirname "$0")/../pipeline/harness.sh"
need_model "$MODEL" mpi_cli
scratch mpi-cli
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# no MCA warnings about missing high-speed networks on a plain host
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_base_warn_component_unused=0
# bind-to none: two ranks of one thread each share the two cores as the OS sees fit
MPI=("$MPIRUN" --oversubscribe --bind-to none -np 2)
DIFF=$HERE/store_diff.py

# the corpus: the demo's smaller files, one HTML and one PDF, two files of the same text (tied
# scores), a binary and an empty file (skipped by both)
C=$T/c
mkdir -p "$C/sub"
for f in "$REPO"/demo/corpus/*; do
  s=$(stat -c %s "$f")
  [ "$s" -le 9100 ] && cp "$f" "$C/"
done
cp "$REPO/demo/corpus/alice-ch07-a-mad-tea-party.html" "$REPO/demo/corpus/paradise-lost-book1-opening.pdf" "$C/sub/"
cp "$C/jargon-cruft.txt" "$C/sub/cruft-again.txt"
head -c 3000 /dev/urandom > "$C/noise.bin"
: > "$C/empty.txt"
idx() { "$BIN" --threads 1 index --json --model "$MODEL" "$@"; }
midx() { "${MPI[@]}" "$BIN" --threads 1 index --mpi --json --model "$MODEL" "$@"; }
count() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# ---- index: one process, then two ranks
idx --db "$T/plain.db" "$C" > "$T/plain.json" 2> "$T/plain.err" || bad "plain index: $(cat "$T/plain.err")"
midx --db "$T/mpi.db" "$C" > "$T/mpi.json" 2> "$T/mpi.err" || bad "index --mpi: $(cat "$T/mpi.err")"
check "index --mpi: the same store as index, ids and vectors bit for bit" python3 "$DIFF" "$T/plain.db" "$T/mpi.db" --ids
check "index --mpi: the same vector file" cmp "$T/plain.db.vec" "$T/mpi.db.vec"
check "index --mpi: the same counts: $(head -c 600 "$T/mpi.json")" python3 - "$T/plain.json" "$T/mpi.json" <<'PY'
import json, sys
p, m = (json.load(open(f)) for f in sys.argv[1:3])
for k in ("files_seen", "files_indexed", "files_unchanged", "files_skipped", "chunks_embedded", "tokens_embedded", "vector_file"):
    assert p[k] == m[k], (k, p[k], m[k])
assert m["ranks"] == 2 and p["files_indexed"] >= 15 and p["files_skipped"] == 2, m
assert sorted(e["path"] for e in p["skipped"]) == sorted(e["path"] for e in m["skipped"]), m["skipped"]
PY

# ---- search: every mode, text and JSON, one query and a batch; 2 and 3 ranks (3 > segments)
s() { "$BIN" --threads 1 search --model "$MODEL" --db "$T/plain.db" "$@"; }
ms() { local n=$1; shift; "$MPIRUN" --oversubscribe --bind-to none -np "$n" "$BIN" --threads 1 search --mpi --model "$MODEL" --db "$T/plain.db" "$@"; }
printf 'what is cruft\nwho makes honey\n\nthe tea party goes wrong\nE4021 yak shaving\nsqlite write ahead log\n' > "$T/q.txt"
# two JSON outputs are the same results: every key compared, but "index"/"index_note" (what
# found the candidates: --mpi always scans exactly)
same_json() { python3 - "$1" "$2" <<'PY'
import json, sys
def load(f):
    out = []  # one JSON document (one query) or one per line (--queries)
    txt = open(f).read()
    dec = json.JSONDecoder(); i = 0
    while i < len(txt):
        while i < len(txt) and txt[i].isspace(): i += 1
        if i >= len(txt): break
        o, i = dec.raw_decode(txt, i)
        o.pop("index", None); o.pop("index_note", None)
        out.append(o)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a and a == b, (a[:1], b[:1])
assert any(r["results"] for r in a)
PY
}
for mode in hybrid vector keyword; do
  s --mode "$mode" -k 8 "what is cruft in old code" > "$T/p.txt" 2> "$T/p.err"
  ms 2 --mode "$mode" -k 8 "what is cruft in old code" > "$T/m.txt" 2> "$T/m.err" || bad "search --mpi --mode $mode: $(cat "$T/m.err")"
  check "search --mpi --mode $mode: the same text" cmp "$T/p.txt" "$T/m.txt"
  s --json --mode "$mode" -k 12 --queries "$T/q.txt" > "$T/pb.json" 2> "$T/p.err"
  ms 2 --json --mode "$mode" -k 12 --queries "$T/q.txt" > "$T/mb.json" 2> "$T/m.err" || bad "search --mpi --queries: $(cat "$T/m.err")"
  check "search --mpi --mode $mode --json --queries: the same results" same_json "$T/pb.json" "$T/mb.json"
done
# -k 60 (hybrid: 60 candidates each) on 3 ranks: slices cut through the corpus differently
s --json -k 60 "what is cruft in old code" > "$T/p.json" 2> "$T/p.err"
ms 3 --json -k 60 "what is cruft in old code" > "$T/m.json" 2> "$T/m.err" || bad "search --mpi -np 3: $(cat "$T/m.err")"
check "search --mpi -np 3 --json -k 60: the same results" same_json "$T/p.json" "$T/m.json"
# the tie: two chunks of the same text have the same score; the lower chunk id ranks first
s --json --mode vector -k 2 "cruft" > "$T/tie.json" 2> /dev/null
check "the corpus holds a tie, ranked by chunk id in both" python3 - "$T/tie.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
assert r[0]["score"] == r[1]["score"] and r[0]["text"] == r[1]["text"], r
PY

# ---- an incremental run: one file changed, one added, one removed (--prune)
cp "$T/plain.db" "$T/plain2.db"; cp "$T/plain.db.vec" "$T/plain2.db.vec"
cp "$T/mpi.db" "$T/mpi2.db"; cp "$T/mpi.db.vec" "$T/mpi2.db.vec"
printf '\nA wizard fixed the cruft with one careful edit and a long explanation.\n' >> "$C/jargon-wizard.txt"
printf 'Bikeshedding, again: the colour of the shed, the length of the meeting.\n' > "$C/sub/new.md"
rm "$C/jargon-guru.txt"
idx --prune --db "$T/plain2.db" "$C" > "$T/plain2.json" 2> "$T/plain2.err" || bad "plain index 2: $(cat "$T/plain2.err")"
midx --prune --db "$T/mpi2.db" "$C" > "$T/mpi2.json" 2> "$T/mpi2.err" || bad "index --mpi 2: $(cat "$T/mpi2.err")"
check "an incremental index --mpi: 2 indexed, 1 pruned, the rest unchanged: $(head -c 400 "$T/mpi2.json")" python3 - "$T/mpi2.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["files_indexed"] == 2 and j["files_pruned"] == 1 and j["files_unchanged"] >= 15, j
PY
check "an incremental index --mpi: the same store as index" python3 "$DIFF" "$T/plain2.db" "$T/mpi2.db" --ids
check "an incremental index --mpi: the same vector file" cmp "$T/plain2.db.vec" "$T/mpi2.db.vec"

# ---- --mpi without mpirun: one rank, the plain run
"$BIN" --threads 1 index --mpi --quiet --model "$MODEL" --db "$T/single.db" "$C" > /dev/null 2> "$T/single.err" \
  || bad "index --mpi without mpirun: $(cat "$T/single.err")"
check "index --mpi without mpirun: the plain store" python3 "$DIFF" "$T/plain2.db" "$T/single.db"

# ---- a rank that dies mid-run
MODATTN_TEST_MPI_DIE_AFTER=2 midx --db "$T/k.db" "$C" > "$T/k.json" 2> "$T/k.err"
rc=$?
check "a dead rank fails the run (exit $rc)" test "$rc" -ne 0
check "a dead rank: mpirun and rank 0 say what happened: $(tail -c 800 "$T/k.err")" \
  grep -q "stopped by a signal, most likely because another rank died" "$T/k.err"
check "a dead rank: mpirun names it" grep -q "rank 1 .*exited on signal 9" "$T/k.err"
check "a dead rank: integrity, whole documents only, some written" python3 - "$T/k.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
assert c.execute("pragma integrity_check").fetchone()[0] == "ok"
docs = c.execute("select id, nchunks from documents").fetchall()
assert docs, "nothing was written before the rank died"
for d, n in docs:
    got = c.execute("select count(*) from chunks c join embeddings e on e.chunk = c.id where c.document = ?", (d,)).fetchone()[0]
    assert got == n, (d, n, got)
assert c.execute("select count(*) from chunks").fetchone()[0] == c.execute("select count(*) from chunks_fts").fetchone()[0]
print(len(docs), file=open(sys.argv[1] + ".ndocs", "w"))
PY
done_before=$(cat "$T/k.db.ndocs" 2> /dev/null || echo 0)
midx --db "$T/k.db" "$C" > "$T/k2.json" 2> "$T/k2.err" || bad "the re-run: $(cat "$T/k2.err")"
check "the re-run embeds only what is missing ($done_before done before): $(head -c 300 "$T/k2.json")" python3 - "$T/k2.json" "$T/mpi2.json" "$done_before" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); full = json.load(open(sys.argv[2])); done = int(sys.argv[3])
total = full["files_indexed"] + full["files_unchanged"]
assert j["files_unchanged"] == done and j["files_indexed"] == total - done, (j, total, done)
PY
check "the re-run ends with the plain run's store" python3 "$DIFF" "$T/plain2.db" "$T/k.db"
finish mpi_cli
