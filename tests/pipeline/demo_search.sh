#!/usr/bin/env bash
# tests/pipeline/demo_search.sh MODATTN MODEL_DIR DB — the demo corpus end to end: every document
# of demo/corpus indexed (nothing skipped, no error), known questions find their document among
# the top 3 results, and a second run embeds nothing.
set -u
BIN=$1
MODEL=$2
DB=$3
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
[ -f "$MODEL/model.safetensors" ] || { echo "FAIL: no model at $MODEL: run tools/setup_model.sh" >&2; echo "demo_search: 0 passed, 1 failed"; exit 1; }
jcheck() { python3 -c "import json,sys
j=json.loads(sys.stdin.read())
sys.exit(0 if ($1) else 1)"; }

rm -f "$DB" "$DB-wal" "$DB-shm"
nfiles=$(find demo/corpus -type f ! -name '.*' | wc -l)
t0=$(date +%s)
out=$("$BIN" index --quiet --model "$MODEL" --db "$DB" --json demo/corpus 2>&1)
echo "demo_search: indexed demo/corpus in $(( $(date +%s) - t0 )) s"
if jcheck "j['files_seen']==$nfiles and j['files_indexed']==$nfiles and j['files_skipped']==0 and not j['errors']" <<<"$out"; then ok
else bad "indexing demo/corpus ($nfiles files): $out"; fi
if jcheck "j['chunks_embedded']>100" <<<"$out"; then ok; else bad "too few chunks: $out"; fi

# query|document expected in the top 3
while IFS='|' read -r query want; do
  [ -n "$query" ] || continue
  res=$("$BIN" search --model "$MODEL" --db "$DB" -k 3 --json "$query" 2>&1)
  if jcheck "any(r['path'].endswith('/$want') for r in j['results'])" <<<"$res"; then ok
  else bad "'$query' should find $want in the top 3: $(python3 -c "import json,sys; print([ (r['path'].split('/')[-1], round(r['score'],3)) for r in json.loads(sys.stdin.read())['results']])" <<<"$res" 2>&1)"; fi
done <<'EOF'
how does write-ahead logging work|sqlite-write-ahead-logging.html
should I use SQLite or a client/server database|sqlite-when-to-use.html
what happens to readers while a transaction writes to the database|sqlite-transactions.html
a girl falls down a rabbit hole|alice-ch01-down-the-rabbit-hole.txt
tea party with the Hatter and the March Hare|alice-ch07-a-mad-tea-party.html
all the world's a stage, and all the men and women merely players|as-you-like-it-act2-scene7.txt
fallen angels cast out of heaven into hell|paradise-lost-book1-opening.pdf
converting printed pages to text with optical character recognition|loc-workshop-1992-image-and-text-capture.pdf
re-running the indexer skips unchanged files and resumes after a crash|modattn-indexing.md
one skilled in circumvention of the law|devils-dictionary-l.txt
EOF

# PDF results say their page
res=$("$BIN" search --model "$MODEL" --db "$DB" -k 1 --json "fallen angels cast out of heaven into hell" 2>&1)
if jcheck "j['results'][0]['page']>=1" <<<"$res"; then ok; else bad "PDF result without a page: $res"; fi

out=$("$BIN" index --quiet --model "$MODEL" --db "$DB" --json demo/corpus 2>&1)
if jcheck "j['files_unchanged']==$nfiles and j['chunks_embedded']==0" <<<"$out"; then ok
else bad "second run should embed nothing: $out"; fi

echo "demo_search: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
