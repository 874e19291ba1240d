#!/usr/bin/env bash
# tests/pipeline/kill_index.sh MODATTN MODEL_DIR — crash safety of `modattn index`.
#
# 20 times (20 kills that hit a running indexer; rounds whose run had finished do not count):
# start indexing a corpus of 30 small documents (small chunks and batches, so commits
# are spread over the run), kill -9 it after a random delay within the time a full run takes,
# then check: PRAGMA integrity_check says ok; every stored document is complete (its nchunks
# chunks, each with its vector); no document finished by an earlier run was embedded again (it
# keeps its row id); a search through the vector file (DB.vec, written at the end of a run) gives
# exactly what a search of the store itself gives (a stale or half-written file is never read).
# The keyword index (FTS5, schema 3) holds exactly the chunk rows after every kill, each with its
# text, and passes FTS5's own integrity-check.
# Every fourth time, and at the end, a resumed run completes and reports exactly the finished
# documents as unchanged and the others as indexed, and leaves a current vector file. The store starts afresh
# once it is complete. Then the vector file's own updates are killed at each of their stages
# (below). The random seed is printed; MODATTN_KILL_SEED=N replays a run.
set -u
BIN=$1
MODEL=$2
ROUNDS=${MODATTN_KILL_ROUNDS:-20}
SEED=${MODATTN_KILL_SEED:-$(( $(date +%s) % 32768 ))}
RANDOM=$SEED
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
[ -f "$MODEL/model.safetensors" ] || { echo "FAIL: no model at $MODEL: run tools/setup_model.sh" >&2; echo "kill_index: 0 passed, 1 failed"; exit 1; }
echo "kill_index: seed $SEED (MODATTN_KILL_SEED=$SEED replays it)"

T=$(mktemp -d /tmp/modattn-kill-XXXXXX)
trap 'rm -rf "$T"' EXIT
C=$T/corpus
DB=$T/kill.db
mkdir -p "$C"
# 30 documents of about 700 bytes, cut from public-domain texts of the demo corpus
python3 - "$C" demo/corpus/alice-ch01-down-the-rabbit-hole.txt demo/corpus/devils-dictionary-l.txt <<'EOF'
import sys
out, srcs = sys.argv[1], sys.argv[2:]
words = []
for s in srcs:
    words += open(s, encoding='utf-8').read().split()
n = 0
for i in range(0, len(words), 120):
    if n == 30:
        break
    open('%s/doc%02d.txt' % (out, n), 'w').write(' '.join(words[i:i + 120]) + '\n')
    n += 1
assert n == 30, n
EOF
N=30
ARGS=(index --quiet --model "$MODEL" --db "$DB" --chunk-tokens 48 --overlap 8 --batch 6 "$C")

# a query on the store; an empty database (killed before its schema was made) has no rows
sqlq() { python3 -c "import sqlite3,sys
c=sqlite3.connect(sys.argv[1])
if c.execute('pragma user_version').fetchone()[0] == 0: sys.exit(0)
for r in c.execute(sys.argv[2]): print('|'.join(str(x) for x in r))" "$DB" "$1"; }

# the same query through the vector file and through the store itself: the same output
same_search() {
  local a b
  a=$("$BIN" search --model "$MODEL" --db "$DB" --json -k 5 "the rabbit hole" 2>/dev/null; echo "rc=$?")
  b=$(MODATTN_VECTOR_FILE=off "$BIN" search --model "$MODEL" --db "$DB" --json -k 5 "the rabbit hole" 2>/dev/null; echo "rc=$?")
  [ "$a" = "$b" ]
}

# state check after a kill: integrity, completeness; prints the number of documents
check_state() {
  python3 - "$DB" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
r = c.execute("pragma integrity_check").fetchall()
if r != [("ok",)]:
    print("integrity_check:", r, file=sys.stderr); sys.exit(1)
# killed before the schema transaction committed: an empty database, which the next run sets up
if c.execute("pragma user_version").fetchone()[0] == 0:
    if c.execute("select count(*) from sqlite_master").fetchone()[0] != 0:
        print("tables without a schema version", file=sys.stderr); sys.exit(1)
    print(0); sys.exit(0)
bad = c.execute("""select d.path, d.nchunks,
    (select count(*) from chunks where document = d.id),
    (select count(*) from embeddings e join chunks k on k.id = e.chunk where k.document = d.id)
    from documents d""").fetchall()
for path, n, nc, ne in bad:
    if not (n == nc == ne and n > 0):
        print("incomplete document", path, n, nc, ne, file=sys.stderr); sys.exit(1)
orphans = c.execute("select count(*) from chunks where document not in (select id from documents)").fetchone()[0]
orphans += c.execute("select count(*) from embeddings where chunk not in (select id from chunks)").fetchone()[0]
if orphans:
    print("orphan rows:", orphans, file=sys.stderr); sys.exit(1)
# the keyword index (schema 3) holds exactly the chunks, each with its own text, and FTS5 finds
# nothing wrong in it
if c.execute("pragma user_version").fetchone()[0] >= 3:
    diff = c.execute("""select (select count(*) from chunks c left join chunks_fts f on f.rowid = c.id
                                where f.rowid is null or f.text != c.text)
                             + (select count(*) from chunks_fts f left join chunks c on c.id = f.rowid
                                where c.id is null)""").fetchone()[0]
    if diff:
        print("keyword index and chunks differ in", diff, "rows", file=sys.stderr); sys.exit(1)
    try:
        c.execute("insert into chunks_fts(chunks_fts) values('integrity-check')")
    except sqlite3.DatabaseError as e:
        print("FTS5 integrity-check:", e, file=sys.stderr); sys.exit(1)
print(len(bad))
EOF
}

# a full run first: it must succeed, and it gives the time window for the kills
t0=$(date +%s%N)
out=$("$BIN" "${ARGS[@]}" --json 2>&1)
t1=$(date +%s%N)
FULL_MS=$(( (t1 - t0) / 1000000 ))
if python3 -c "import json,sys; j=json.loads(sys.stdin.read()); sys.exit(0 if j['files_indexed']==$N else 1)" <<<"$out"; then ok
else bad "full run: $out"; fi
echo "kill_index: a full run takes $FULL_MS ms"
rm -f "$DB" "$DB-wal" "$DB-shm" "$DB.vec"

landed=0
round=0
while [ "$landed" -lt "$ROUNDS" ] && [ "$round" -lt $((ROUNDS * 2 + 10)) ]; do
  round=$((round + 1))
  if [ -f "$DB" ] && [ "$(sqlq 'select count(*) from documents')" = "$N" ]; then
    rm -f "$DB" "$DB-wal" "$DB-shm" "$DB.vec"
  fi
  before=""
  [ -f "$DB" ] && before=$(sqlq 'select path, id from documents order by path')
  # within the time the rest of the work should take (the model loads in every run)
  done_docs=0
  [ -f "$DB" ] && done_docs=$(sqlq 'select count(*) from documents')
  [ -n "$done_docs" ] || done_docs=0
  window=$(( FULL_MS * (N - done_docs) / N + 150 ))
  delay_ms=$(( RANDOM % window + 20 ))
  "$BIN" "${ARGS[@]}" >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if kill -9 "$pid" 2>/dev/null; then landed=$((landed + 1)); fi
  wait "$pid" 2>/dev/null
  docs=$(check_state)
  if [ $? -ne 0 ]; then bad "round $round (killed after $delay_ms ms): inconsistent store"; continue; fi
  ok
  if [ "$docs" -gt 0 ]; then
    if same_search; then ok; else bad "round $round: a search through the vector file differs from the store's"; fi
  fi
  # documents finished earlier are still the same rows: not embedded again
  if [ -n "$before" ]; then
    now=$(sqlq 'select path, id from documents order by path')
    missing=$(comm -23 <(printf '%s\n' "$before") <(printf '%s\n' "$now"))
    if [ -z "$missing" ]; then ok; else bad "round $round: finished documents were rewritten: $missing"; fi
  fi
  echo "kill_index: round $round: killed after $delay_ms ms, $docs of $N documents complete"
  if [ $((round % 4)) -eq 0 ] || [ "$landed" -eq "$ROUNDS" ]; then
    out=$("$BIN" "${ARGS[@]}" --json 2>&1)
    if python3 -c "import json,sys; j=json.loads(sys.stdin.read()); sys.exit(0 if j['files_unchanged']==$docs and j['files_indexed']==$N-$docs and j['files_skipped']==0 else 1)" <<<"$out"; then ok
    else bad "round $round: resumed run after $docs finished documents: $out"; fi
    if [ "$(check_state)" = "$N" ]; then ok; else bad "round $round: resumed run left an incomplete store"; fi
    "$BIN" search --model "$MODEL" --db "$DB" -k 3 "the rabbit hole" > /dev/null 2> "$T/note"
    if [ ! -s "$T/note" ] && same_search; then ok; else bad "round $round: after the resumed run the vector file is not current: $(cat "$T/note")"; fi
  fi
done
# The vector file's own updates, killed at each stage for certain (MODATTN_TEST_CRASH_POINT, see
# pipeline/vecfile.c): the store changes (a document changed, one added, one removed), the update
# is killed, and then: the store is whole, a search gives the store's results (the file, torn, is
# not read, and the search says why), and the next run leaves a current file. First a plain
# append, which must be an append.
vec_round() { # $1: crash point ("" for none), $2: what the next finished run must report
  local cp=$1 want=$2 k=$3
  printf ' changed %s\n' "$k" >> "$C/doc05.txt"
  printf 'a new document about the rabbit hole, number %s\n' "$k" > "$C/new$k.txt"
  rm -f "$C/doc$((10 + k)).txt"
  [ "$cp" = vecfile.rewrite ] && rm -f "$DB.vec"
  if [ -n "$cp" ]; then
    (MODATTN_TEST_CRASH_POINT=$cp "$BIN" "${ARGS[@]}" --prune >/dev/null 2>&1) 2>/dev/null
    rc=$?
    if [ "$rc" -eq 137 ]; then ok; else bad "$cp: the run was not killed at its crash point (exit $rc)"; fi
    if check_state >/dev/null; then ok; else bad "$cp: inconsistent store after the kill"; fi
    if same_search; then ok; else bad "$cp: a search through the torn vector file differs from the store's"; fi
    "$BIN" search --model "$MODEL" --db "$DB" -k 3 "the rabbit hole" > /dev/null 2> "$T/note"
    if grep -q "vector file" "$T/note"; then ok; else bad "$cp: the search did not say why it read the store: $(cat "$T/note")"; fi
    [ "$cp" = vecfile.rewrite ] && { if ls "$DB".vec.tmp.* >/dev/null 2>&1; then ok; else bad "$cp: no temporary file left"; fi; }
  fi
  out=$("$BIN" "${ARGS[@]}" --prune --json 2>&1)
  got=$(python3 -c "import json,sys; print(json.loads(sys.stdin.read())['vector_file'])" <<<"$out" 2>/dev/null)
  if [ "$got" = "$want" ]; then ok; else bad "after ${cp:-a plain change}: vector_file '$got', expected '$want': $out"; fi
  "$BIN" search --model "$MODEL" --db "$DB" -k 3 "the rabbit hole" > /dev/null 2> "$T/note"
  if [ ! -s "$T/note" ] && same_search; then ok; else bad "after ${cp:-a plain change}: the vector file is not current or differs: $(cat "$T/note")"; fi
  if ls "$DB".vec.tmp.* >/dev/null 2>&1; then bad "after ${cp:-a plain change}: temporary files left"; else ok; fi
}
vec_round "" appended 0
k=1
for cp in vecfile.segment vecfile.mask vecfile.header vecfile.rewrite; do
  vec_round "$cp" written $k
  echo "kill_index: killed at $cp: detected, then rewritten"
  k=$((k + 1))
done

# the kills must have hit a running indexer, or this test tested nothing
if [ "$landed" -ge "$ROUNDS" ]; then ok; else bad "only $landed kills in $round rounds hit a running indexer"; fi
echo "kill_index: $landed kills in $round rounds hit a running indexer"
echo "kill_index: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
