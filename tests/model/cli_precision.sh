#!/bin/sh
# tests/model/cli_precision.sh MODATTN — `--precision` from the command line: names and usage errors,
# the refusal on a CPU without the instructions (MODATTN_CPU_DISABLE masks them on any machine),
# `explain --model` and `devices` saying why, and a store that keeps the precision it was indexed in
# (searching it in another is refused with the way out; `stats` shows it). Where the CPU runs bf16
# the store round trip runs in bf16; elsewhere it is said, and the refusals are what is checked.
# Needs the model from `make model`; fails (does not skip) without it.
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
    echo "FAIL: $MODEL is missing: run \`make model\` (tools/setup_model.sh) first" >&2
    echo "cli_precision: 0 passed, 1 failed"
    exit 1
fi
export MODATTN_MODEL="$MODEL"

"$BIN" --help > "$TMP/help" 2>&1
check "--help names --precision" 'grep -q -- "--precision P" "$TMP/help"'
"$BIN" --precision fp16 embed x > /dev/null 2> "$TMP/err"; rc=$?
check "an unknown precision is a usage error (rc $rc)" '[ $rc -eq 2 ]'
check "it names the choices" 'grep -q "fp32, bf16x3, bf16 or int8" "$TMP/err"'
MODATTN_PRECISION=nope "$BIN" embed x > /dev/null 2>&1; rc=$?
check "an unknown \$MODATTN_PRECISION is a usage error" '[ $rc -eq 2 ]'

# refused where the instructions are missing (masked here), with the reason, nothing on stdout
for p in bf16 int8 bf16x3; do
    MODATTN_CPU_DISABLE=avx512_bf16,avx512_vnni "$BIN" --precision $p embed x > "$TMP/out" 2> "$TMP/err"; rc=$?
    check "$p without its instructions exits 1 (rc $rc)" '[ $rc -eq 1 ]'
    check "$p: the error names the instruction set ($(cat "$TMP/err"))" \
        'grep -q "cannot run in $p" "$TMP/err" && grep -Eq "AVX512_(BF16|VNNI)|AMX-BF16|oneDNN|x86" "$TMP/err"'
    check "$p: nothing on stdout" '[ ! -s "$TMP/out" ]'
done
MODATTN_CPU_DISABLE=avx512_bf16 "$BIN" explain --model "$MODEL" > "$TMP/explain" 2>&1
check "explain --model says bf16 is refused and why" \
    'grep -q "linear_bf16.*--precision bf16 is refused" "$TMP/explain"'
"$BIN" devices > "$TMP/devices" 2>&1
check "devices lists linear_bf16 and linear_int8" 'grep -q linear_bf16 "$TMP/devices" && grep -q linear_int8 "$TMP/devices"'

# a store keeps its precision
printf 'The cat sat on the mat.\n\nDogs bark loudly at night.\n' > "$TMP/d.txt"
if "$BIN" --precision bf16 embed x > /dev/null 2> "$TMP/why"; then
    P=bf16
else
    P=int8
    "$BIN" --precision int8 embed x > /dev/null 2> "$TMP/why8" || P=
fi
if [ -n "$P" ]; then
    "$BIN" --precision $P index --db "$TMP/s.db" "$TMP/d.txt" > /dev/null 2> "$TMP/err"; rc=$?
    check "index in $P exits 0 ($(cat "$TMP/err"))" '[ $rc -eq 0 ]'
    "$BIN" search --db "$TMP/s.db" cat > /dev/null 2> "$TMP/err"; rc=$?
    check "searching a $P store in fp32 is refused (rc $rc)" '[ $rc -eq 1 ]'
    check "the refusal says which precision to use" 'grep -q "holds $P embeddings" "$TMP/err" && grep -q -- "--precision $P" "$TMP/err"'
    "$BIN" --precision $P search --db "$TMP/s.db" cat > "$TMP/out" 2> "$TMP/err"; rc=$?
    check "searching it in $P works ($(cat "$TMP/err"))" '[ $rc -eq 0 ] && grep -q "cat" "$TMP/out"'
    "$BIN" index --db "$TMP/s.db" "$TMP/d.txt" > /dev/null 2>&1; rc=$?
    check "indexing into it in fp32 is refused" '[ $rc -eq 1 ]'
    "$BIN" stats --db "$TMP/s.db" --json > "$TMP/stats" 2>&1
    check "stats --json shows the precision" 'grep -q "\"precision\": \"$P\"" "$TMP/stats"'
    "$BIN" --precision $P search --db "$TMP/s.db" --json cat > "$TMP/a.json" 2>&1
    "$BIN" --precision $P search --db "$TMP/s.db" --json cat > "$TMP/b.json" 2>&1
    check "a $P search gives the same scores twice" 'cmp -s "$TMP/a.json" "$TMP/b.json"'
else
    echo "cli_precision: bf16 and int8 not available here: $(cat "$TMP/why") / $(cat "$TMP/why8")"
fi
# an fp32 store refuses a low-precision query, naming fp32
"$BIN" index --db "$TMP/f.db" "$TMP/d.txt" > /dev/null 2>&1
"$BIN" stats --db "$TMP/f.db" > "$TMP/stats" 2>&1
check "stats shows fp32" 'grep -q "precision fp32" "$TMP/stats"'
if [ -n "$P" ]; then
    "$BIN" --precision $P search --db "$TMP/f.db" cat > /dev/null 2> "$TMP/err"; rc=$?
    check "a $P query on an fp32 store is refused, naming fp32" '[ $rc -eq 1 ] && grep -q "holds fp32 embeddings" "$TMP/err"'
fi
echo "cli_precision: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
