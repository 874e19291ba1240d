#!/usr/bin/env bash
# tests/pipeline/cli_search_modes.sh MODATTN MODEL_DIR — `modattn search --mode hybrid|vector|keyword`
# (issue 20): keywords find what is named exactly, hybrid fuses both rankings and says which found
# what, snippets mark the query's words (escaped for the terminal), hostile query text is plain
# text, an empty keyword match falls back to meaning, a store made before the keyword index
# (tests/fixtures/store-v2.db, made by the main of 2026-12-04) is searched by meaning with a hint
# until `index` migrates it, and an SQLite without FTS5 keeps vector search working.
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_search_modes
scratch cli-search-modes
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DB=$T/s.db
mkdir -p "$T/c"
cp "$REPO/demo/corpus/"* "$T/c/"
printf 'Error E4021 means the connection pool is exhausted; raise max_connections or close idle clients.\n' > "$T/c/errors.md"
printf 'The deploy script printed \033[31mRED ALERT\033[0m before the lighthouse rotation finished.\n' > "$T/c/escape.txt"
"$BIN" index --quiet --model "$MODEL" --db "$DB" "$T/c" > /dev/null 2> "$T/i.err" || bad "index: $(cat "$T/i.err")"
check "schema 3 with a keyword index of every chunk" python3 -c "
import sqlite3, sys; c = sqlite3.connect(sys.argv[1])
assert c.execute('pragma user_version').fetchone()[0] == 3
assert c.execute('select count(*) from chunks').fetchone()[0] == c.execute('select count(*) from chunks_fts').fetchone()[0] > 100" "$DB"
js() { "$BIN" search --json --model "$MODEL" --db "$DB" "$@" 2> "$T/err"; }

# an exact error code: keyword and hybrid put its document first
for mode in keyword hybrid; do
  js --mode $mode -k 3 "E4021" > "$T/o.json"
  check "$mode: the error code's document first: $(head -c 400 "$T/o.json" "$T/err")" python3 - "$T/o.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); r = j["results"]
assert r[0]["path"].endswith("errors.md"), r[0]["path"]
assert r[0]["keyword_rank"] == 1 and r[0]["bm25"] > 0, r[0]
t = r[0]["text"].encode()
assert [t[a:b].decode() for a, b in r[0]["highlights"]] == ["E4021"], r[0]["highlights"]
PY
done
# hybrid: both ranks and the fused score; vector: cosine order, no keyword ranks
js --mode hybrid -k 5 "how does write-ahead logging keep the database safe after a crash" > "$T/h.json"
js --mode vector -k 5 "how does write-ahead logging keep the database safe after a crash" > "$T/v.json"
js --rrf-k 60 --keyword-weight 1 -k 5 "how does write-ahead logging keep the database safe after a crash" > "$T/h60.json"
check "hybrid fuses, vector ranks by cosine: $(head -c 300 "$T/h.json")" python3 - "$T/h.json" "$T/v.json" "$T/h60.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1])); v = json.load(open(sys.argv[2])); h60 = json.load(open(sys.argv[3]))
assert h["mode"] == "hybrid" and v["mode"] == "vector"
for r in h["results"]:  # the defaults: K 10, words weighted 0.7
    want = (1 / (10 + r["vector_rank"]) if r["vector_rank"] else 0) + (0.7 / (10 + r["keyword_rank"]) if r["keyword_rank"] else 0)
    assert abs(r["score"] - want) < 1e-6, r
for r in h60["results"]:  # --rrf-k 60 --keyword-weight 1: the textbook fusion
    want = sum(1 / (60 + x) for x in (r["vector_rank"], r["keyword_rank"]) if x)
    assert abs(r["score"] - want) < 1e-6, r
    assert r["vector_rank"] or r["keyword_rank"]
assert any(r["vector_rank"] and r["keyword_rank"] for r in h["results"])
assert all(r["keyword_rank"] is None and r["vector_rank"] == r["rank"] for r in v["results"])
s = [r["score"] for r in v["results"]]
assert s == sorted(s, reverse=True) and all(abs(r["score"] - r["cosine"]) < 1e-6 for r in v["results"])
assert "sqlite-write-ahead-logging.html" in h["results"][0]["path"]
PY
# operators and syntax are plain words: no error, and NOT excludes nothing
for q in '"' '"unbalanced' 'a AND' 'NEAR(a b' '*' '^lamp' 'text:lighthouse' '(((' 'NOT' 'OR OR' "'" '{name}:x' 'lighthouse NOT keeper' '\' 'AND' '-x' ')'; do
  for mode in keyword hybrid vector; do
    "$BIN" search --model "$MODEL" --db "$DB" --mode $mode -k 2 -- "$q" > /dev/null 2> "$T/err"
    rc=$?
    [ $rc -eq 0 ] && ok || bad "$mode search for [$q]: rc $rc $(cat "$T/err")"
  done
done
js --mode keyword -k 3 "heisenbug NOT bug" > "$T/n.json"
check "NOT is a word, not an exclusion: $(head -c 300 "$T/n.json")" python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))['results']; assert r[0]['path'].endswith('jargon-heisenbug.txt'), r" "$T/n.json"
# a 120 kB query (about what one argument may hold; 1 MB: test_pipeline_unit): bounded, no error
python3 -c "print(('lighthouse storm harbour ' * 5000)[:120000])" > "$T/big"
t0=$(date +%s.%N)
"$BIN" search --model "$MODEL" --db "$DB" --mode hybrid -k 3 -- "$(cat "$T/big")" > /dev/null 2> "$T/err"
rc=$?
t1=$(date +%s.%N)
check "a 120 kB query: rc $rc in $(python3 -c "print(round($t1 - $t0, 2))") s $(head -c 200 "$T/err")" python3 -c "import sys; sys.exit(0 if $rc == 0 and $t1 - $t0 < 20 else 1)"
# no keyword in any chunk: hybrid says so and gives the vector ranking
js --mode hybrid -k 4 "zzqxv wqkkp" > "$T/f.json"
cp "$T/err" "$T/f.err"
js --mode vector -k 4 "zzqxv wqkkp" > "$T/fv.json"
check "no keyword match falls back to meaning: $(cat "$T/err")" python3 - "$T/f.json" "$T/fv.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["results"]; v = json.load(open(sys.argv[2]))["results"]
assert [r["path"] for r in f] == [r["path"] for r in v] and all(r["keyword_rank"] is None for r in f)
PY
grep -q "no chunk holds the query's words: by meaning alone" "$T/f.err" && ok || bad "the fallback is said: $(cat "$T/f.err")"
# text output: the words marked, a document's escape sequence shown as text
"$BIN" search --model "$MODEL" --db "$DB" --mode keyword -k 1 "RED ALERT lighthouse" > "$T/t.out" 2> "$T/err"
check "snippet marks the words and escapes ESC: $(cat "$T/t.out")" python3 - "$T/t.out" <<'PY'
import sys
t = open(sys.argv[1], "rb").read()
assert b"\x1b" not in t, t
# (FTS5 reads "[31mRED" as the token "31mred": RED itself is not marked there)
assert "«ALERT»".encode() in t and "«lighthouse»".encode() in t and b"\\x1b[31m" in t, t
PY
# the text output of hybrid says which ranking found each result
"$BIN" search --model "$MODEL" --db "$DB" -k 3 "who is the March Hare" > "$T/h.out" 2> "$T/err"
check "hybrid text output: $(head -c 300 "$T/h.out")" grep -Eq "^ 1\. cosine 0\.[0-9]{2}  .*  found by both: meaning #[0-9]+, words #[0-9]+$" "$T/h.out"
"$BIN" search --model "$MODEL" --db "$DB" -k 3 --mode keyword "March Hare" > "$T/k.out" 2> "$T/err"
check "keyword text output: BM25 (nothing embedded), found by words: $(head -c 300 "$T/k.out")" grep -Eq "^ 1\. bm25 [0-9]+\.[0-9]{2}  .*  found by words #1$" "$T/k.out"
# usage errors
"$BIN" search --model "$MODEL" --db "$DB" --mode fuzzy x > /dev/null 2> "$T/err"
rc=$?
check "--mode fuzzy is a usage error: rc $rc $(cat "$T/err")" [ $rc -eq 2 ]
"$BIN" search --model "$MODEL" --db "$DB" --rrf-k 0 x > /dev/null 2> "$T/err"
rc=$?
check "--rrf-k 0 is a usage error: rc $rc" [ $rc -eq 2 ]

# a store made before the keyword index (schema 2, by today's main): searched by meaning with a
# hint, keyword mode refused with the reason; `index` migrates it in one transaction
cp "$REPO/tests/fixtures/store-v2.db" "$T/old.db"
"$BIN" search --model "$MODEL" --db "$T/old.db" -k 2 "connection pool exhausted" > "$T/o.out" 2> "$T/o.err"
check "an old store, hybrid: by meaning with a hint: $(cat "$T/o.out" "$T/o.err")" sh -c "grep -q errors.md '$T/o.out' && grep -q 'no keyword index' '$T/o.err' && grep -q 'modattn index' '$T/o.err'"
"$BIN" search --model "$MODEL" --db "$T/old.db" --mode keyword "pool" > /dev/null 2> "$T/o.err"
rc=$?
check "an old store, keyword mode: refused with the reason: rc $rc $(cat "$T/o.err")" sh -c "[ $rc -eq 1 ] && grep -q 'no keyword index' '$T/o.err'"
mkdir -p "$T/more"
printf 'Beekeepers smoke the hive before opening it.\n' > "$T/more/hive.txt"
"$BIN" index --quiet --model "$MODEL" --db "$T/old.db" "$T/more" > /dev/null 2> "$T/m.err"
check "index migrates it: $(cat "$T/m.err")" python3 -c "
import sqlite3, sys; c = sqlite3.connect(sys.argv[1])
assert c.execute('pragma user_version').fetchone()[0] == 3
assert c.execute('select count(*) from chunks_fts').fetchone()[0] == c.execute('select count(*) from chunks').fetchone()[0] == 4
assert c.execute(\"select count(*) from chunks_fts where chunks_fts match 'E4021'\").fetchone()[0] == 1" "$T/old.db"
"$BIN" search --json --model "$MODEL" --db "$T/old.db" --mode keyword -k 1 "E4021" > "$T/o.json" 2> "$T/o.err"
check "the migrated store's old chunks are found by keyword: $(head -c 300 "$T/o.json" "$T/o.err")" python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))['results']; assert r[0]['path'].endswith('errors.md')" "$T/o.json"

# --queries FILE: every line a query, answered in one batch (one embed call, one pass over the
# vectors), each query's results equal to a search of it alone, in every mode
printf 'how does write-ahead logging keep the database safe after a crash\n\n  \nE4021\na tea party with the March Hare and the Hatter\nsmoke the hive NEAR "bees\n' > "$T/queries.txt"
for mode in vector hybrid keyword; do
  js --mode $mode -k 4 --queries "$T/queries.txt" > "$T/batch.jsonl"
  check "--queries --mode $mode: each line equals the query searched alone: $(head -c 300 "$T/batch.jsonl" "$T/err")" \
    python3 - "$T/batch.jsonl" "$T/queries.txt" "$BIN" "$MODEL" "$DB" $mode <<'PY'
import json, subprocess, sys
out, qfile, binary, model, db, mode = sys.argv[1:]
qs = [l.rstrip("\n") for l in open(qfile) if l.strip()]
lines = [json.loads(l) for l in open(out)]
assert len(lines) == len(qs) == 4, (len(lines), len(qs))
for i, (q, b) in enumerate(zip(qs, lines)):
    assert b["query"] == i + 1 and b["text"] == q and b["mode"] == mode, b
    one = json.loads(subprocess.run([binary, "search", "--json", "--model", model, "--db", db, "--mode", mode, "-k", "4", q],
                                    capture_output=True, text=True, check=True).stdout)
    assert one["results"] == b["results"], (q, one["results"][:1], b["results"][:1])
PY
done
"$BIN" search --model "$MODEL" --db "$DB" -k 2 --queries - < "$T/queries.txt" > "$T/b.txt" 2> "$T/err"
check "--queries - reads standard input; text output heads each query: $(head -c 300 "$T/b.txt" "$T/err")" \
  bash -c '[ "$(grep -c "^== query [1-4]: " "$1")" = 4 ] && grep -q "^== query 2: E4021" "$1"' _ "$T/b.txt"
# bad input: clear errors, exit status 2 for usage, 1 for an unreadable file
"$BIN" search --model "$MODEL" --db "$DB" --queries "$T/none.txt" > /dev/null 2> "$T/err"; st=$?
check "--queries of a missing file: status 1 and the file named: $(cat "$T/err")" bash -c '[ "$1" = 1 ] && grep -q "none.txt" "$2"' _ $st "$T/err"
printf '\n  \n' > "$T/blank.txt"
"$BIN" search --model "$MODEL" --db "$DB" --queries "$T/blank.txt" > /dev/null 2> "$T/err"; st=$?
check "--queries of blank lines only: status 2, 'no query': $(cat "$T/err")" bash -c '[ "$1" = 2 ] && grep -q "no query" "$2"' _ $st "$T/err"
"$BIN" search --model "$MODEL" --db "$DB" --queries "$T/queries.txt" bees > /dev/null 2> "$T/err"; st=$?
check "QUERY words and --queries together: status 2: $(cat "$T/err")" bash -c '[ "$1" = 2 ] && grep -q "not both" "$2"' _ $st "$T/err"
printf 'bees\nhoney\0comb\n' > "$T/nul.txt"
"$BIN" search --model "$MODEL" --db "$DB" --queries "$T/nul.txt" > /dev/null 2> "$T/err"; st=$?
check "--queries with a NUL byte: refused, naming the line: $(cat "$T/err")" bash -c '[ "$1" != 0 ] && grep -q "line 2" "$2"' _ $st "$T/err"

# an SQLite without FTS5 (MODATTN_TEST_NO_FTS5=1): index says so, the store stays at schema 2,
# hybrid searches by meaning, keyword mode is refused
MODATTN_TEST_NO_FTS5=1 "$BIN" index --quiet --model "$MODEL" --db "$T/nofts.db" "$T/more" > /dev/null 2> "$T/nf.err"
check "index without FTS5 says so: $(cat "$T/nf.err")" grep -q "no FTS5" "$T/nf.err"
check "and makes a schema-2 store" python3 -c "
import sqlite3, sys; assert sqlite3.connect(sys.argv[1]).execute('pragma user_version').fetchone()[0] == 2" "$T/nofts.db"
MODATTN_TEST_NO_FTS5=1 "$BIN" search --model "$MODEL" --db "$T/nofts.db" -k 1 "smoke the hive" > "$T/nf.out" 2> "$T/nf.err"
check "hybrid without FTS5: by meaning: $(cat "$T/nf.out" "$T/nf.err")" grep -q "hive.txt" "$T/nf.out"
finish cli_search_modes
