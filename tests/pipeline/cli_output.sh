#!/usr/bin/env bash
# tests/pipeline/cli_output.sh MODATTN MODEL_DIR — what leaves the process (issue 18, classes 1-3):
#   1. output that cannot be written is an error: every command to /dev/full exits non-zero and
#      says which output failed; a closed pipe with SIGPIPE ignored stays quiet;
#   2. file names that are not UTF-8: `index --json` and `search --json` give valid JSON with the
#      name lossless in "path_bytes" (hex) and U+FFFD in "path"; text output shows \xHH;
#   3. terminal safety: escape sequences inside a file's text or name never reach the terminal
#      raw in human-readable output (escaped as \xHH there; JSON escapes them itself);
#   5. a FIFO in a model folder is refused with "not a regular file", never waited on;
#   4. the same model through a link, DIR/. or a renamed copy is accepted; the same weights with
#      another pooling or layer count are refused;
#  11. --db in a folder that does not exist says so.
set -u
BIN=$1
MODEL=$2
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
[ -f "$MODEL/model.safetensors" ] || { echo "FAIL: no model at $MODEL: run make model" >&2; echo "cli_output: 0 passed, 1 failed"; exit 1; }
T=$(mktemp -d /tmp/modattn-cli-output-XXXXXX)
trap 'rm -rf "$T"' EXIT
DB=$T/store.db
mkdir -p "$T/docs"
ESC=$'\033'
BEL=$'\a'
printf 'how vectors are stored on disk in a flat file beside the store\n' > "$T/docs/plain.txt"
printf 'a caf\xc3\xa9 document: vectors are stored in a caf\xe9 named file\n' > "$T/docs/caf"$'\xe9'".txt"
printf 'vectors stored %s]0;pwned%s %s[31mred text%s[0m and more words\n' "$ESC" "$BEL" "$ESC" "$ESC" > "$T/docs/esc"$'\033'"[2Jname.txt"
head -c 300 /dev/urandom > "$T/docs/binary"$'\033'"[5m.bin"

# ---- 2 and 3: index, then search, with awkward names and text
"$BIN" index --json --model "$MODEL" --db "$DB" "$T/docs" > "$T/index.json" 2> "$T/index.err"
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/index.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["files_indexed"] == 3, j
assert j["errors"] == [], j["errors"]
sk = j["skipped"]
assert len(sk) == 1 and sk[0]["path"].endswith("binary\x1b[5m.bin"), sk
PY
then ok; else bad "index --json with a non-UTF-8 name and escapes: rc $rc: $(cat "$T/index.err" "$T/index.json" | head -c 600)"; fi

"$BIN" index --model "$MODEL" --db "$DB" "$T/docs" > "$T/index.txt" 2> "$T/index2.err"
if grep -q "$ESC" "$T/index.txt" "$T/index2.err"; then bad "index text output carries a raw ESC"; else ok; fi



"$BIN" search --json -k 3 --model "$MODEL" --db "$DB" "how are vectors stored" > "$T/s.json" 2> "$T/s.err"
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/s.json" "$T/docs" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
r = j["results"]
assert len(r) == 3, r
byname = {}
for x in r:
    name = bytes.fromhex(x["path_bytes"]) if "path_bytes" in x else x["path"].encode()
    assert os.path.exists(name), name  # lossless: the bytes name the very file
    byname[os.path.basename(name)] = x
caf = byname[b"caf\xe9.txt"]
assert "path_bytes" in caf and "\ufffd" in caf["path"], caf
assert "path_bytes" not in byname[b"plain.txt"]
esc = byname[b"esc\x1b[2Jname.txt"]
assert "\x1b]0;pwned\x07" in esc["text"], esc["text"]  # JSON keeps the text exact
PY
then ok; else bad "search --json: rc $rc: $(head -c 600 "$T/s.err" "$T/s.json")"; fi

"$BIN" search -k 3 --model "$MODEL" --db "$DB" "how are vectors stored" > "$T/s.txt" 2> "$T/s2.err"
rc=$?
if [ $rc -ne 0 ]; then bad "search text: rc $rc: $(cat "$T/s2.err")";
elif grep -q "[$ESC$BEL]" "$T/s.txt"; then bad "search text output carries a raw ESC or BEL: $(cat -v "$T/s.txt")";
elif ! grep -qF 'caf\xe9.txt' "$T/s.txt"; then bad "search text: the non-UTF-8 name is not shown as \\xe9: $(cat -v "$T/s.txt")";
elif ! grep -qF 'esc\x1b[2Jname.txt' "$T/s.txt" || ! grep -qF '\x1b]0;pwned\x07' "$T/s.txt"; then bad "search text: escapes not shown as \\x1b: $(cat -v "$T/s.txt")";
else ok; fi

# ---- 1: every command's output to a full device
full() { # full DESCRIPTION ARGS...: exit non-zero, a message naming standard output
  local what=$1
  shift
  "$BIN" "$@" > /dev/full 2> "$T/full.err"
  local rc=$?
  if [ $rc -ne 0 ] && grep -q "standard output" "$T/full.err"; then ok
  else bad "$what to /dev/full: rc $rc, stderr: $(head -c 300 "$T/full.err")"; fi
}
full "--help" --help
full "--version" --version
full "backends" backends
full "backends --json" backends --json
full "explain" explain --shape 1,2,2,16,16,16
full "check" check --backend reference --configs 20
full "bench" bench attn --shape 1,2,2,64,64,32 --min-time 0.01
full "devices" devices
full "embed" embed --model "$MODEL" "one text"
full "search" search --model "$MODEL" --db "$DB" "how are vectors stored"
full "search --json" search --json --model "$MODEL" --db "$DB" "how are vectors stored"
full "index --json" index --json --model "$MODEL" --db "$DB" "$T/docs"
full "search --help" search --help

# a closed pipe with SIGPIPE ignored: EPIPE, said nothing (SIGPIPE itself ends the process quietly)
# (a word that only some chunks hold: "how are vectors stored" alone, every chunk holding every one
# of its words, is searched by meaning with a note on stderr that says so)
( trap '' PIPE; "$BIN" search --json --model "$MODEL" --db "$DB" "how are vectors stored on disk" 2> "$T/pipe.err" | true )
if [ -s "$T/pipe.err" ]; then bad "closed pipe: something was said: $(cat "$T/pipe.err")"; else ok; fi

# ---- 5 (issue 18): a FIFO in a model folder is refused at once, never waited on
for f in tokenizer.json model.safetensors config.json; do
  rm -rf "$T/m"; mkdir -p "$T/m"
  for x in "$(cd "$MODEL" && pwd)"/*; do ln -s "$x" "$T/m/"; done
  rm -f "$T/m/$f"; mkfifo "$T/m/$f"
  timeout 30 "$BIN" embed --model "$T/m" "one text" > /dev/null 2> "$T/fifo.err"
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "not a regular file" "$T/fifo.err"; then ok
  else bad "a FIFO as $f: rc $rc (124: it hung), stderr: $(head -c 300 "$T/fifo.err")"; fi
done

# ---- 4 (issue 18): a model's identity is its content, never its path
ABS=$(cd "$MODEL" && pwd)
mkdir -p "$T/id/renamed-copy" "$T/id/cls" "$T/id/3layers"
ln -s "$ABS" "$T/id/link"
for x in "$ABS"/*; do ln -s "$x" "$T/id/renamed-copy/"; done
for x in "$ABS"/*; do [ "$(basename "$x")" = 1_Pooling ] || ln -s "$x" "$T/id/cls/"; done
mkdir -p "$T/id/cls/1_Pooling"
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['pooling_mode_mean_tokens']=False; c['pooling_mode_cls_token']=True; json.dump(c, open(sys.argv[2],'w'))" "$ABS/1_Pooling/config.json" "$T/id/cls/1_Pooling/config.json"
for x in "$ABS"/*; do [ "$(basename "$x")" = config.json ] || ln -s "$x" "$T/id/3layers/"; done
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['num_hidden_layers']=3; json.dump(c, open(sys.argv[2],'w'))" "$ABS/config.json" "$T/id/3layers/config.json"
for m in "$T/id/link" "$MODEL/." "$T/id/renamed-copy"; do
  "$BIN" index --quiet --model "$m" --db "$DB" "$T/docs" > /dev/null 2> "$T/id.err"
  rc=$?
  if [ $rc -eq 0 ]; then ok; else bad "the same model as $m was refused: rc $rc, $(cat "$T/id.err")"; fi
  "$BIN" search --model "$m" --db "$DB" "vectors" > /dev/null 2> "$T/id.err"
  rc=$?
  if [ $rc -eq 0 ]; then ok; else bad "search with the same model as $m: rc $rc, $(cat "$T/id.err")"; fi
done
for m in cls 3layers; do
  "$BIN" index --quiet --model "$T/id/$m" --db "$DB" "$T/docs" > /dev/null 2> "$T/id.err"
  rc=$?
  if [ $rc -eq 1 ] && grep -q "the same weights, but" "$T/id.err"; then ok; else bad "a model with other $m was accepted: rc $rc, $(cat "$T/id.err")"; fi
  "$BIN" search --model "$T/id/$m" --db "$DB" "vectors" > /dev/null 2> "$T/id.err"
  rc=$?
  if [ $rc -eq 1 ] && grep -q "cannot be compared" "$T/id.err"; then ok; else bad "search with other $m: rc $rc, $(cat "$T/id.err")"; fi
done

# ---- 11 (issue 18): a store in a folder that is not there names the folder, and creates nothing
"$BIN" index --model "$MODEL" --db "$T/nodir/x.db" "$T/docs" > /dev/null 2> "$T/nodir.err"
rc=$?
if [ $rc -eq 1 ] && grep -qF "the folder '$T/nodir' does not exist" "$T/nodir.err" && [ ! -e "$T/nodir" ]; then ok
else bad "--db in a missing folder: rc $rc, $(cat "$T/nodir.err")"; fi

echo "cli_output: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
