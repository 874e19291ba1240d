#!/usr/bin/env bash
# tests/pipeline/cli_watch.sh MODATTN MODEL_DIR — `modattn index --watch`: a file added, changed,
# removed; a new folder; a flood of 150 files written at once; a file rewritten while passes run;
# the watched folder removed and made again; kill -9 in the middle of a pass then a new watch;
# SIGTERM and SIGINT stop it with exit 0. After each step the store must hold exactly the files
# on disk, each once, with their current text (compared with `modattn export`), and pass
# PRAGMA integrity_check.
set -u
BIN=$(realpath "$1")
MODEL=$(realpath "$2")
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_watch
scratch cli-watch
D=$T/docs
DB=$T/s.db
mkdir -p "$D"
echo "the zebra herd crosses the river" > "$D/a.txt"
echo "penguins huddle against the cold" > "$D/b.txt"
PID=
# start: a watch, returning once it says its watches are in place (after its first pass): a file
# changed before that makes no event, and a settle that follows the first pass alone could pass
# before them (a race of a few ms, wider on a loaded machine)
watching() { local n; n=$(grep -c "index --watch: watching" "$T/err.txt" 2>/dev/null); echo "${n:-0}"; }
start() {
  local before
  before=$(watching)
  "$BIN" index --watch --debounce 0.2 --batch 4 --model "$MODEL" --db "$DB" "$D" >> "$T/out.txt" 2>> "$T/err.txt" &
  PID=$!
  for _ in $(seq 1 480); do
    [ "$(watching)" -gt "$before" ] && return
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.25
  done
  bad "the watch did not say it was watching within 120 s: $(tail -n 3 "$T/err.txt")"
}
# agrees: the store holds exactly the files under $D (each once, its current text), and is sound
agrees() {
  "$BIN" export --no-vectors --db "$DB" > "$T/e.jsonl" 2>/dev/null || return 1
  python3 - "$T/e.jsonl" "$D" "$DB" <<'PY'
import json, os, sqlite3, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
on_disk = {}
for dp, dn, fn in os.walk(sys.argv[2]):
    for f in fn:
        p = os.path.join(dp, f)
        on_disk[p] = open(p, "rb").read()
stored = {}
for r in rows:
    stored.setdefault(r["path"], []).append(r)
if set(stored) != set(on_disk):
    sys.exit(1)
for p, rs in stored.items():
    if sorted(r["seq"] for r in rs) != list(range(len(rs))):  # every chunk once
        sys.exit(1)
    if not all(on_disk[p][r["start"]:r["end"]].decode() == r["text"] for r in rs):  # its current text
        sys.exit(1)
db = sqlite3.connect(sys.argv[3])
if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
    sys.exit(1)
PY
}
# settle DESCRIPTION: within 60 s the store agrees with the folder
settle() {
  for _ in $(seq 1 240); do agrees && { ok; return; }; sleep 0.25; done
  bad "$1: the store does not agree with the folder: $(python3 -c 'import json,sys; print(sorted((json.loads(l)["path"].rsplit("/docs/",1)[1]) for l in open(sys.argv[1]))[:20])' "$T/e.jsonl" 2>&1) / $(cd "$D" 2>/dev/null && find . -type f | sort | head -20 | tr '\n' ' ')"
}

start
settle "first pass"
echo "walruses sun themselves on the ice" > "$D/c.txt"
settle "a file added"
echo "the zebra herd rests by the water hole" > "$D/a.txt"
settle "a file changed"
rm "$D/b.txt"
settle "a file removed"
mkdir -p "$D/new/deeper"
echo "a lighthouse keeper counts ships" > "$D/new/deeper/d.txt"
settle "a new folder"
# a flood: 150 files at once, then one of them rewritten again and again while passes run
python3 - "$D/flood" <<'PY'
import os, sys
os.makedirs(sys.argv[1])
for i in range(150):
    open(os.path.join(sys.argv[1], "f%03d.txt" % i), "w").write("flood file number %d about the sea and ships" % i)
PY
for i in $(seq 1 20); do echo "version $i of a file that keeps changing while it is read" > "$D/flood/f000.txt"; sleep 0.05; done
settle "a flood of 150 files and a file changing meanwhile"
# the watched folder removed, then made again
mv "$D" "$T/away"
for _ in $(seq 1 240); do
  "$BIN" ls --json --db "$DB" > "$T/ls.json" 2>/dev/null
  python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['count'] == 0 else 1)" "$T/ls.json" && break
  sleep 0.25
done
check "the watched folder removed: its documents pruned" python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['count'] == 0 else 1)" "$T/ls.json"
check "still watching after its folder went" kill -0 "$PID"
mkdir "$D"
echo "back again: the folder returns with an owl" > "$D/owl.txt"
settle "the watched folder made again"

# SIGTERM: a clean stop, exit 0
kill -TERM "$PID"
wait "$PID"
rc=$?
check "SIGTERM: exit 0 ($rc)" test $rc -eq 0
check "said it stopped" grep -q "index --watch: stopped" "$T/err.txt"

# kill -9 in the middle of a pass (a flood of 60 bigger files), then a new watch puts it right
start
settle "watch restarted"
python3 - "$D/big" <<'PY'
import os, sys
os.makedirs(sys.argv[1])
for i in range(60):
    open(os.path.join(sys.argv[1], "g%03d.txt" % i), "w").write(" ".join("word%d sea ship %d" % (k, i) for k in range(60)))
PY
for _ in $(seq 1 100); do
  n=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from documents').fetchone()[0])" "$DB" 2>/dev/null || echo 0)
  [ "${n:-0}" -gt 8 ] && break
  sleep 0.1
done
kill -9 "$PID"
wait "$PID" 2>/dev/null
check "killed in the middle of a pass (documents so far: $n of 62)" test "${n:-0}" -lt 62
check "after kill -9: the store is sound" python3 -c "import sqlite3,sys; sys.exit(0 if sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0]=='ok' else 1)" "$DB"
start
settle "a new watch after kill -9"
kill -INT "$PID"
wait "$PID"
rc=$?
check "SIGINT: exit 0 ($rc)" test $rc -eq 0
finish cli_watch
