#!/usr/bin/env bash
# tests/pipeline/cli_index.sh MODATTN MODEL_DIR — `modattn index` and `modattn search` as a user
# runs them: incremental runs (unchanged, touched, changed, deleted with --prune), awkward files
# (invalid UTF-8, empty, binary, over the size cap, FIFO, socket, dangling link, link loops,
# unreadable), a model mismatch, search output, and the progress line on a terminal.
#
# Unreadable files: tests run as root in CI, where chmod 000 does not stop reads. The root-proof
# unreadable entries are a dangling symbolic link and symbolic-link loops (stat fails: an error,
# counted, listed) and a FIFO and a socket (skipped by type, never opened). chmod 000 is tested in
# addition when not running as root.
set -u
BIN=$1
MODEL=$2
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { # check DESCRIPTION CONDITION-COMMAND...
  local what=$1
  shift
  if "$@"; then ok; else bad "$what"; fi
}
[ -f "$MODEL/model.safetensors" ] || { echo "FAIL: no model at $MODEL: run tools/setup_model.sh" >&2; echo "cli_index: 0 passed, 1 failed"; exit 1; }

T=$(mktemp -d /tmp/modattn-cli-index-XXXXXX)
trap 'chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT
DB=$T/store.db
IDX=("$BIN" index --model "$MODEL" --db "$DB")
SRCH=("$BIN" search --model "$MODEL" --db "$DB")

# jq-like checks with python: jcheck 'EXPR' <<<"$json"
jcheck() {
  python3 -c "import json,sys
j=json.loads(sys.stdin.read())
sys.exit(0 if ($1) else 1)"
}
sql() { python3 -c "import sqlite3,sys
c=sqlite3.connect(sys.argv[1])
for r in c.execute(sys.argv[2]): print('|'.join(str(x) for x in r))" "$@"; }

# runs the indexer with --json; sets OUT, ERR and RC
index_json() {
  OUT=$("${IDX[@]}" --json "$@" 2>"$T/err")
  RC=$?
  ERR=$(cat "$T/err")
}
expect_counts() { # expect_counts WHAT seen indexed unchanged skipped chunks>0(1/0/-)
  local what=$1
  local expr="j['files_seen']==$2 and j['files_indexed']==$3 and j['files_unchanged']==$4 and j['files_skipped']==$5"
  [ "$6" = 1 ] && expr="$expr and j['chunks_embedded']>0"
  [ "$6" = 0 ] && expr="$expr and j['chunks_embedded']==0"
  if jcheck "$expr" <<<"$OUT"; then ok; else bad "$what: counts: $OUT / stderr: $ERR"; fi
}

# ---- usage
out=$("$BIN" index --help 2>&1); check "index --help" grep -q "usage: modattn index" <<<"$out"
out=$("$BIN" search --help 2>&1); check "search --help" grep -q "usage: modattn search" <<<"$out"
"$BIN" index >/dev/null 2>&1; check "index without PATH exits 2" test $? -eq 2
"$BIN" index --frobnicate x >/dev/null 2>&1; check "unknown option exits 2" test $? -eq 2
"$BIN" index --chunk-tokens abc x >/dev/null 2>&1; check "bad --chunk-tokens exits 2" test $? -eq 2
"$BIN" search >/dev/null 2>&1; check "search without QUERY exits 2" test $? -eq 2
"$BIN" search -k 0 q >/dev/null 2>&1; check "search -k 0 exits 2" test $? -eq 2
out=$("${SRCH[@]}" hello 2>&1); rc=$?
check "search on a missing store fails with a hint ($out)" test $rc -eq 1 -a -n "$(grep 'run `modattn index` first' <<<"$out")"
check "search on a missing store does not create it" test ! -e "$DB"
out=$("${IDX[@]}" --chunk-tokens 300 "$T" 2>&1)
check "--chunk-tokens over max_seq_length refused ($out)" grep -q "must be in \[3, 256\]" <<<"$out"
out=$("${IDX[@]}" --chunk-tokens 10 --overlap 8 "$T" 2>&1)
check "--overlap >= window refused ($out)" grep -q "must be smaller" <<<"$out"

# ---- a small tree
D=$T/docs
mkdir -p "$D/sub" "$D/.hidden"
cat >"$D/fox.txt" <<'EOF'
The quick brown fox jumps over the lazy dog. Foxes are small omnivorous mammals
that live in forests, grasslands and cities.
EOF
cat >"$D/sub/db.md" <<'EOF'
# Databases

SQLite keeps a whole database in a single file and uses a write-ahead log for crash safety.
EOF
cat >"$D/page.html" <<'EOF'
<html><head><title>Baking bread</title><style>body{font:serif}</style>
<script>console.log("never indexed")</script></head>
<body><h1>Baking bread</h1><p>Knead the dough, let it rise for an hour, then bake it at
220&nbsp;&deg;C until the crust is golden.</p><!-- secret comment --></body></html>
EOF
printf 'Gardening notes: water tomatoes in the morning and mulch the beds.\n' >"$D/sub/notes"
printf 'hidden file text\n' >"$D/.hidden/h.txt"

index_json "$D"
check "first run exits 0 ($ERR)" test "$RC" -eq 0
expect_counts "first run" 4 4 0 0 1
check "hidden folders are not walked" test -z "$(sql "$DB" "select path from documents where path like '%hidden%'")"
check "stderr is quiet without a terminal (no progress line)" test -z "$(printf '%s' "$ERR" | tr -d '\n')"
check "integrity_check ok" test "$(sql "$DB" 'pragma integrity_check')" = ok
check "WAL mode" test "$(sql "$DB" 'pragma journal_mode')" = wal
check "schema version 3" test "$(sql "$DB" 'pragma user_version')" = 3
check "html kind" test "$(sql "$DB" "select kind from documents where path like '%page.html'")" = html
check "html text: no script, style or comment" test -z "$(sql "$DB" "select text from chunks where text like '%never indexed%' or text like '%secret%' or text like '%font:serif%'")"
check "html entities decoded" test -n "$(sql "$DB" "select text from chunks where text like '%220 °C%'")"
check "every chunk has its embedding" test "$(sql "$DB" 'select count(*) from chunks')" = "$(sql "$DB" 'select count(*) from embeddings')"
check "the model is recorded" test "$(sql "$DB" "select value from meta where key='model_name'")" = all-MiniLM-L6-v2
# chunk byte ranges of a text file point at the file's bytes
python3 - "$DB" "$D/fox.txt" <<'EOF' && ok || bad "chunk byte ranges of fox.txt"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
raw = open(sys.argv[2], 'rb').read()
rows = c.execute("select start_byte, end_byte, text, line from chunks join documents d on d.id = document where d.path = ?", (sys.argv[2],)).fetchall()
assert rows, "no chunk"
for a, b, t, line in rows:
    assert raw[a:b].decode() == t, (a, b, t)
    assert line == raw[:a].count(b'\n') + 1
EOF

# unchanged: nothing re-embedded
index_json "$D"
expect_counts "second run" 4 0 4 0 0
# touched, same content: unchanged through the content hash, mtime updated
before=$(sql "$DB" "select mtime_ns from documents where path like '%fox.txt'")
touch -d '2001-02-03 04:05:06' "$D/fox.txt"
index_json "$D"
expect_counts "touched file" 4 0 4 0 0
after=$(sql "$DB" "select mtime_ns from documents where path like '%fox.txt'")
check "touched file: mtime updated ($before -> $after)" test "$before" != "$after"
id_fox=$(sql "$DB" "select id from documents where path like '%fox.txt'")
# changed content: re-embedded; the others untouched
printf 'SQLite keeps a whole database in one file; its write-ahead log makes commits atomic.\nVacuum reclaims space.\n' >>"$D/sub/db.md"
id_db=$(sql "$DB" "select id from documents where path like '%db.md'")
index_json "$D"
expect_counts "changed file" 4 1 3 0 1
check "changed file got a new row" test "$(sql "$DB" "select id from documents where path like '%db.md'")" != "$id_db"
check "unchanged file kept its row" test "$(sql "$DB" "select id from documents where path like '%fox.txt'")" = "$id_fox"
# other chunking re-embeds everything
index_json --chunk-tokens 16 --overlap 4 "$D"
expect_counts "other chunking" 4 4 0 0 1
check "small chunks: several chunks for fox.txt" test "$(sql "$DB" "select nchunks from documents where path like '%fox.txt'")" -gt 1
python3 - "$DB" <<'EOF' && ok || bad "chunks of 16 tokens hold at most 16 tokens and overlap"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for doc, in c.execute("select id from documents"):
    rows = c.execute("select start_byte, end_byte, ntokens from chunks where document = ? order by seq", (doc,)).fetchall()
    for i, (a, b, n) in enumerate(rows):
        assert 3 <= n <= 16, n
        if i:
            assert a > rows[i - 1][0] and a < rows[i - 1][1], (rows[i - 1], rows[i])
EOF
index_json "$D"
expect_counts "back to default chunking" 4 4 0 0 1
# deleted file: kept without --prune, removed with it
rm "$D/sub/notes"
index_json "$D"
expect_counts "deleted file, no --prune" 3 0 3 0 0
check "deleted file still stored without --prune" test "$(sql "$DB" 'select count(*) from documents')" = 4
index_json --prune "$D"
check "--prune removes it" jcheck "j['files_pruned']==1" <<<"$OUT"
check "after --prune: 3 documents" test "$(sql "$DB" 'select count(*) from documents')" = 3
check "after --prune: no orphan chunks" test "$(sql "$DB" 'select count(*) from chunks where document not in (select id from documents)')" = 0
check "after --prune: no orphan vectors" test "$(sql "$DB" 'select count(*) from embeddings where chunk not in (select id from chunks)')" = 0

# the store's own files are never indexed, even inside the walked folder or reached by a link
ln -s "$D" "$D/sub/back"
OUT=$("$BIN" index --model "$MODEL" --db "$D/own.db" --json "$D" 2>/dev/null)
check "own store not indexed ($OUT)" jcheck "j['files_seen']==3 + 1 and not any('own.db' in e['path'] for e in j['skipped'] + j['errors'])" <<<"$OUT"
rm -f "$D/own.db"* "$D/sub/back"

# ---- awkward files, all in one run: none stops it
A=$T/awkward
mkdir -p "$A/loopdir"
printf 'Good text about mountains, rivers and valleys.\n' >"$A/good.txt"
printf 'caf\xe9 cr\xe8me: Latin-1 bytes, a truncated \xe2\x82 sequence and \xff\xfe bytes in valid text.\n' >"$A/invalid-utf8.txt"
: >"$A/empty.txt"
head -c 20000 /dev/urandom >"$A/random.bin"
printf '\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00' >"$A/program"
truncate -s 101M "$A/huge.txt" # sparse: no disk, over the 64 MiB cap, never read
mkfifo "$A/fifo"
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$A/socket"
ln -s does-not-exist "$A/dangling"
ln -s self-loop "$A/self-loop"
ln -s .. "$A/loopdir/up"
printf 'A small file that the size cap option rejects when it is set very low.\n' >"$A/smallcap.txt"
unreadable=0
if [ "$(id -u)" != 0 ]; then
  printf 'secret\n' >"$A/unreadable.txt"
  chmod 000 "$A/unreadable.txt"
  unreadable=1
else
  echo "note: running as root: chmod 000 does not stop reads; unreadable = dangling link and link loops, FIFO and socket skipped by type" >&2
fi
index_json --prune "$A"
check "awkward run exits 3 (done, with unreadable entries) ($RC: $ERR)" test "$RC" -eq 3
# seen: good invalid empty random program huge fifo socket dangling self-loop loopdir/up smallcap (+unreadable)
seen=$((12 + unreadable))
check "awkward counts ($OUT)" jcheck "j['files_seen']==$seen and j['files_indexed']==3 and j['files_skipped']==$((seen - 3)) and len(j['errors'])==$((3 + unreadable))" <<<"$OUT"
for p in "dangling:dangling symbolic link" "self-loop:symbolic link loop" "loopdir/up:symbolic link loop"; do
  check "error listed for ${p%%:*}" jcheck "any(e['path'].endswith('/${p%%:*}') and '${p#*:}' in e['message'] for e in j['errors'])" <<<"$OUT"
done
[ $unreadable = 1 ] && check "chmod 000 file is an error" jcheck "any(e['path'].endswith('unreadable.txt') and 'Permission denied' in e['message'] for e in j['errors'])" <<<"$OUT"
for p in "empty.txt:empty file" "random.bin:binary file" "program:an ELF executable or library (unsupported format)" "huge.txt:over the size cap" "fifo:a FIFO" "socket:a socket"; do
  check "skip listed for ${p%%:*}" jcheck "any(e['path'].endswith('/${p%%:*}') and '${p#*:}' in e['reason'] for e in j['skipped'])" <<<"$OUT"
done
python3 - "$DB" "$A/invalid-utf8.txt" <<'EOF' && ok || bad "invalid UTF-8: U+FFFD in the stored text, ranges on the raw bytes"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
raw = open(sys.argv[2], 'rb').read()
(a, b, t), = c.execute("select start_byte, end_byte, text from chunks join documents d on d.id = document where d.path = ?", (sys.argv[2],)).fetchall()
assert '\ufffd' in t, t
assert raw[a:b].decode('utf-8', 'replace') == t, (raw[a:b], t)
EOF
out=$("${IDX[@]}" "$A" 2>&1)
check "messages name the file and the reason" grep -q "huge.txt: skipped (.*over the size cap of 67108864 bytes" <<<"$out"
check "errors are printed without --json" grep -q "dangling: dangling symbolic link" <<<"$out"
index_json --max-file-size 20 "$A/smallcap.txt"
check "--max-file-size skips a small file" jcheck "j['files_skipped']==1 and 'size cap of 20 bytes' in j['skipped'][0]['reason']" <<<"$OUT"
# a file that turns binary loses its old entries
cp "$A/good.txt" "$A/turns-binary.txt"
index_json "$A/turns-binary.txt"
check "turns-binary indexed first" jcheck "j['files_indexed']==1" <<<"$OUT"
head -c 3000 /dev/urandom >"$A/turns-binary.txt"
index_json "$A/turns-binary.txt"
check "file turned binary: skipped, old entries removed" jcheck "j['files_skipped']==1 and 'old entries removed' in j['skipped'][0]['reason']" <<<"$OUT"
check "no entries left for the binary file" test "$(sql "$DB" "select count(*) from documents where path like '%turns-binary%'")" = 0
# a path argument that does not exist
index_json "$T/nope"
check "missing PATH is an error, exit 3" test "$RC" -eq 3
check "missing PATH listed" jcheck "j['errors'][0]['path'].endswith('nope') and 'No such file' in j['errors'][0]['message']" <<<"$OUT"

# ---- search
out=$("${SRCH[@]}" --json -k 2 how to bake bread 2>&1)
check "search --json: 2 results, best is page.html ($out)" jcheck "len(j['results'])==2 and j['results'][0]['path'].endswith('page.html') and j['results'][0]['rank']==1 and j['results'][0]['score']>=j['results'][1]['score'] and all(set(r)>={'rank','score','path','start','end','text'} for r in j['results'])" <<<"$out"
out=$("${SRCH[@]}" -k 3 "crash safety of a database file" 2>&1)
check "search text output: rank, cosine, path, location, who found it ($out)" grep -Eq '^ 1\. cosine -?[01]\.[0-9]{2}  .*db\.md  \(line [0-9]+, bytes [0-9]+-[0-9]+\)  found by (both: meaning #[0-9]+, words #[0-9]+|meaning #[0-9]+|words #[0-9]+)$' <<<"$out"
check "search text output: snippet line" grep -q "^    .*SQLite" <<<"$out"
out=$("${SRCH[@]}" -k 1000 "anything" --json 2>"$T/err")  # stderr: "no chunk holds the query's words"
check "-k larger than the store returns every chunk" jcheck "len(j['results'])==$(sql "$DB" 'select count(*) from chunks')" <<<"$out"

# ---- another model is refused, for indexing and for search
cp "$DB" "$T/other.db"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"update meta set value='ffffffffffffffff' where key in ('model_weights_hash', 'model_identity')\"); c.execute(\"update models set weights_hash='ffffffffffffffff'\"); c.commit()" "$T/other.db"
out=$("$BIN" index --model "$MODEL" --db "$T/other.db" "$D" 2>&1); rc=$?
check "index with another model: exit 1 ($rc)" test $rc -eq 1
check "index with another model: clear message ($out)" grep -q "holds embeddings of model all-MiniLM-L6-v2 (weights ffffffffffffffff, identity ffffffffffffffff, 384 dimensions), not of the model in use" <<<"$out"
out=$("$BIN" search --model "$MODEL" --db "$T/other.db" fox 2>&1); rc=$?
check "search with another model refused ($rc: $out)" test $rc -eq 1 -a -n "$(grep 'cannot be compared' <<<"$out")"
printf 'not a database at all, only text, long enough for SQLite to look at its header bytes\n' >"$T/text.db"
out=$("$BIN" index --model "$MODEL" --db "$T/text.db" "$D" 2>&1); rc=$?
check "a --db that is not a database is refused ($rc: $out)" test $rc -eq 1 -a -n "$(grep 'text.db' <<<"$out")"

# ---- progress on a terminal: one updating line on stderr; none with --quiet
rm -f "$T/tty.db"*
script -qec "'$BIN' index --model '$MODEL' --db '$T/tty.db' '$D' 2>&1 >/dev/null" /dev/null >"$T/tty.out" 2>&1
check "progress line on a terminal" grep -q "indexing: [0-9]*/3 files .* tok/s  ETA" "$T/tty.out"
check "progress line is updated in place" grep -q $'\r' "$T/tty.out"
rm -f "$T/tty.db"*
script -qec "'$BIN' index --quiet --model '$MODEL' --db '$T/tty.db' '$D' 2>&1 >/dev/null" /dev/null >"$T/tty.out" 2>&1
check "--quiet: no progress line" test -z "$(grep 'indexing:' "$T/tty.out")"

# ---- --stats shows the index memory of a search
out=$("${SRCH[@]}" --stats fox 2>&1 >/dev/null)
check "--stats lists the index category" grep -q "index" <<<"$out"

echo "cli_index: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
