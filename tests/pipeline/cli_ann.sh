#!/usr/bin/env bash
# tests/pipeline/cli_ann.sh MODATTN MODEL_DIR — `index --ann` and `search` through the ANN index
# (issue 16): built beside the store, used by search when current ("index" in --json) with the
# exact scan's results (recall@3 of the demo corpus's queries equal to the exact scan's), kept up
# to date by later runs (a file added: rows added; a file pruned: never returned again), a damaged
# index never used (the search scans exactly and says why) and built again by --ann, removed by
# --ann none; usage errors (kind, parameters) name what is wrong; --queries through it; a build
# without FAISS says how to get it. The compact kinds (f16, int8, binary), which need no FAISS, in
# every build: used by search with the exact scan's answers, and `stats` on them.
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_ann
scratch cli-ann
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DB=$T/a.db
mkdir -p "$T/c"
cp "$REPO/demo/corpus/"jargon-*.txt "$REPO/demo/corpus/"sqlite-*.html "$REPO/demo/corpus/"modattn-*.md "$T/c/"

# usage errors first: nothing is indexed
"$BIN" index --model "$MODEL" --db "$DB" --ann lsh "$T/c" > /dev/null 2> "$T/e"; rc=$?
check "--ann lsh: exit 2 naming the kinds ($rc: $(cat "$T/e"))" grep -q "hnsw, ivf-sq8, ivf-pq, f16, int8, binary or none" "$T/e"
[ "$rc" = 2 ] && ok || bad "--ann lsh exit $rc"
"$BIN" index --model "$MODEL" --db "$DB" --ann int8 --ann-params M=1 "$T/c" > /dev/null 2> "$T/e"; rc=$?
check "--ann-params M=1: exit 2 naming M and its range ($rc: $(cat "$T/e"))" grep -q "M=1 is out of range: a whole number in 4..128" "$T/e"
[ "$rc" = 2 ] && ok || bad "M=1 exit $rc"
"$BIN" index --model "$MODEL" --db "$DB" --ann-params M=16 "$T/c" > /dev/null 2> "$T/e"; rc=$?
check "--ann-params without --ann: exit 2 ($rc)" grep -q "needs --ann KIND" "$T/e"
check "no store made by a usage error" test ! -e "$DB"

# the compact copies (no FAISS needed): each built, searched with the exact scan's answers, and
# reported by `stats` (bytes per vector, recall against the exact scan)
CDB=$T/c.db
"$BIN" index --quiet --model "$MODEL" --db "$CDB" "$T/c" 2> "$T/e" || bad "index: $(cat "$T/e")"
for kind in f16 int8 binary; do
  "$BIN" index --json --model "$MODEL" --db "$CDB" --ann $kind > "$T/i.json" 2> "$T/e" || bad "index --ann $kind: $(cat "$T/e")"
  check "index --ann $kind: built over every row" python3 - "$T/i.json" "$kind" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["ann"]
assert a["action"] == "built" and a["kind"] == sys.argv[2] and a["rows"] == a["rows_added"] > 100, a
PY
  for q in "how does write-ahead logging keep the database safe after a crash" "what is yak shaving"; do
    "$BIN" search --json --mode vector -k 3 --model "$MODEL" --db "$CDB" "$q" > "$T/ann.json" 2> "$T/e" || bad "search: $(cat "$T/e")"
    "$BIN" search --json --mode vector -k 3 --exact --model "$MODEL" --db "$CDB" "$q" > "$T/ex.json" 2> "$T/e" || bad "search --exact: $(cat "$T/e")"
    check "$kind, '$q': used by search, the exact scan's top 3 and scores" python3 - "$T/ann.json" "$T/ex.json" "$kind" <<'PY'
import json, sys
a, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["index"] == sys.argv[3] and e["index"] == "exact", (a.get("index"), a.get("index_note"), e.get("index"))
key = lambda j: [(r["path"], r["start"], r["score"]) for r in j["results"]]
assert key(a) == key(e) and len(key(a)) == 3, (a, e)
PY
  done
  "$BIN" stats --json --db "$CDB" > "$T/s.json" 2> "$T/e" || bad "stats: $(cat "$T/e")"
  check "stats --json ($kind): bytes per vector and recall@10" python3 - "$T/s.json" "$kind" <<'PY'
import json, sys
s, kind = json.load(open(sys.argv[1])), sys.argv[2]
i, v = s["index"], s["vectors"]
per_row = {"f16": 768, "int8": 388, "binary": 48}[kind]
assert i["kind"] == kind and i["current"] and i["recall_queries"] > 100, i
assert abs(i["bytes_per_vector"] - (per_row + 4096 / v["rows"])) < 1e-6, (i, v)
assert i["recall10"] >= {"f16": 0.99, "int8": 0.97, "binary": 0.8}[kind], i
assert v["rows"] == s["store"]["chunks"] and v["current"] and v["bytes_per_vector"] > 1536, v
PY
done
# --recall-queries N: N stored vectors as queries (0: recall not measured); out of range: exit 2
"$BIN" stats --json --recall-queries 7 --db "$CDB" > "$T/s.json" 2> "$T/e" || bad "stats --recall-queries 7: $(cat "$T/e")"
check "stats --recall-queries 7: 7 queries measured" python3 -c "
import json, sys; i = json.load(open(sys.argv[1]))['index']; assert i['recall_queries'] == 7 and 0 <= i['recall10'] <= 1, i" "$T/s.json"
"$BIN" stats --json --recall-queries 0 --db "$CDB" > "$T/s.json" 2> "$T/e" || bad "stats --recall-queries 0: $(cat "$T/e")"
check "stats --recall-queries 0: no recall measured" python3 -c "
import json, sys; i = json.load(open(sys.argv[1]))['index']; assert 'recall10' not in i and 'recall_queries' not in i and i['current'], i" "$T/s.json"
for n in -1 100001 x; do
  "$BIN" stats --recall-queries "$n" --db "$CDB" > /dev/null 2> "$T/e"; rc=$?
  check "stats --recall-queries $n: exit 2 naming the option ($rc: $(cat "$T/e"))" test "$rc" = 2 -a -n "$(grep -- --recall-queries "$T/e")"
done
"$BIN" stats --db "$CDB" > "$T/s.txt" 2> "$T/e" || bad "stats: $(cat "$T/e")"
check "stats (text): the index and its recall ($(cat "$T/s.txt"))" grep -q "^recall@10  " "$T/s.txt"
"$BIN" stats --db "$T/none.db" > /dev/null 2> "$T/e"; rc=$?
check "stats of a missing store: exit 1 saying so ($rc: $(cat "$T/e"))" grep -q "opening the store" "$T/e"
"$BIN" index --model "$MODEL" --db "$CDB" --ann none > /dev/null 2> "$T/e" || bad "--ann none: $(cat "$T/e")"
"$BIN" stats --db "$CDB" > "$T/s.txt" 2> "$T/e" || bad "stats: $(cat "$T/e")"
check "stats without an index says so" grep -q "^index      none" "$T/s.txt"

if ! "$BIN" --version | grep -q "ann: faiss"; then
  "$BIN" index --model "$MODEL" --db "$DB" --ann hnsw "$T/c" > /dev/null 2> "$T/e"; rc=$?
  check "a build without FAISS: --ann says how to get it ($rc: $(cat "$T/e"))" grep -q "libfaiss-dev" "$T/e"
  finish cli_ann || exit 1
  # the compact kinds and the refusal passed; the FAISS kinds did not run: CTest's skip (77), not a pass
  echo "cli_ann: SKIPPED (exit 77): this build has no FAISS (MODATTN_FAISS=OFF or no libfaiss-dev): index --ann" \
       "hnsw and search through it were not tested; the compact kinds and the refusal were"
  exit 77
fi

# built with the index
"$BIN" index --json --model "$MODEL" --db "$DB" --ann hnsw "$T/c" > "$T/i.json" 2> "$T/e" || bad "index --ann hnsw: $(cat "$T/e")"
check "index --json: ann built over every chunk: $(head -c 600 "$T/i.json")" python3 - "$T/i.json" "$DB" <<'PY'
import json, sqlite3, sys
a = json.load(open(sys.argv[1]))["ann"]
n = sqlite3.connect(sys.argv[2]).execute("select count(*) from embeddings").fetchone()[0]
assert a["action"] == "built" and a["kind"] == "hnsw" and a["rows"] == n and a["rows_added"] == n, (a, n)
assert a["params"] == "M=32,efConstruction=40,efSearch=64" and a["bytes"] > n * 1536, a
PY
check "DB.ann beside the store" test -s "$DB.ann"

# the same answers as the exact scan for the demo's questions (recall@3 within 0.01: here equal)
qs=("how does write-ahead logging keep the database safe after a crash" "what is yak shaving"
    "isolation between readers and writers" "a bug that disappears when you look for it"
    "how are documents split into chunks" "when should I not use sqlite")
for q in "${qs[@]}"; do
  "$BIN" search --json --mode vector -k 3 --ann --model "$MODEL" --db "$DB" "$q" > "$T/ann.json" 2> "$T/e" || bad "search: $(cat "$T/e")"
  "$BIN" search --json --mode vector -k 3 --exact --model "$MODEL" --db "$DB" "$q" > "$T/ex.json" 2> "$T/e" || bad "search --exact: $(cat "$T/e")"
  check "'$q': through hnsw, the exact scan's top 3 and scores" python3 - "$T/ann.json" "$T/ex.json" <<'PY'
import json, sys
a, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["index"] == "hnsw" and e["index"] == "exact", (a.get("index"), e.get("index"))
assert "index_note" not in a, a.get("index_note")
key = lambda j: [(r["path"], r["start"], r["score"]) for r in j["results"]]
assert key(a) == key(e), (key(a), key(e))
PY
done
# without --ann, one query on a small store: scanning is cheaper than reading the index, and it says so
"$BIN" search --json -k 3 --mode vector --model "$MODEL" --db "$DB" "what is yak shaving" > "$T/auto.json" 2> "$T/e"
check "one query, small store: exact, saying reading the index costs more" python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); assert j['index']=='exact' and 'faster than reading' in j['index_note'], j" "$T/auto.json"
# hybrid through it too; --queries (one batch) says so on every line
"$BIN" search --json -k 3 --ann --model "$MODEL" --db "$DB" "what is yak shaving" > "$T/h.json" 2> "$T/e"
check "hybrid: index hnsw" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['index']=='hnsw' and j['results'], j" "$T/h.json"
printf '%s\n' "${qs[@]}" > "$T/q.txt"
"$BIN" search --json -k 3 --ann --model "$MODEL" --db "$DB" --queries "$T/q.txt" > "$T/b.jsonl" 2> "$T/e" || bad "--queries: $(cat "$T/e")"
check "--queries: every line through hnsw" python3 -c "
import json, sys; L = [json.loads(l) for l in open(sys.argv[1])]
assert len(L) == 6 and all(j['index'] == 'hnsw' for j in L), L[0]" "$T/b.jsonl"
# a search parameter per search; out of range is a usage error naming it
"$BIN" search --json -k 3 --ann --ann-params efSearch=200 --model "$MODEL" --db "$DB" "what is yak shaving" > /dev/null 2> "$T/e" || bad "--ann-params efSearch=200: $(cat "$T/e")"
"$BIN" search -k 3 --ann-params efSearch=0 --model "$MODEL" --db "$DB" "x" > /dev/null 2> "$T/e"; rc=$?
check "search --ann-params efSearch=0: exit 2 naming it ($rc: $(cat "$T/e"))" grep -q "efSearch=0 is out of range" "$T/e"

# kept up to date: a file added (rows added), a file pruned (never returned again)
cp "$REPO/demo/corpus/devils-dictionary-b.txt" "$T/c/"
"$BIN" index --json --model "$MODEL" --db "$DB" "$T/c" > "$T/i2.json" 2> "$T/e" || bad "index again: $(cat "$T/e")"
check "a file added: rows added to the index: $(head -c 900 "$T/i2.json")" python3 -c "
import json, sys; a = json.load(open(sys.argv[1]))['ann']
assert a['action'] == 'added' and a['rows_added'] > 0, a" "$T/i2.json"
"$BIN" search --json --mode vector -k 1 --model "$MODEL" --db "$DB" "jargon yak shaving: any seemingly pointless activity" > "$T/y.json" 2> /dev/null
check "the yak-shaving file is found first before it is pruned" python3 -c "
import json, sys; j = json.load(open(sys.argv[1])); assert j['results'][0]['path'].endswith('jargon-yak-shaving.txt'), j['results'][0]['path']" "$T/y.json"
rm "$T/c/jargon-yak-shaving.txt"
"$BIN" index --json --prune --model "$MODEL" --db "$DB" "$T/c" > "$T/i3.json" 2> "$T/e" || bad "index --prune: $(cat "$T/e")"
check "a file pruned: the index follows the store's generation: $(head -c 900 "$T/i3.json")" python3 -c "
import json, sys; a = json.load(open(sys.argv[1]))['ann']; assert a['action'] == 'current', a" "$T/i3.json"
"$BIN" search --json --mode vector -k 20 --ann --model "$MODEL" --db "$DB" "jargon yak shaving: any seemingly pointless activity" > "$T/y.json" 2> /dev/null
check "a pruned file never comes back through the index" python3 -c "
import json, sys; j = json.load(open(sys.argv[1])); assert j['index'] == 'hnsw', j.get('index_note')
assert j['results'] and not any(r['path'].endswith('jargon-yak-shaving.txt') for r in j['results']), [r['path'] for r in j['results']]" "$T/y.json"

# damaged: never used (an exact scan, saying why); a plain index warns; --ann builds it again
size=$(stat -c %s "$DB.ann")
truncate -s $((size - 1000)) "$DB.ann"
"$BIN" search --json --mode vector -k 3 --model "$MODEL" --db "$DB" "what is yak shaving" > "$T/d.json" 2> "$T/e" || bad "search, damaged index: $(cat "$T/e")"
"$BIN" search --json --mode vector -k 3 --ann --model "$MODEL" --db "$DB" "what is yak shaving" > /dev/null 2> "$T/e2"; rc=$?
check "--ann with a damaged index: exit 1 saying why ($rc: $(cat "$T/e2"))" grep -q "no usable ANN index.*truncated" "$T/e2"
check "a truncated index: exact scan, saying why" python3 -c "
import json, sys; j = json.load(open(sys.argv[1])); assert j['index'] == 'exact' and 'truncated' in j['index_note'], j" "$T/d.json"
"$BIN" search --mode vector -k 3 --model "$MODEL" --db "$DB" "what is yak shaving" > /dev/null 2> "$T/e"
check "the text output says so on stderr" grep -q "ANN index was not used.*truncated" "$T/e"
"$BIN" search --json --mode vector -k 3 --model "$MODEL" --db "$DB" --mode vector "x" > /dev/null 2>&1
"$BIN" index --model "$MODEL" --db "$DB" "$T/c" > /dev/null 2> "$T/e"; rc=$?
check "a plain index over a damaged ANN index: exit 0 with a warning ($rc: $(cat "$T/e"))" grep -q "the ANN index was not updated" "$T/e"
[ "$rc" = 0 ] && ok || bad "plain index exit $rc"
"$BIN" index --json --model "$MODEL" --db "$DB" --ann hnsw > "$T/i4.json" 2> "$T/e" || bad "index --ann hnsw without PATH: $(cat "$T/e")"
check "index --ann hnsw (no PATH) builds it again, saying why" python3 -c "
import json, sys; a = json.load(open(sys.argv[1]))['ann']; assert a['action'] == 'built' and 'truncated' in a['reason'], a" "$T/i4.json"

# IVF kinds on a small store: parameters checked against its size
"$BIN" index --model "$MODEL" --db "$DB" --ann ivf-sq8 --ann-params nlist=5000 > /dev/null 2> "$T/e"; rc=$?
check "nlist=5000 on a small store: exit 1 saying how many rows it needs ($rc: $(cat "$T/e"))" grep -q "nlist=5000 needs 39 x 5000 rows" "$T/e"
[ "$rc" = 1 ] && ok || bad "nlist=5000 exit $rc"
"$BIN" index --json --model "$MODEL" --db "$DB" --ann ivf-pq > "$T/i5.json" 2> "$T/e" || bad "index --ann ivf-pq: $(cat "$T/e")"
"$BIN" search --json --mode vector -k 3 --ann --model "$MODEL" --db "$DB" "what is yak shaving" > "$T/p.json" 2> "$T/e"
check "ivf-pq: searched through it, exact scores" python3 -c "
import json, sys; j = json.load(open(sys.argv[1])); assert j['index'] == 'ivf-pq' and len(j['results']) == 3, j" "$T/p.json"

# removed
"$BIN" index --json --model "$MODEL" --db "$DB" --ann none > "$T/i6.json" 2> "$T/e" || bad "--ann none: $(cat "$T/e")"
check "--ann none removes it" test ! -e "$DB.ann"
"$BIN" search --json --mode vector -k 3 --model "$MODEL" --db "$DB" "x" > "$T/n.json" 2> /dev/null
check "no index: exact, no note" python3 -c "
import json, sys; j = json.load(open(sys.argv[1])); assert j['index'] == 'exact' and 'index_note' not in j, j" "$T/n.json"
"$BIN" search -k 3 --ann --model "$MODEL" --db "$DB" "x" > /dev/null 2> "$T/e"; rc=$?
check "--ann without an index: exit 1 saying how to build one ($rc: $(cat "$T/e"))" grep -q "modattn index --ann hnsw" "$T/e"
[ "$rc" = 1 ] && ok || bad "--ann without an index: exit $rc"
finish cli_ann
