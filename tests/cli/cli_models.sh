#!/bin/sh
# tests/cli/cli_models.sh MODATTN — models found, not typed: --model NAME and ORG/NAME resolve through
# $MODATTN_MODELS, the installed data folder and the Hugging Face cache as sentence-transformers leaves
# it on disk (a fake one here: models--ORG--NAME/snapshots/REV with refs/main; nothing is downloaded),
# and `modattn models` lists what it finds with dimension and pooling. Needs `make model`.
set -u
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(pwd)/.models
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$2"; then ok; else ko "$1"; fi; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -d "$SRC/all-MiniLM-L6-v2" ] || { echo "FAIL: $SRC/all-MiniLM-L6-v2 is missing: run make model"; echo "cli_models: 0 passed, 1 failed"; exit 1; }
HUB="$TMP/hf/hub/models--sentence-transformers--all-MiniLM-L6-v2"
mkdir -p "$HUB/snapshots/abc123" "$HUB/refs" "$TMP/mine"
cp -r "$SRC/all-MiniLM-L6-v2/." "$HUB/snapshots/abc123/"
printf 'abc123' > "$HUB/refs/main"
cp -r "$SRC/tiny-bert-cls" "$TMP/mine/tiny-bert-cls"
cd "$TMP" # away from the repository's .models
unset MODATTN_MODEL
"$BIN" embed --model "$SRC/all-MiniLM-L6-v2" "by name" > "$TMP/path.out" 2>/dev/null
HF_HOME="$TMP/hf" "$BIN" embed --model sentence-transformers/all-MiniLM-L6-v2 "by name" > "$TMP/org.out" 2> "$TMP/err"; rc=$?
check "--model ORG/NAME resolves through the Hugging Face cache (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ] && cmp -s "$TMP/path.out" "$TMP/org.out"'
HF_HOME="$TMP/hf" "$BIN" embed --model all-MiniLM-L6-v2 "by name" > "$TMP/name.out" 2>/dev/null; rc=$?
check "--model NAME alone finds sentence-transformers' in the cache (rc $rc)" '[ $rc -eq 0 ] && cmp -s "$TMP/path.out" "$TMP/name.out"'
HF_HUB_CACHE="$TMP/hf/hub" "$BIN" embed --model all-MiniLM-L6-v2 "by name" > "$TMP/hub.out" 2>/dev/null; rc=$?
check "HF_HUB_CACHE is honoured (rc $rc)" '[ $rc -eq 0 ] && cmp -s "$TMP/path.out" "$TMP/hub.out"'
MODATTN_MODELS="$TMP/nothing:$TMP/mine" "$BIN" embed --model tiny-bert-cls "x" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "--model NAME through \$MODATTN_MODELS (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ] && grep -q embedding "$TMP/out"'
HF_HOME="$TMP/empty" "$BIN" embed --model no-such-model "x" > /dev/null 2> "$TMP/err"; rc=$?
check "a name found nowhere is an error naming it (rc $rc)" '[ $rc -eq 1 ] && grep -q "no-such-model" "$TMP/err"'
HF_HOME="$TMP/hf" MODATTN_MODELS="$TMP/mine" "$BIN" models --json > "$TMP/models.json" 2> "$TMP/err"; rc=$?
check "models --json exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "it lists the cache's model and the folder's, with dimension and pooling" \
    "python3 -c \"import json,sys; m={x['name']: x for x in json.load(open('$TMP/models.json'))['models']}; a=m['sentence-transformers/all-MiniLM-L6-v2']; t=m['tiny-bert-cls']; sys.exit(0 if a['dimension']==384 and a['pooling']=='mean' and a['normalize'] and a['where']=='hf-cache' and t['dimension']==128 and t['pooling']=='cls' and a['bytes']>1000000 else 1)\""
HF_HOME="$TMP/hf" "$BIN" models > "$TMP/models.txt" 2>&1; rc=$?
check "models (text) lists it too (rc $rc)" '[ $rc -eq 0 ] && grep -q "sentence-transformers/all-MiniLM-L6-v2 .* 384 mean+norm" "$TMP/models.txt"'
echo "cli_models: $pass passed, $fail failed"
[ $fail -eq 0 ]
