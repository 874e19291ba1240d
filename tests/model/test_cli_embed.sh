#!/bin/sh
# tests/model/test_cli_embed.sh MODATTN — `modattn embed` end to end: arguments, stdin, --jsonl,
# errors and exit codes, output order and values (against the MiniLM golden "Hello world").
# Needs the model from `make model`; fails (does not skip) without it.
set -u
BIN=$1
GEMM=${2:-onednn} # the build's MODATTN_GEMM: with oneDNN the CPU has GEMM plans (tight batches)
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
    echo "test_cli_embed: 0 passed, 1 failed"
    exit 1
fi

# help, usage errors
"$BIN" embed --help > "$TMP/help" 2>&1; rc=$?
check "--help exits 0" '[ $rc -eq 0 ]'
check "--help names the options" 'grep -q -- "--batch-tokens" "$TMP/help" && grep -q -- "--jsonl" "$TMP/help"'
"$BIN" embed > /dev/null 2>&1; rc=$?
check "no input is a usage error" '[ $rc -eq 2 ]'
"$BIN" embed --batch-tokens 0 x > /dev/null 2>&1; rc=$?
check "--batch-tokens 0 is a usage error" '[ $rc -eq 2 ]'
"$BIN" embed --frobnicate x > /dev/null 2>&1; rc=$?
check "unknown option is a usage error" '[ $rc -eq 2 ]'
"$BIN" embed --model "$TMP/none" x > /dev/null 2> "$TMP/err"; rc=$?
check "missing model exits 1" '[ $rc -eq 1 ]'
check "missing model says run make model" 'grep -q "make model" "$TMP/err"'

# arguments, in order, against the golden
"$BIN" embed --model "$MODEL" "Hello world" "a second, longer text about cats" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "embed TEXT exits 0 ($(cat "$TMP/err"))" '[ $rc -eq 0 ]'
check "one line per text" '[ "$(wc -l < "$TMP/out")" -eq 2 ]'
python3 - "$TMP/out" tests/fixtures/golden_minilm.jsonl <<'PY' && ok || ko "TEXT output matches the golden"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
gold = next(json.loads(l) for l in open(sys.argv[2]) if json.loads(l)["text"] == "Hello world")
assert [r["index"] for r in rows] == [0, 1], rows
assert rows[0]["tokens"] == len(gold["ids"]) == 4
a, b = rows[0]["embedding"], gold["embedding"]
cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
assert len(a) == 384 and cos > 0.99999, cos
PY

# stdin, one text per line; the same through --jsonl; a tiny batch budget keeps the order
printf 'Hello world\nthe cat sat\n\nlast line' > "$TMP/in.txt"
"$BIN" --threads 2 embed --model "$MODEL" - < "$TMP/in.txt" > "$TMP/plain" 2> "$TMP/err"; rc=$?
check "stdin exits 0 ($(cat "$TMP/err"))" '[ $rc -eq 0 ]'
check "stdin: one line per input line (empty line included)" '[ "$(wc -l < "$TMP/plain")" -eq 4 ]'
printf '"Hello world"\n"the cat sat"\n""\n"last line"\n' > "$TMP/in.jsonl"
MODATTN_MODEL="$MODEL" "$BIN" embed --jsonl - < "$TMP/in.jsonl" > "$TMP/json" 2> "$TMP/err"; rc=$?
check "--jsonl via MODATTN_MODEL exits 0 ($(cat "$TMP/err"))" '[ $rc -eq 0 ]'
check "--jsonl gives the same output as plain lines" 'cmp -s "$TMP/plain" "$TMP/json"'
python3 - "$TMP/plain" <<'PY' && ok || ko "stdin indices and token counts"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["index"] for r in rows] == [0, 1, 2, 3]
assert [r["tokens"] for r in rows] == [4, 5, 2, 4], [r["tokens"] for r in rows]
PY
# a batch budget of 5 tokens runs every text alone: same order, same values (1e-6)
"$BIN" embed --model "$MODEL" --batch-tokens 5 - < "$TMP/in.txt" > "$TMP/small" 2> "$TMP/err"; rc=$?
check "--batch-tokens 5 exits 0 ($(cat "$TMP/err"))" '[ $rc -eq 0 ]'
python3 - "$TMP/plain" "$TMP/small" <<'PY' && ok || ko "budget 5 keeps order and values"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert [r["index"] for r in b] == [0, 1, 2, 3] and [r["tokens"] for r in b] == [r["tokens"] for r in a]
d = max(abs(x - y) for r, s in zip(a, b) for x, y in zip(r["embedding"], s["embedding"]))
assert d <= 1e-6, d
PY
printf '"a text with\\na newline"\n' | "$BIN" embed --model "$MODEL" --jsonl - > "$TMP/nl" 2>&1; rc=$?
check "--jsonl text with a newline is one input" '[ $rc -eq 0 ] && [ "$(wc -l < "$TMP/nl")" -eq 1 ]'
printf '"ok"\nnot json\n' | "$BIN" embed --model "$MODEL" --jsonl - > /dev/null 2> "$TMP/err"; rc=$?
check "--jsonl bad line exits 1" '[ $rc -eq 1 ]'
check "--jsonl bad line is named" 'grep -q "line 2" "$TMP/err"'

# batching: with GEMM plans (oneDNN) small batches cost little more per row, so 300 sentences of
# 5-60 tokens go in batches padded by little (model/encoder.c, plan_batches: 2.1% with plans that
# hold packed weights, 5.6% with plans that read them in place, which favour fewer batches);
# without plans (OpenBLAS) batches fill the token budget. The batches from the trace's spans
# (B, S), the tokens from the output. Plans that read the weights in place were once taken for no
# plans: 73.8% of padding here, 9x the activations.
head -300 bench/corpus_sentences.txt > "$TMP/s300.txt"
"$BIN" --trace "$TMP/tr.json" embed --model "$MODEL" - < "$TMP/s300.txt" > "$TMP/s300.out" 2> "$TMP/err"; rc=$?
check "300 sentences with --trace exit 0 ($(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ]'
pad=$(python3 - "$TMP/tr.json" "$TMP/s300.out" <<'PY'
import json, re, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
padded = sum(int(a) * int(b) for e in ev if e.get("name") == "batch"
             for a, b in [re.match(r"B=(\d+) S=(\d+)", e["args"]["shape"]).groups()])
tokens = sum(json.loads(l)["tokens"] for l in open(sys.argv[2]))
print(f"{padded / tokens - 1:.4f}")
PY
)
echo "300 sentences: padded tokens +$pad over the texts' ($GEMM)"
if [ "$GEMM" = onednn ]; then
    check "with GEMM plans the batches pad by under 10% (+$pad)" "python3 -c 'import sys; sys.exit(0 if 0 <= float(\"$pad\") < 0.10 else 1)'"
else
    check "without GEMM plans the batches are padded, by some (+$pad)" "python3 -c 'import sys; sys.exit(0 if float(\"$pad\") > 0 else 1)'"
fi

echo "test_cli_embed: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
