#!/bin/sh
# tests/pipeline/cli_bounds.sh MODATTN — inputs the CLI reads are bounded and their failures are
# errors (the hardening issue, round 3): an input line longer than the documented 16 MiB stops
# `embed -` and `search --queries` with the line's number (never a shorter input set taken for the
# whole, as a failed getline() taken for end of input did), /dev/zero as queries ends at once,
# memory for lines counts against --mem-budget and its failure is an error; an unknown --attn is a
# usage error before a store is made; output to a full device says why it failed; a store on a
# read-only file system says so. Needs the model from `make model`; fails (does not skip) without it.
set -u
BIN=$1
MODEL=.models/all-MiniLM-L6-v2
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$2"; then ok; else ko "$1"; fi; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ ! -d "$MODEL" ]; then
    echo "FAIL: $MODEL is missing: run \`make model\` first" >&2
    echo "cli_bounds: 0 passed, 1 failed"
    exit 1
fi
export MODATTN_MODEL="$MODEL"
mkdir -p "$TMP/docs"
echo "the quick brown fox jumps over the lazy dog" > "$TMP/docs/a.txt"
"$BIN" index --quiet --db "$TMP/s.db" "$TMP/docs" > /dev/null 2>&1 || ko "indexing the small folder failed"

python3 -c "import sys; sys.stdout.write('first line\n' + 'a' * (17 << 20) + '\nthird\n')" > "$TMP/long.txt"
"$BIN" embed - < "$TMP/long.txt" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "embed -: a 17 MiB line is an error (rc $rc)" '[ $rc -eq 1 ]'
check "embed -: the error names line 2 and the bound ($(head -c 200 "$TMP/err"))" 'grep -q "line 2 is longer than 16 MiB" "$TMP/err"'
"$BIN" search --db "$TMP/s.db" --queries - < "$TMP/long.txt" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "search --queries -: a 17 MiB line is an error (rc $rc)" '[ $rc -eq 1 ]'
check "search --queries -: it names line 2 ($(head -c 200 "$TMP/err"))" 'grep -q "line 2 is longer than 16 MiB" "$TMP/err"'
check "search --queries -: no result printed for a partial set" '[ ! -s "$TMP/out" ]'
timeout 60 "$BIN" search --db "$TMP/s.db" --queries /dev/zero > /dev/null 2> "$TMP/err"; rc=$?
check "search --queries /dev/zero ends with an error, not by growing (rc $rc)" '[ $rc -eq 1 ] && grep -q "line 1 is longer" "$TMP/err"'
# a line within the bound that the budget cannot hold: an error naming the line, not end of input
# (the budget: what embedding a short line takes, by --stats, plus 8 MiB: the model fits, the
# line's 15 MiB cannot; measured, so that it follows what the weights cost)
python3 -c "import sys; sys.stdout.write('first line\n' + 'a' * (15 << 20) + '\nthird\n')" > "$TMP/mid.txt"
echo "first line" | "$BIN" --stats embed - > /dev/null 2> "$TMP/stats"
need=$(awk '$1 == "total" && NF == 3 { print $3 }' "$TMP/stats")
check "embed --stats gives the peak in use ($need)" '[ -n "$need" ] && [ "$need" -gt 1000000 ]'
budget=$(( ${need:-0} + (8 << 20) ))
"$BIN" --mem-budget "$budget" embed - < "$TMP/mid.txt" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "embed - under --mem-budget: a line it cannot hold is an error (rc $rc)" '[ $rc -eq 1 ]'
check "the error names line 2 and the budget ($(head -c 300 "$TMP/err"))" 'grep -q "line 2" "$TMP/err" && grep -q "budget" "$TMP/err"'
"$BIN" embed - < "$TMP/mid.txt" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "without a budget the same input embeds all 3 lines (rc $rc)" '[ $rc -eq 0 ] && [ "$(wc -l < "$TMP/out")" -eq 3 ]'

# --attn naming nothing: a usage error before the store is made
"$BIN" --attn nope index --db "$TMP/new.db" "$TMP/docs" > /dev/null 2> "$TMP/err"; rc=$?
check "--attn nope index: exit 2 (rc $rc)" '[ $rc -eq 2 ]'
check "--attn nope index: it names the implementations" 'grep -q "no implementation named .nope." "$TMP/err"'
check "--attn nope index: no store was made" '[ ! -e "$TMP/new.db" ]'
"$BIN" --attn nope search --db "$TMP/s.db" fox > /dev/null 2>&1; rc=$?
check "--attn nope search: exit 2 (rc $rc)" '[ $rc -eq 2 ]'

# output that cannot be written: the reason, and exit 1
if [ -w /dev/full ]; then
    "$BIN" search --db "$TMP/s.db" --json fox > /dev/full 2> "$TMP/err"; rc=$?
    check "search --json > /dev/full exits 1 (rc $rc)" '[ $rc -eq 1 ]'
    check "and says why ($(cat "$TMP/err"))" 'grep -q "No space left on device" "$TMP/err"'
    "$BIN" embed one two > /dev/full 2> "$TMP/err"; rc=$?
    check "embed > /dev/full exits 1 and says why (rc $rc)" '[ $rc -eq 1 ] && grep -q "No space left on device" "$TMP/err"'
else
    ko "/dev/full is not writable here: the full-device checks cannot run"
fi

# a store on a read-only file system: said so (a private mount namespace, as root or in a user
# namespace; where neither can be made, that is a failure of this machine's set-up, not a skip)
mkdir -p "$TMP/ro"
cp "$TMP/s.db" "$TMP/ro.db"
if unshare -m true 2>/dev/null; then UNSHARE="unshare -m"; elif unshare -rm true 2>/dev/null; then UNSHARE="unshare -rm"; else UNSHARE=""; fi
if [ -n "$UNSHARE" ]; then
    $UNSHARE sh -c "mount -t tmpfs -o ro tmpfs '$TMP/ro' && '$BIN' index --db '$TMP/ro/new.db' '$TMP/docs'" > /dev/null 2> "$TMP/err"; rc=$?
    check "index on a read-only mount exits 1 (rc $rc)" '[ $rc -eq 1 ]'
    check "and says the file system is read-only ($(head -c 300 "$TMP/err"))" 'grep -qi "read-only file system" "$TMP/err"'
    # an existing store on a read-only mount: said so, not SQLite's "attempt to write a readonly database"
    cp "$TMP/s.db" "$TMP/ro/"
    $UNSHARE sh -c "mount --bind '$TMP/ro' '$TMP/ro' && mount -o remount,ro,bind '$TMP/ro' && '$BIN' index --db '$TMP/ro/s.db' '$TMP/docs'" > /dev/null 2> "$TMP/err"; rc=$?
    check "index into a store on a read-only mount exits 1 (rc $rc)" '[ $rc -eq 1 ]'
    check "and says the store is on a read-only file system ($(head -c 300 "$TMP/err"))" 'grep -q "the store is on a read-only file system" "$TMP/err"'
    $UNSHARE sh -c "mount --bind '$TMP/ro' '$TMP/ro' && mount -o remount,ro,bind '$TMP/ro' && '$BIN' search --db '$TMP/ro/s.db' fox" > "$TMP/out" 2> "$TMP/err"; rc=$?
    check "a store on a read-only mount is still searched (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ] && grep -q a.txt "$TMP/out"'
else
    ko "no mount namespace can be made here (unshare -m / -rm): the read-only check cannot run"
fi
# a store remembers its model: indexed with --model, searched and indexed again without it
cp -r .models/tiny-bert-cls "$TMP/other-model"
(unset MODATTN_MODEL; "$BIN" index --quiet --model "$TMP/other-model" --db "$TMP/mem.db" "$TMP/docs") > /dev/null 2>&1; rc=$?
check "index --model another model (rc $rc)" '[ $rc -eq 0 ]'
(unset MODATTN_MODEL; "$BIN" search --json --db "$TMP/mem.db" fox) > "$TMP/out" 2> "$TMP/err"; rc=$?
check "search with no --model uses the store's model (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ] && grep -q a.txt "$TMP/out"'
printf 'another document about foxes\n' > "$TMP/docs/b.txt"
(unset MODATTN_MODEL; "$BIN" index --quiet --db "$TMP/mem.db" "$TMP/docs") > /dev/null 2> "$TMP/err"; rc=$?
check "index again with no --model uses it too (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ]'
(unset MODATTN_MODEL; "$BIN" search --db "$TMP/mem.db" --model "$MODEL" fox) > /dev/null 2> "$TMP/err"; rc=$?
check "an explicit --model still wins (another model: refused, rc $rc)" '[ $rc -eq 1 ] && grep -q "not of the model in use" "$TMP/err"'
# a bge store (issue 40's "done when"): indexed with --model bge-small, searched with no --model: the
# store's model is used, so the results equal those of the same search naming bge (the default model,
# MiniLM, has the same dimension: a search that fell back to it would be refused as another model)
BGE=.models/bge-small-en-v1.5-int8
(unset MODATTN_MODEL; "$BIN" index --quiet --model "$BGE" --db "$TMP/bge.db" "$TMP/docs") > /dev/null 2>&1; rc=$?
check "index --model bge-small (rc $rc)" '[ $rc -eq 0 ]'
(unset MODATTN_MODEL; cd "$TMP" && "$BIN" search --json --db "$TMP/bge.db" -k 5 "foxes") > "$TMP/bge1.json" 2> "$TMP/err"; rc=$?
(unset MODATTN_MODEL; "$BIN" search --json --db "$TMP/bge.db" --model "$BGE" -k 5 "foxes") > "$TMP/bge2.json" 2>/dev/null
check "search on the bge store with no --model, from another folder (rc $rc: $(head -c 200 "$TMP/err"))" \
    '[ $rc -eq 0 ] && grep -q a.txt "$TMP/bge1.json"'
check "its results are the bge model's (the cosines of the search naming it; paths are shown relative to the folder searched from)" \
    'python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); k=lambda j:[(r[\"path\"].rsplit(\"/\",1)[-1],r[\"cosine\"]) for r in j[\"results\"]]; sys.exit(0 if k(a)==k(b) and k(a) else 1)" "$TMP/bge1.json" "$TMP/bge2.json"'
# index with no PATH refreshes what the store was indexed from
mkdir -p "$TMP/roots/sub"
printf 'the first note about owls\n' > "$TMP/roots/a.txt"
"$BIN" index --quiet --db "$TMP/roots.db" "$TMP/roots" > /dev/null 2>&1
printf 'a later note about comets\n' > "$TMP/roots/sub/new.txt"
"$BIN" index --json --db "$TMP/roots.db" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "index with no PATH refreshes the store's folders (rc $rc: $(head -c 200 "$TMP/err"))" \
    '[ $rc -eq 0 ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j[\"files_indexed\"]==1 and j[\"files_unchanged\"]==1 else 1)" "$TMP/out"'
# ls and rm: list the documents, remove a folder's, the searches then find none of them
"$BIN" ls --json --db "$TMP/roots.db" > "$TMP/ls.json" 2> "$TMP/err"; rc=$?
check "ls --json lists both documents with their chunks (rc $rc)" \
    '[ $rc -eq 0 ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); p=sorted(d[\"path\"].rsplit(\"/\",1)[1] for d in j[\"documents\"]); sys.exit(0 if p==[\"a.txt\",\"new.txt\"] and j[\"count\"]==2 and all(d[\"chunks\"]>=1 for d in j[\"documents\"]) else 1)" "$TMP/ls.json"'
"$BIN" rm --quiet --db "$TMP/roots.db" "$TMP/roots/sub" > /dev/null 2> "$TMP/err"; rc=$?
check "rm FOLDER removes the documents under it (rc $rc)" '[ $rc -eq 0 ]'
"$BIN" search --json --db "$TMP/roots.db" -k 5 "comets" > "$TMP/out" 2>/dev/null
check "a removed document is no longer found" '! grep -q new.txt "$TMP/out" && [ -f "$TMP/roots/sub/new.txt" ]'
"$BIN" rm --quiet --db "$TMP/roots.db" "$TMP/roots/sub" > /dev/null 2> "$TMP/err"; rc=$?
check "rm of a path the store holds nothing of: exit 1 saying so (rc $rc)" '[ $rc -eq 1 ] && grep -q "holds no document there" "$TMP/err"'
"$BIN" index --db "$TMP/never.db" > /dev/null 2> "$TMP/err"; rc=$?
check "index with no PATH on a store that records none is a usage error (rc $rc)" '[ $rc -eq 2 ] && grep -q "records none to refresh" "$TMP/err"'
echo "cli_bounds: $pass passed, $fail failed"
[ $fail -eq 0 ]
