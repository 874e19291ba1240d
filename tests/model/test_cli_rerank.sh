#!/bin/sh
# tests/model/test_cli_rerank.sh MODATTN — `modattn rerank` and `search --rerank` end to end: scores
# against transformers' goldens (tests/fixtures/rerank_golden.json), best first, --raw, --top,
# --passages, several labels, the limits (exit 2) and the refusal of a model that is no
# cross-encoder; search --rerank re-orders a store's candidates by the same scores and keeps the
# first stage's in the JSON. Needs `make model`: says "not available here" and exits 77 without it.
set -u
BIN=$1
CE=.models/tiny-cross-encoder
CE3=.models/tiny-cross-encoder-3
EMB=.models/tiny-bert-cls
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$2"; then ok; else ko "$1"; fi; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for m in "$CE" "$CE3" "$EMB"; do
    if [ ! -f "$m/model.safetensors" ]; then
        echo "test_cli_rerank: not available here: $m is missing (run \`make model\`)"
        exit 77
    fi
done

"$BIN" rerank --help > "$TMP/help" 2>&1; rc=$?
check "--help exits 0" '[ $rc -eq 0 ]'
check "--help names the options" 'grep -q -- "--passages" "$TMP/help" && grep -q -- "--raw" "$TMP/help" && grep -q -- "--top" "$TMP/help"'
"$BIN" --help 2>&1 | grep -q "rerank" && ok || ko "modattn --help lists rerank"
"$BIN" search --help 2>&1 | grep -q -- "--rerank-top" && ok || ko "search --help lists --rerank-top"

# usage errors and limits: exit 2
"$BIN" rerank q p > /dev/null 2>&1; rc=$?
check "no --model is a usage error" '[ $rc -eq 2 ]'
"$BIN" rerank --model "$CE" "" p > /dev/null 2> "$TMP/err"; rc=$?
check "an empty query exits 2" '[ $rc -eq 2 ] && grep -q "empty" "$TMP/err"'
"$BIN" rerank --model "$CE" q > /dev/null 2> "$TMP/err"; rc=$?
check "no passage exits 2" '[ $rc -eq 2 ] && grep -q "no passage" "$TMP/err"'
seq 1 1001 > "$TMP/many"
"$BIN" rerank --model "$CE" --passages "$TMP/many" q > /dev/null 2> "$TMP/err"; rc=$?
check "1001 passages exit 2 naming the limit" '[ $rc -eq 2 ] && grep -q "1000" "$TMP/err"'
python3 -c 'print("a" * (1 << 20 | 1))' > "$TMP/big"
"$BIN" rerank --model "$CE" --passages "$TMP/big" q > /dev/null 2> "$TMP/err"; rc=$?
check "a passage over 1 MiB exits 2" '[ $rc -eq 2 ] && grep -q "bytes" "$TMP/err"'
"$BIN" rerank --model "$CE" --top 0 q p > /dev/null 2>&1; rc=$?
check "--top 0 is a usage error" '[ $rc -eq 2 ]'
"$BIN" rerank --model "$EMB" q p > /dev/null 2> "$TMP/err"; rc=$?
check "a sentence-embedding model is refused naming what is missing" '[ $rc -eq 1 ] && grep -q "ForSequenceClassification" "$TMP/err"'

# scores against the goldens: golden pairs 0-2 have one query each; every query with its passage
python3 - > "$TMP/args" <<'PY'
import json
g = json.load(open("tests/fixtures/rerank_golden.json"))
for q, p in g["pairs"][:3]:
    print(json.dumps([q, p]))
PY
i=0
while IFS= read -r line; do
    q=$(printf '%s' "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0])')
    p=$(printf '%s' "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)[1])')
    "$BIN" rerank --model "$CE" --json "$q" "$p" > "$TMP/o$i.json" 2> "$TMP/err" || ko "rerank pair $i: $(cat "$TMP/err")"
    "$BIN" rerank --model "$CE" --json --raw "$q" "$p" > "$TMP/r$i.json" 2> "$TMP/err" || ko "rerank --raw pair $i"
    "$BIN" rerank --model "$CE3" --json "$q" "$p" > "$TMP/t$i.json" 2> "$TMP/err" || ko "rerank 3 labels pair $i"
    i=$((i + 1))
done < "$TMP/args"
python3 - "$TMP" <<'PY' && ok || ko "scores, logits and labels equal transformers' within 1e-5"
import json, sys
t = sys.argv[1]
g = json.load(open("tests/fixtures/rerank_golden.json"))
one, three = g["models"]["tiny-cross-encoder"]["rows"], g["models"]["tiny-cross-encoder-3"]["rows"]
labels = ["contradiction", "entailment", "neutral"]
close = lambda a, b: abs(a - b) <= 1e-5 * abs(b) + 1e-6
bad = []
for i in range(3):
    o, r, th = (json.load(open(f"{t}/{k}{i}.json")) for k in "ort")
    if not close(o["results"][0]["score"], one[i]["score"][0]): bad.append(("score", i))
    if not close(r["results"][0]["score"], one[i]["logits"][0]) or r["activation"] != "none": bad.append(("raw", i))
    s = th["results"][0]["scores"]
    if sorted(s) != labels or any(not close(s[l], three[i]["score"][k]) for k, l in enumerate(labels)): bad.append(("3", i))
    if th["results"][0]["label"] != max(s, key=s.get): bad.append(("label", i))
    if o["results"][0]["tokens"] != len(one[i]["ids"]): bad.append(("tokens", i))
if bad:
    print(bad, file=sys.stderr)
    sys.exit(1)
PY

# several passages: best first, the same scores as one at a time; --passages FILE = arguments; --top
Q="who makes honey"
"$BIN" rerank --model "$CE" --json "$Q" "Bees make honey." "The store survives a crash." "honey bees" "x y z" > "$TMP/many.json"; rc=$?
check "four passages exit 0" '[ $rc -eq 0 ]'
printf 'Bees make honey.\n\nThe store survives a crash.\nhoney bees\nx y z\n' > "$TMP/p.txt"
"$BIN" rerank --model "$CE" --json --passages "$TMP/p.txt" "$Q" > "$TMP/file.json"
"$BIN" rerank --model "$CE" --json --top 2 "$Q" "Bees make honey." "The store survives a crash." "honey bees" "x y z" > "$TMP/top.json"
"$BIN" rerank --model "$CE" --json "$Q" "honey bees" > "$TMP/alone.json"
python3 - "$TMP" <<'PY' && ok || ko "sorted best first; --passages and --top agree; alone = batched bit for bit"
import json, sys
t = sys.argv[1]
m, f, top, alone = (json.load(open(f"{t}/{k}.json")) for k in ("many", "file", "top", "alone"))
s = [r["score"] for r in m["results"]]
assert s == sorted(s, reverse=True), s
assert sorted(r["index"] for r in m["results"]) == [0, 1, 2, 3]
assert m["results"] == f["results"], "--passages differs"
assert top["results"] == m["results"][:2], "--top differs"
hb = [r for r in m["results"] if r["text"] == "honey bees"][0]
assert hb["score"] == alone["results"][0]["score"], (hb, alone)
PY
"$BIN" rerank --model "$CE" "$Q" "Bees make honey." "x y z" > "$TMP/text" 2>&1
check "text output ranks (1. and 2.)" 'grep -q "^ 1\. " "$TMP/text" && grep -q "^ 2\. " "$TMP/text"'

# search --rerank over a small store (the tiny embedding model, so that indexing is quick)
mkdir -p "$TMP/docs"
printf 'Bees make honey from the nectar of flowers.\n' > "$TMP/docs/bees.txt"
printf 'The store writes a journal before it changes a page.\n' > "$TMP/docs/store.txt"
printf 'A licence file: permission is granted on these terms.\n' > "$TMP/docs/licence.txt"
printf 'Tea parties at the March Hare house go on forever.\n' > "$TMP/docs/tea.txt"
"$BIN" index --db "$TMP/s.db" --model "$EMB" "$TMP/docs" > /dev/null 2> "$TMP/err" || ko "index: $(cat "$TMP/err")"
"$BIN" search --db "$TMP/s.db" --model "$EMB" -k 3 --json "who makes honey" > "$TMP/plain.json" 2> "$TMP/err"
"$BIN" search --db "$TMP/s.db" --model "$EMB" -k 3 --json --rerank "$CE" --rerank-top 4 "who makes honey" > "$TMP/rr.json" 2> "$TMP/err"; rc=$?
check "search --rerank exits 0 ($(cat "$TMP/err"))" '[ $rc -eq 0 ]'
for f in bees store licence tea; do cat "$TMP/docs/$f.txt"; done | tr -d '\r' > "$TMP/chunks"
python3 - "$TMP" "$BIN" "$CE" <<'PY' && ok || ko "search --rerank: the cross-encoder's order and scores, first stage kept"
import json, subprocess, sys
t, binp, ce = sys.argv[1:4]
j = json.load(open(f"{t}/rr.json"))
plain = json.load(open(f"{t}/plain.json"))
assert j["rerank"] == "tiny-cross-encoder", j.get("rerank")
r = j["results"]
assert len(r) == 3, len(r)
s = [x["score"] for x in r]
assert s == sorted(s, reverse=True), s
assert [x["rank"] for x in r] == [1, 2, 3]
assert all("first_stage_rank" in x and "first_stage_score" in x for x in r)
# the first-stage ranks are those of a plain search (its first 3 match on rank and score)
fs = {x["path"]: (x["rank"], x["score"]) for x in plain["results"]}
for x in r:
    if x["path"] in fs:
        assert fs[x["path"]][0] == x["first_stage_rank"], (x, fs)
        assert abs(fs[x["path"]][1] - x["first_stage_score"]) < 1e-6, (x, fs)
# the scores are `modattn rerank`'s for the same texts
texts = [x["text"] for x in r]
out = subprocess.run([binp, "rerank", "--model", ce, "--json", "who makes honey", *texts], capture_output=True, text=True, check=True)
rr = {x["text"]: x["score"] for x in json.loads(out.stdout)["results"]}
for x in r:
    assert abs(rr[x["text"]] - x["score"]) <= 1e-6 * abs(x["score"]), (x["score"], rr[x["text"]])  # search prints 7 digits
PY
"$BIN" search --db "$TMP/s.db" --model "$EMB" --rerank "$EMB" q > /dev/null 2> "$TMP/err"; rc=$?
check "search --rerank with no cross-encoder is refused" '[ $rc -eq 1 ] && grep -q "ForSequenceClassification" "$TMP/err"'
# several labels give no order (their scores are per label, not per pair): refused, not misread
"$BIN" search --db "$TMP/s.db" --model "$EMB" --rerank "$CE3" q > "$TMP/out" 2> "$TMP/err"; rc=$?
check "search --rerank with a 3-label cross-encoder is refused ($rc: $(cat "$TMP/err"))" '[ $rc -eq 2 ] && grep -q "has 3 labels" "$TMP/err" && [ ! -s "$TMP/out" ]'
"$BIN" search --db "$TMP/s.db" --model "$EMB" --rerank "$CE" --rerank-top 1001 q > /dev/null 2>&1; rc=$?
check "--rerank-top over the limit exits 2" '[ $rc -eq 2 ]'

echo "test_cli_rerank: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
