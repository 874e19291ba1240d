#!/usr/bin/env bash
# tests/pipeline/cli_hostile.sh MODATTN MODEL_DIR — the store and the indexer against a hostile
# user (issue 18):
#   8. one file, one document: `index corpus corpus/sub` with a link in sub back up, a hard link
#      and a later run through the link alone store every file once;
#   6. bounded memory: a 30 MB file of one word is indexed in a small budget; where the budget
#      does not hold a file, the error names it and the run goes on with the next file;
#   7. short write transactions: while `index` embeds a long document another writer gets the
#      store's lock at once; a writer that must wait says so and gives up after --wait; a search
#      never waits for a writer;
#  11. messages that say what is wrong: a foreign SQLite file is "not a modattn store" in search
#      as in index; a symbolic link loop in a model folder is a loop, not "missing"; a tune cache
#      entry with impossible times is ignored with a warning (tests/attn/cli_attn.sh); UTF-16
#      text files with a byte order mark are decoded, not "binary"; a store in a folder the user
#      cannot write to is searched (read alone, with a note), or, when its write-ahead log holds
#      changes, the message says how to fold them in.
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

# ---- 6: one 30 MB word (the tokenizer used about 56 bytes per byte of it: 1.7 GB)
mkdir -p "$T/word"
head -c 30000000 /dev/zero | tr '\0' 'a' > "$T/word/word.txt"
printf 'a small file about rivers and valleys\n' > "$T/word/small.txt"
"$BIN" --mem-budget 400M index --json --model "$MODEL" --db "$T/word.db" "$T/word" > "$T/w.json" 2> "$T/w.err"
check "a 30 MB word within a 400M budget: $(head -c 600 "$T/w.json" "$T/w.err")" \
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['files_indexed']==2 and not j['errors'], j" "$T/w.json"
# a budget that cannot hold the file: that file is an error, named; the next one is indexed (a
# 60 MB word, read whole: about 64 MB. The budget is what indexing the small file alone takes, by
# --stats, plus 32 MiB: measured, so that it follows what the weights cost)
mkdir -p "$T/word2" "$T/small"
head -c 60000000 /dev/zero | tr '\0' 'a' > "$T/word2/word.txt"
cp "$T/word/small.txt" "$T/word2/small.txt"
cp "$T/word/small.txt" "$T/small/small.txt"
"$BIN" --stats index --quiet --model "$MODEL" --db "$T/small.db" "$T/small" > /dev/null 2> "$T/small.stats"
need=$(awk '$1 == "total" && NF == 3 { print $3 }' "$T/small.stats")
check "index --stats gives the peak in use ($need)" [ -n "$need" -a "${need:-0}" -gt 1000000 ]
budget=$(( ${need:-0} + (32 << 20) ))
"$BIN" --mem-budget "$budget" index --json --model "$MODEL" --db "$T/word2.db" "$T/word2" > "$T/w2.json" 2> "$T/w2.err"
rc=$?
if [ $rc -eq 3 ] && python3 - "$T/w2.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["files_indexed"] == 1, j
e = j["errors"]
assert len(e) == 1 and e[0]["path"].endswith("/word.txt") and "memory budget" in e[0]["message"], e
PY
then ok; else bad "a file over the budget: rc $rc, $(head -c 800 "$T/w2.json" "$T/w2.err")"; fi

# ---- 7: the write lock is held only while a document is written, never while it is embedded
# (a probe waits up to 5 s for it: writing this document's ~450 chunks, their vectors and their
# keyword index takes ~0.1 s under ASan on a loaded 2-core machine, its embedding tens of seconds;
# 5 s leaves room for an fsync stalled by another test)
mkdir -p "$T/long"
python3 -c "
import random
random.seed(7)
w = 'river valley orchard apple stone bridge winter market harbour lantern meadow'.split()
print(' '.join(random.choice(w) for _ in range(14000)))" > "$T/long/long.txt"
DB7=$T/lock.db
"$BIN" index --quiet --chunk-tokens 32 --overlap 0 --batch 16 --model "$MODEL" --db "$DB7" "$T/long" > /dev/null 2> "$T/long.err" &
ipid=$!
python3 - "$DB7" "$ipid" > "$T/probe.out" 2>&1 <<'PY'
import os, sqlite3, sys, time
db, pid = sys.argv[1], int(sys.argv[2])
def alive():
    try:
        os.kill(pid, 0)
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:
        return False
# wait for the store to be made
while alive():
    try:
        c = sqlite3.connect(db, timeout=5.0, isolation_level=None)
        if c.execute("pragma user_version").fetchone()[0] >= 2: break
        c.close()
    except sqlite3.Error:
        pass
    time.sleep(0.02)
probes, worst, failed = 0, 0.0, 0
while alive():
    t = time.monotonic()
    try:
        c.execute("begin immediate"); c.execute("rollback")
    except sqlite3.OperationalError:
        failed += 1
    worst = max(worst, time.monotonic() - t)
    probes += 1
    time.sleep(0.05)
print(probes, failed, round(worst, 3))
PY
wait $ipid
irc=$?
read -r probes failed worst < "$T/probe.out"
if [ $irc -eq 0 ] && [ "${probes:-0}" -ge 10 ] && [ "${failed:-1}" -eq 0 ]; then ok
else bad "another writer during a long index: index rc $irc, $(cat "$T/probe.out" "$T/long.err" | head -c 400) (probes failed worst-seconds)"; fi

# a writer that must wait says so, and gives up after --wait; a search does not wait
hold() { python3 -c "
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('begin immediate')
open(sys.argv[3], 'w').close(); time.sleep(float(sys.argv[2])); c.execute('rollback')" "$DB7" "$1" "$T/held" & }
# orderings, not timings (a loaded machine may take seconds to load the model): the holder keeps the
# lock for up to 60 s and is let go only when the test says so
rm -f "$T/held"; hold 60; hpid=$!
while [ ! -e "$T/held" ]; do sleep 0.05; done
mkdir -p "$T/new"
printf 'a short new file about lanterns\n' > "$T/new/new1.txt"
"$BIN" index --wait 1 --model "$MODEL" --db "$DB7" "$T/new" > /dev/null 2> "$T/w1.err"
rc=$?
if kill -0 $hpid 2> /dev/null; then still=1; else still=0; fi
kill $hpid 2> /dev/null
# --wait 1 gave up (exit 1, saying so) while the lock was still held: it did not wait 60 s for it
if [ $rc -eq 1 ] && [ $still -eq 1 ] && grep -q "held the store's write lock for more than 1 s" "$T/w1.err" &&
   grep -q "waiting for another writer" "$T/w1.err"; then ok
else bad "index --wait 1 against a held lock: rc $rc, gave up while it was held: $still, $(cat "$T/w1.err")"; fi
wait $hpid
# a search does not wait for a writer: it ends while the writer still holds the lock (an ordering,
# not a timing: the holder keeps it for 60 s and must still be there when the search is done)
rm -f "$T/held"; hold 60; hpid=$!
while [ ! -e "$T/held" ]; do sleep 0.05; done
"$BIN" search --model "$MODEL" --db "$DB7" "river" > /dev/null 2> "$T/s7.err"
rc=$?
if kill -0 $hpid 2> /dev/null; then still=1; else still=0; fi
kill $hpid 2> /dev/null
wait $hpid 2> /dev/null
if [ $rc -eq 0 ] && [ $still -eq 1 ] && ! grep -q "waiting" "$T/s7.err"; then ok
else bad "search while another writer holds the lock: rc $rc, ended while the lock was held: $still, $(cat "$T/s7.err")"; fi
rm -f "$T/held"; hold 60; hpid=$!
while [ ! -e "$T/held" ]; do sleep 0.05; done
"$BIN" index --model "$MODEL" --db "$DB7" "$T/new" > /dev/null 2> "$T/w2.err" &
ipid=$!
# let the lock go once the index says it waits for it (60 s at most), then it must finish
for _ in $(seq 1200); do grep -q "waiting for another writer" "$T/w2.err" 2> /dev/null && break; sleep 0.05; done
kill $hpid 2> /dev/null
wait $hpid 2> /dev/null
wait $ipid
rc=$?
if [ $rc -eq 0 ] && grep -q "waiting for another writer to finish (up to 60 s" "$T/w2.err"; then ok
else bad "index waiting for a lock that is then let go: rc $rc, $(cat "$T/w2.err")"; fi

# ---- 11: somebody else's SQLite database
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()" "$T/foreign.db"
for cmd in search index; do
  if [ $cmd = search ]; then "$BIN" search --model "$MODEL" --db "$T/foreign.db" "x" > /dev/null 2> "$T/f.err"
  else "$BIN" index --model "$MODEL" --db "$T/foreign.db" "$T/c" > /dev/null 2> "$T/f.err"; fi
  rc=$?
  if [ $rc -eq 1 ] && grep -q "not a modattn store" "$T/f.err"; then ok
  else bad "$cmd on a foreign SQLite file: rc $rc, $(cat "$T/f.err")"; fi
done

# a link loop where a model file should be
mkdir -p "$T/loopmodel"
for x in "$MODEL"/*; do [ "$(basename "$x")" = config.json ] || ln -s "$(cd "$(dirname "$x")" && pwd)/$(basename "$x")" "$T/loopmodel/"; done
ln -s l2 "$T/loopmodel/l1"; ln -s l1 "$T/loopmodel/l2"; ln -s l1 "$T/loopmodel/config.json"
"$BIN" embed --model "$T/loopmodel" "hello" > /dev/null 2> "$T/loop.err"
rc=$?
if [ $rc -eq 1 ] && grep -q "config.json: a symbolic link loop" "$T/loop.err" && ! grep -q missing "$T/loop.err"; then ok
else bad "a link loop for config.json: rc $rc, $(cat "$T/loop.err")"; fi

# UTF-16 text with a byte order mark (little- and big-endian, a pair of surrogates, an HTML file)
mkdir -p "$T/u16"
python3 - "$T/u16" <<'PY'
import sys
d = sys.argv[1]
t = "The lighthouse keeper rows across the harbour at dawn 🌊\nsecond line about ropes and tides\n"
open(d + "/le.txt", "wb").write(t.encode("utf-16"))             # FF FE + little-endian
open(d + "/be.txt", "wb").write(b"\xfe\xff" + "Glaciers carve deep valleys in the northern mountains\n".encode("utf-16-be"))
open(d + "/page.html", "wb").write("<html><body><p>Beekeepers harvest honey from the hives in late summer</p></body></html>".encode("utf-16"))
PY
"$BIN" index --json --model "$MODEL" --db "$T/u16.db" "$T/u16" > "$T/u.json" 2> "$T/u.err"
check "UTF-16 files indexed, none binary: $(head -c 800 "$T/u.json" "$T/u.err")" \
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['files_indexed']==3 and not j['skipped'] and not j['errors'], j" "$T/u.json"
for q in "lighthouse:le.txt:harbour at dawn 🌊" "glaciers valleys:be.txt:Glaciers carve" "honey bees:page.html:Beekeepers harvest honey"; do
  IFS=: read -r query file text <<< "$q"
  "$BIN" search --json -k 1 --model "$MODEL" --db "$T/u16.db" "$query" > "$T/us.json" 2> "$T/us.err"
  check "UTF-16 $file found as decoded text: $(head -c 600 "$T/us.json" "$T/us.err")" python3 - "$T/us.json" "$file" "$text" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
assert r["path"].endswith("/" + sys.argv[2]) and sys.argv[3] in r["text"], r
assert "\x00" not in r["text"] and "\ufeff" not in r["text"], r
PY
done
# unchanged on the next run (the stored size is the file's, not the decoded text's)
"$BIN" index --json --model "$MODEL" --db "$T/u16.db" "$T/u16" > "$T/u2.json" 2> "$T/u2.err"
check "UTF-16 files unchanged on a second run: $(head -c 600 "$T/u2.json")" \
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['files_unchanged']==3 and j['files_indexed']==0, j" "$T/u2.json"

# a store in a folder this user cannot write to (WAL mode wants DB-shm beside it); root ignores
# folder permissions, so the reader is user nobody
if [ "$(id -u)" = 0 ] && id nobody > /dev/null 2>&1 && su nobody -s /bin/sh -c "test -x '$BIN' && test -r '$MODEL/model.safetensors'" 2> /dev/null; then
  mkdir -p "$T/ro"
  cp "$T/u16.db" "$T/ro/s.db"; cp "$T/u16.db.vec" "$T/ro/s.db.vec" 2> /dev/null
  chmod 755 "$T"; chmod 555 "$T/ro"; chmod 444 "$T/ro/s.db"*
  su nobody -s /bin/sh -c "'$BIN' search -k 1 --model '$MODEL' --db '$T/ro/s.db' 'glaciers'" > "$T/ro.out" 2> "$T/ro.err"
  rc=$?
  if [ $rc -eq 0 ] && grep -q "be.txt" "$T/ro.out" && grep -q "folder is not writable by this user: read without locks" "$T/ro.err"; then ok
  else bad "search of a store in a read-only folder: rc $rc, $(cat "$T/ro.out" "$T/ro.err" | head -c 600)"; fi
  # a write-ahead log with changes: only a writer can fold it in, and the message says how
  chmod 755 "$T/ro"; chmod 644 "$T/ro/s.db"
  python3 -c "
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute('pragma wal_autocheckpoint = 0')
c.execute(\"insert or replace into meta values ('test_marker', 'x')\")
os._exit(0)   # no close: the log keeps the change" "$T/ro/s.db"
  chmod 555 "$T/ro"; chmod 444 "$T/ro/s.db"*
  # with its -shm file beside it SQLite reads the log itself
  su nobody -s /bin/sh -c "'$BIN' search -k 1 --model '$MODEL' --db '$T/ro/s.db' 'glaciers'" > "$T/ro.out" 2> "$T/ro.err"
  rc=$?
  if [ $rc -eq 0 ] && [ -s "$T/ro/s.db-wal" ] && grep -q "be.txt" "$T/ro.out"; then ok
  else bad "a read-only folder with a write-ahead log and its -shm: rc $rc, $(cat "$T/ro.out" "$T/ro.err" | head -c 600)"; fi
  # without it (a copied store), nobody can read the log: the message says how to fold it in
  chmod 755 "$T/ro"; rm -f "$T/ro/s.db-shm"; chmod 555 "$T/ro"
  su nobody -s /bin/sh -c "'$BIN' search -k 1 --model '$MODEL' --db '$T/ro/s.db' 'glaciers'" > "$T/ro.out" 2> "$T/ro.err"
  rc=$?
  if [ $rc -eq 1 ] && [ -s "$T/ro/s.db-wal" ] && grep -q "write-ahead log" "$T/ro.err" && grep -q "run \`modattn index\` on the store once" "$T/ro.err"; then ok
  else bad "a read-only folder with a write-ahead log: rc $rc, $(ls -la "$T/ro"; cat "$T/ro.out" "$T/ro.err" | head -c 600)"; fi
  chmod 755 "$T/ro"
else
  echo "cli_hostile: not run: a store in a read-only folder (needs root to run it as user nobody, who can read $BIN and $MODEL)"
fi

finish cli_hostile
