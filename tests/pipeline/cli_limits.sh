#!/usr/bin/env bash
# tests/pipeline/cli_limits.sh MODATTN MODEL_DIR — what one file may cost the indexer (hardening
# issue, items 2, 6, 7, 8):
#   2. a PDF decompression bomb (one FlateDecode stream of 150 MB in a file of half a megabyte)
#      under --mem-budget: the PDF library's memory counts (its child process is capped by what
#      the budget leaves), the file is an error naming the limit, the next file is indexed, exit 3,
#      the whole run stays far below what poppler alone took (1.4 GB and minutes for 20 MB);
#   8. an HTML <div> with 300,000 attributes (libxml2: minutes): stopped by --file-timeout, named
#      as such, exit 3, in seconds; the text extracted (a PDF's in the child process, a small HTML
#      file's in-process) is what the version before gave (the goldens below, from that version;
#      test_pipeline_unit compares the child with the in-process extractors on larger HTML too);
#   6. a hard link added after the first index is the stored document, not a second one (also when
#      it sorts first, or is named alone); --prune removes a duplicate an older version stored;
#   7. a file of one 3 MB "word" and one with a long run of blanks make chunks of at most 64 KiB,
#      and a search hit carries no more.
set -u
BIN=$1
MODEL=$2
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/harness.sh"
need_model "$MODEL" cli_limits
scratch cli-limits
GEN="python3 $HERE/hostile_files.py"
count_docs() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from documents').fetchone()[0])" "$1"; }

# ---- 2: a decompression bomb under --mem-budget
mkdir -p "$T/bomb"
$GEN bomb "$T/bomb/a-bomb.pdf" 150
$GEN pdf "$T/bomb/b-good.pdf" "volcanoes erupt lava and ash over the island" "bees make honey in the summer meadow"
size=$(stat -c %s "$T/bomb/a-bomb.pdf")
check "the bomb is small: $size bytes" [ "$size" -lt 2000000 ]
t0=$(date +%s)
python3 - "$BIN" "$MODEL" "$T" > "$T/bomb.out" 2>&1 <<'PY'
import resource, subprocess, sys
b, m, t = sys.argv[1:4]
# --file-timeout 0: the memory cap alone must stop it (under load or the sanitizers the 30 s
# default could come first, which is the other bound, tested below on HTML)
r = subprocess.run([b, "--mem-budget", "400M", "index", "--json", "--file-timeout", "0", "--model", m, "--db",
                    t + "/bomb.db", t + "/bomb"], capture_output=True, text=True, timeout=600)
open(t + "/bomb.json", "w").write(r.stdout)
open(t + "/bomb.err", "w").write(r.stderr)
# the largest resident set of the run and of every process it started (the extraction's too)
print("rc", r.returncode, "maxrss_mb", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
PY
t1=$(date +%s)
read -r _ rc _ rss < "$T/bomb.out"
echo "cli_limits: PDF bomb (150 MB stream) under --mem-budget 400M: exit $rc, peak RSS $rss MB, $((t1 - t0)) s"
if [ "$rc" = 3 ] && python3 - "$T/bomb.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
e = j["errors"]
assert len(e) == 1 and e[0]["path"].endswith("a-bomb.pdf"), e
assert "exceeded the memory budget" in e[0]["message"], e
assert j["files_indexed"] == 1, j  # the next file is indexed
PY
then ok; else bad "PDF bomb under --mem-budget 400M: rc $rc: $(head -c 1500 "$T/bomb.out" "$T/bomb.json" "$T/bomb.err")"; fi
check "PDF bomb: peak RSS $rss MB, under 900 MB" [ "${rss:-99999}" -lt 900 ]
check "PDF bomb: $((t1 - t0)) s: it ends (bounded by memory, not by the test's 600 s)" [ $((t1 - t0)) -lt 600 ]

# ---- 8: quadratic markup, stopped by --file-timeout
mkdir -p "$T/attrs"
$GEN attrs "$T/attrs/a-attrs.html" 300000
printf '<html><body><h1>Rivers</h1><p>The river floods the valley &amp; every spring.</p><div>line two</div><pre>a  b\n c</pre></body></html>' > "$T/attrs/b-good.html"
t0=$(date +%s)
timeout 120 "$BIN" index --json --file-timeout 2 --model "$MODEL" --db "$T/attrs.db" "$T/attrs" > "$T/attrs.json" 2> "$T/attrs.err"
rc=$?
t1=$(date +%s)
echo "cli_limits: HTML with 300,000 attributes, --file-timeout 2: exit $rc in $((t1 - t0)) s"
if [ $rc -eq 3 ] && python3 - "$T/attrs.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
e = j["errors"]
assert len(e) == 1 and e[0]["path"].endswith("a-attrs.html"), e
assert "took longer than --file-timeout 2 s" in e[0]["message"], e
assert j["files_indexed"] == 1, j
PY
then ok; else bad "300,000 attributes: rc $rc: $(head -c 1500 "$T/attrs.json" "$T/attrs.err")"; fi
check "300,000 attributes: $((t1 - t0)) s, under 30 s" [ $((t1 - t0)) -lt 30 ]
# the text extracted in the child is what the in-process extractors gave (golden: the version
# before, on these two files): same bytes, same page and line marks
python3 - "$T/attrs.db" "$T/bomb.db" > "$T/texts.out" <<'PY'
import sqlite3, sys
for db in sys.argv[1:]:
    for row in sqlite3.connect(db).execute(
            "select d.path, c.seq, c.start_byte, c.end_byte, c.line, c.page, c.text from chunks c "
            "join documents d on d.id = c.document order by d.path, c.seq"):
        print(repr((row[0].rsplit("/", 1)[1],) + row[1:]))
PY
cat > "$T/texts.want" <<'EOF'
('b-good.html', 0, 0, 70, 1, 0, 'Rivers\n\nThe river floods the valley & every spring.\n\nline two\n\na  b\n c')
('b-good.pdf', 0, 0, 82, 0, 1, 'volcanoes erupt lava and ash over the island\n\nbees make honey in the summer meadow')
EOF
check "extracted texts as in-process: $(diff "$T/texts.want" "$T/texts.out")" cmp -s "$T/texts.want" "$T/texts.out"
# --file-timeout takes seconds, 0 is no limit; anything else is a usage error
"$BIN" index --file-timeout soon --model "$MODEL" --db "$T/x.db" "$T/attrs/b-good.html" > /dev/null 2> "$T/ft.err"
rc=$?
check "--file-timeout soon: exit $rc, not 2: $(cat "$T/ft.err")" [ $rc -eq 2 ]

# ---- 6: a hard link made after the first index
mkdir -p "$T/h"
printf 'apples and pears grow in the orchard behind the house\n' > "$T/h/fruit.txt"
printf 'the river floods the valley every spring\n' > "$T/h/river.txt"
"$BIN" index --quiet --model "$MODEL" --db "$T/h.db" "$T/h" > /dev/null 2>&1
ln "$T/h/fruit.txt" "$T/h/0-link.txt" # sorts before the stored name
"$BIN" index --json --model "$MODEL" --db "$T/h.db" "$T/h" > "$T/h1.json" 2> "$T/h1.err"
rc=$?
docs=$(count_docs "$T/h.db")
if [ $rc -eq 0 ] && [ "$docs" = 2 ] && python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); assert j['files_indexed'] == 0 and j['files_unchanged'] == 2, j" "$T/h1.json"
then ok; else bad "a hard link added after the first index: rc $rc, $docs documents: $(head -c 800 "$T/h1.json" "$T/h1.err")"; fi
"$BIN" index --json --model "$MODEL" --db "$T/h.db" "$T/h/0-link.txt" > "$T/h2.json" 2> "$T/h2.err"
docs=$(count_docs "$T/h.db")
check "the hard link named alone is the stored document: $docs documents: $(head -c 600 "$T/h2.json" "$T/h2.err")" \
  python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); assert j['files_unchanged'] == 1 and j['files_indexed'] == 0 and sys.argv[2] == '2', j" "$T/h2.json" "$docs"
"$BIN" index --json --prune --model "$MODEL" --db "$T/h.db" "$T/h" > "$T/h3.json" 2> "$T/h3.err"
check "--prune keeps one: $(count_docs "$T/h.db") documents" [ "$(count_docs "$T/h.db")" = 2 ]
# a store in which an older version put the file twice (here: a copy of its row under the link's
# name): --prune removes the duplicate, the canonical name first in path order stays
python3 - "$T/h.db" "$T/h/fruit.txt" "$T/h/0-link.txt" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("insert into documents(path, hash, mtime_ns, size, kind, chunk_tokens, overlap, nchunks, indexed_at) "
          "select ?, hash, mtime_ns, size, kind, chunk_tokens, overlap, 0, indexed_at from documents where path = ?",
          (sys.argv[3], sys.argv[2]))
c.commit()
PY
"$BIN" index --json --prune --model "$MODEL" --db "$T/h.db" "$T/h" > "$T/h4.json" 2> "$T/h4.err"
if [ "$(count_docs "$T/h.db")" = 2 ] && python3 - "$T/h4.json" "$T/h.db" "$T/h" <<'PY'
import json, sqlite3, sys
j = json.load(open(sys.argv[1]))
assert j["files_pruned"] == 1, j
paths = sorted(r[0] for r in sqlite3.connect(sys.argv[2]).execute("select path from documents"))
assert paths == [sys.argv[3] + "/fruit.txt", sys.argv[3] + "/river.txt"], paths
PY
then ok; else bad "--prune with the file stored twice: $(head -c 800 "$T/h4.json" "$T/h4.err")"; fi

# ---- 7: one huge word, and a long run of blanks
mkdir -p "$T/w"
python3 -c "import sys; open(sys.argv[1], 'w').write('a' * 3000000 + ' orchard apples\n')" "$T/w/word.txt"
python3 -c "import sys; open(sys.argv[1], 'w').write('valley ' + ' ' * 2000000 + ' meadow\n')" "$T/w/blank.txt"
"$BIN" index --json --model "$MODEL" --db "$T/w.db" "$T/w" > "$T/w.json" 2> "$T/w.err"
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/w.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("select d.path, c.start_byte, c.end_byte, length(cast(c.text as blob)), c.text from chunks c "
                 "join documents d on d.id = c.document order by d.path, c.seq").fetchall()
assert rows and all(r[3] <= 65536 and r[2] - r[1] <= 65536 for r in rows), [r[:4] for r in rows]
word = [r for r in rows if r[0].endswith("word.txt")]
blank = [r for r in rows if r[0].endswith("blank.txt")]
# the word's first 64 KiB, then the rest of the file; every word of the file in some chunk
assert word[0][1] == 0 and word[0][3] == 65536 and any("orchard apples" in r[4] for r in word), [r[:4] for r in word]
assert any("valley" in r[4] for r in blank) and any("meadow" in r[4] for r in blank), [r[:4] for r in blank]
PY
then ok; else bad "chunks of a huge word: rc $rc: $(head -c 800 "$T/w.json" "$T/w.err")"; fi
"$BIN" search --json -k 5 --model "$MODEL" --db "$T/w.db" "aaaa" > "$T/ws.json" 2> "$T/ws.err"
wsize=$(stat -c %s "$T/ws.json")
check "search hits are bounded: $wsize bytes of JSON" python3 - "$T/ws.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
assert r and all(len(x["text"].encode()) <= 65536 for x in r), [len(x["text"]) for x in r]
PY

finish cli_limits
