#!/usr/bin/env bash
# tests/pipeline/cli_hostile.sh MODATTN MODEL_DIR — the store and the indexer against a hostile
# user (issue 18):
#   8. one file, one document: `index corpus corpus/sub` with a link in sub back up, a hard link
#      and a later run through the link alone store every file once;
#  11. messages that say what is wrong: a foreign SQLite file is "not a modattn store" in search
#      as in index.
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_hostile
scratch cli-hostile
DB=$T/s.db

# ---- 8: the same file by several names
mkdir -p "$T/c/sub"
printf 'apples and pears grow in the orchard behind the house\n' > "$T/c/fruit.txt"
printf 'the river floods the valley every spring\n' > "$T/c/sub/river.txt"
ln -s .. "$T/c/sub/up"                 # sub/up/fruit.txt is fruit.txt, sub/up/sub/... a loop
ln "$T/c/fruit.txt" "$T/c/hard.txt"     # a hard link: the same inode
"$BIN" index --json --model "$MODEL" --db "$DB" "$T/c" "$T/c/sub" > "$T/i.json" 2> "$T/i.err"
rc=$?
# exit 3: the walk met link loops (sub/up from c, sub/up/sub from sub), reported as errors
if [ $rc -eq 3 ] && python3 - "$T/i.json" "$T/c" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); c = sys.argv[2]
assert j["files_indexed"] == 2, j
assert all("symbolic link loop" in e["message"] for e in j["errors"]), j["errors"]
same = [s for s in j["skipped"] if "the same file as" in s["reason"]]
# fruit.txt reached as hard.txt and sub/up/fruit.txt (and again via sub/up/hard.txt): all skipped
# with the canonical name kept
assert all(s["reason"].endswith(c + "/fruit.txt: indexed once, under that name") or
           s["reason"].endswith(c + "/sub/river.txt: indexed once, under that name") for s in same), same
assert len(same) >= 2, j["skipped"]
PY
then ok; else bad "index corpus corpus/sub with links: rc $rc: $(head -c 800 "$T/i.json" "$T/i.err")"; fi
docs=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from documents').fetchone()[0])" "$DB")
check "2 documents stored, not $docs" [ "$docs" = 2 ]
"$BIN" search --json -k 5 --model "$MODEL" --db "$DB" "fruit trees in an orchard" > "$T/s.json" 2> "$T/s.err"
check "each hit once: $(head -c 600 "$T/s.json" "$T/s.err")" python3 - "$T/s.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
paths = [x["path"] for x in r]
assert len(paths) == len(set(paths)) == 2, paths
PY
# a later run that reaches the files only through the link finds them stored under their names
"$BIN" index --json --model "$MODEL" --db "$DB" "$T/c/sub/up/fruit.txt" > "$T/i2.json" 2> "$T/i2.err"
check "the file through the link is the stored document: $(head -c 600 "$T/i2.json" "$T/i2.err")" \
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['files_unchanged']==1 and j['files_indexed']==0, j" "$T/i2.json"
docs=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from documents').fetchone()[0])" "$DB")
check "still 2 documents after the run through the link, not $docs" [ "$docs" = 2 ]

# ---- 11: somebody else's SQLite database
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()" "$T/foreign.db"
for cmd in search index; do
  if [ $cmd = search ]; then "$BIN" search --model "$MODEL" --db "$T/foreign.db" "x" > /dev/null 2> "$T/f.err"
  else "$BIN" index --model "$MODEL" --db "$T/foreign.db" "$T/c" > /dev/null 2> "$T/f.err"; fi
  rc=$?
  if [ $rc -eq 1 ] && grep -q "not a modattn store" "$T/f.err"; then ok
  else bad "$cmd on a foreign SQLite file: rc $rc, $(cat "$T/f.err")"; fi
done

finish cli_hostile
