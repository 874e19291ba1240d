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
#
# With SPARSE_DIR (a SPLADE folder: the pipeline_kill_sparse test, 10 kills), every run is `index
# --sparse SPARSE_DIR` (a resumed run leaves --sparse out once the store records the model, as a
# user's later runs do), and after every kill also: no sparse row of a chunk that does not exist,
# every chunk has its sparse rows, and each chunk's rows are exactly those a clean run gives it (same
# terms, same weights); a resumed run's `search --mode sparse` equals the clean run's.
set -u
BIN=$1
MODEL=$2
SPARSE=${3:-}
if [ -n "$SPARSE" ] && [ ! -f "$SPARSE/model.safetensors" ]; then
  echo "not available here: no SPLADE model at $SPARSE (make model)"; exit 77
fi
ROUNDS=${MODATTN_KILL_ROUNDS:-$([ -n "$SPARSE" ] && echo 10 || echo 20)}
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
[ -n "$SPARSE" ] && ARGS=(index --quiet --model "$MODEL" --sparse "$SPARSE" --db "$DB" --chunk-tokens 48 --overlap 8 --batch 6 "$C")

# a query on the store; an empty database (killed before its schema was made) has no rows
sqlq() { python3 -c "import sqlite3,sys
c=sqlite3.connect(sys.argv[1])
if c.execute('pragma user_version').fetchone()[0] == 0: sys.exit(0)
for r in c.execute(sys.argv[2]): print('|'.join(str(x) for x in r))" "$DB" "$1"; }

# a resumed run: without --sparse once the store records its sparse model (it is used by itself)
resume_args() {
  if [ -n "$SPARSE" ] && [ -n "$(sqlq "select value from meta where key = 'sparse_model_identity'")" ]; then
    printf '%s\0' index --quiet --model "$MODEL" --db "$DB" --chunk-tokens 48 --overlap 8 --batch 6 "$C"
  else
    printf '%s\0' "${ARGS[@]}"
  fi
}

# the same query through the vector file and through the store itself: the same output
same_search() {
  local a b
  a=$("$BIN" search --model "$MODEL" --db "$DB" --json -k 5 "the rabbit hole" 2>/dev/null; echo "rc=$?")
  b=$(MODATTN_VECTOR_FILE=off "$BIN" search --model "$MODEL" --db "$DB" --json -k 5 "the rabbit hole" 2>/dev/null; echo "rc=$?")
  [ "$a" = "$b" ]
}

# state check after a kill: integrity, completeness; prints the number of documents
check_state() {
  python3 - "$DB" "$SPARSE" "$T/sparse_ref.json" <<'EOF'
import json, os, sqlite3, sys
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
# sparse vectors (`index --sparse`): written in each chunk's transaction, removed with it
if sys.argv[2]:
    nchunks = c.execute("select count(*) from chunks").fetchone()[0]
    has = c.execute("select count(*) from sqlite_master where name = 'sparse'").fetchone()[0]
    if not has:
        if nchunks:
            print(nchunks, "chunks and no sparse table", file=sys.stderr); sys.exit(1)
    else:
        if nchunks and not c.execute("select count(*) from meta where key = 'sparse_model_identity'").fetchone()[0]:
            print("sparse rows but no recorded sparse model", file=sys.stderr); sys.exit(1)
        orph = c.execute("select count(*) from sparse where chunk not in (select id from chunks)").fetchone()[0]
        bare = c.execute("select count(*) from chunks where id not in (select chunk from sparse)").fetchone()[0]
        if orph or bare:
            print("sparse rows of missing chunks:", orph, "chunks without sparse rows:", bare, file=sys.stderr)
            sys.exit(1)
        # each chunk's rows are exactly a clean run's for the same text (when the reference exists)
        if os.path.exists(sys.argv[3]):
            ref = json.load(open(sys.argv[3]))
            rows = {}
            for path, seq, text, term, w in c.execute("""select d.path, k.seq, k.text, s.term, s.weight
                    from sparse s join chunks k on k.id = s.chunk join documents d on d.id = k.document"""):
                rows.setdefault("%s|%d|%s" % (path, seq, text), []).append([term, w])
            compared = 0
            for key, got in rows.items():
                if key in ref:
                    compared += 1
                    if sorted(got) != ref[key]:
                        print("sparse rows of", key[:80], "differ from a clean run's", file=sys.stderr); sys.exit(1)
            if compared * 2 < len(rows):
                print("only", compared, "of", len(rows), "chunks compared with the clean run", file=sys.stderr)
                sys.exit(1)
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
if [ -n "$SPARSE" ]; then
  # the clean run's sparse rows per chunk (path|seq|text -> sorted [term, weight]), and its sparse search
  python3 - "$DB" "$T/sparse_ref.json" <<'EOF'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
ref = {}
for path, seq, text, term, w in c.execute("""select d.path, k.seq, k.text, s.term, s.weight
        from sparse s join chunks k on k.id = s.chunk join documents d on d.id = k.document"""):
    ref.setdefault("%s|%d|%s" % (path, seq, text), []).append([term, w])
assert ref and len(ref) == c.execute("select count(*) from chunks").fetchone()[0], len(ref)
json.dump({k: sorted(v) for k, v in ref.items()}, open(sys.argv[2], "w"))
EOF
  if [ $? -eq 0 ]; then ok; else bad "the clean run with --sparse: not every chunk has sparse rows"; fi
  "$BIN" search --db "$DB" --mode sparse --json -k 8 "the rabbit hole" > "$T/sparse_ref_search.json" 2>&1 || bad "sparse search of the clean run: $(cat "$T/sparse_ref_search.json")"
fi
# the same sparse search as the clean run's: paths, places, scores
same_sparse_search() {
  [ -z "$SPARSE" ] && return 0
  "$BIN" search --db "$DB" --mode sparse --json -k 8 "the rabbit hole" > "$T/sparse_search.json" 2>&1 || return 1
  python3 - "$T/sparse_search.json" "$T/sparse_ref_search.json" <<'EOF'
import json, sys
def key(f):
    j = json.load(open(f))
    r = j["results"] if isinstance(j, dict) else j
    return [(x["path"], x["start"], x["sparse_score"]) for x in r]
a, b = key(sys.argv[1]), key(sys.argv[2])
if not a or a != b:
    print("sparse search differs from the clean run's:", a[:3], b[:3], file=sys.stderr); sys.exit(1)
EOF
}
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
    mapfile -d '' RARGS < <(resume_args)
    out=$("$BIN" "${RARGS[@]}" --json 2>&1)
    if python3 -c "import json,sys; j=json.loads(sys.stdin.read()); sys.exit(0 if j['files_unchanged']==$docs and j['files_indexed']==$N-$docs and j['files_skipped']==0 else 1)" <<<"$out"; then ok
    else bad "round $round: resumed run after $docs finished documents: $out"; fi
    if [ "$(check_state)" = "$N" ]; then ok; else bad "round $round: resumed run left an incomplete store"; fi
    "$BIN" search --model "$MODEL" --db "$DB" -k 3 "the rabbit hole" > /dev/null 2> "$T/note"
    if [ ! -s "$T/note" ] && same_search; then ok; else bad "round $round: after the resumed run the vector file is not current: $(cat "$T/note")"; fi
    if same_sparse_search; then ok; else bad "round $round: after the resumed run the sparse search differs from a clean run's"; fi
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
