#!/bin/sh
# tests/model/cli_model_families.sh MODATTN — `modattn embed --model DIR` on each model of
# the other encoder families (xlm-roberta, distilbert, mpnet, modernbert, new, gte, nomic_bert, jina_bert,
# qwen3, qwen2: tiny-xlm-roberta, tiny-distilbert, tiny-mpnet, tiny-modernbert, tiny-gte, tiny-gte-hf,
# tiny-nomic, tiny-nomic-gptj, tiny-jina, tiny-qwen3, tiny-qwen2, all-mpnet-base-v2; `make model` lays them out): exit 0, one JSON line per text with
# the token count and the vector of sentence-transformers' golden (cosine >= 0.99999) for
# "Hello world" and a Portuguese sentence of the goldens. A missing model FAILS.
set -u
BIN=$1
pass=0
fail=0
for m in tiny-xlm-roberta:golden_tiny_xlm_roberta tiny-distilbert:golden_tiny_distilbert \
         tiny-mpnet:golden_tiny_mpnet tiny-modernbert:golden_tiny_modernbert tiny-gte:golden_tiny_gte tiny-gte-hf:golden_tiny_gte_hf \
         tiny-nomic:golden_tiny_nomic tiny-nomic-gptj:golden_tiny_nomic_gptj tiny-jina:golden_tiny_jina \
         tiny-qwen3:golden_tiny_qwen3 tiny-qwen2:golden_tiny_qwen2 \
         all-mpnet-base-v2:golden_all_mpnet_base_v2; do
    dir=.models/${m%%:*}
    gold=tests/fixtures/${m#*:}.jsonl
    if [ ! -d "$dir" ]; then
        echo "FAIL: $dir is missing: run \`make model\`" >&2
        fail=$((fail + 1))
        continue
    fi
    out=$("$BIN" embed --model "$dir" "Hello world" "Café au lait, crème brûlée, naïve façade, jalapeño, résumé." 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL: $dir: embed exited $rc: $out" >&2
        fail=$((fail + 1))
        continue
    fi
    if printf '%s\n' "$out" | python3 -c '
import json, math, sys
gold = {}
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    gold[r["text"]] = r
texts = ["Hello world", "Café au lait, crème brûlée, naïve façade, jalapeño, résumé."]
rows = [json.loads(l) for l in sys.stdin.read().splitlines() if l.strip()]
assert len(rows) == 2, "want 2 lines, got %d" % len(rows)
for i, (t, r) in enumerate(zip(texts, rows)):
    g = gold[t]
    assert r["index"] == i and r["tokens"] == len(g["ids"]), (r["index"], r["tokens"], len(g["ids"]))
    a, b = r["embedding"], g["embedding"]
    assert len(a) == len(b), (len(a), len(b))
    cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    assert cos >= 0.99999, "%r: cosine %.9f" % (t, cos)
    print("%s: %r: %d tokens, cosine %.9f" % (sys.argv[2], t[:20], r["tokens"], cos))
' "$gold" "$dir"; then
        pass=$((pass + 1))
    else
        echo "FAIL: $dir: the vectors differ from $gold" >&2
        fail=$((fail + 1))
    fi
done
# Qwen3-Embedding's query instruction through the prompt mechanism: `--prompt-name query` equals
# sentence-transformers' encode(prompt_name="query"), which is the golden of prompt + text
out=$("$BIN" embed --model .models/tiny-qwen3 --prompt-name query "Hello world" 2>&1)
if printf '%s\n' "$out" | python3 -c '
import json, math, sys
p = json.load(open(".models/tiny-qwen3/config_sentence_transformers.json"))["prompts"]["query"]
assert p.startswith("Instruct: ") and p.endswith("\nQuery:"), p
gold = {}
for line in open("tests/fixtures/golden_tiny_qwen3.jsonl", encoding="utf-8"):
    r = json.loads(line)
    gold[r["text"]] = r
g = gold[p + "Hello world"]
r = json.loads(sys.stdin.read().splitlines()[0])
assert r["tokens"] == len(g["ids"]), (r["tokens"], len(g["ids"]))
a, b = r["embedding"], g["embedding"]
cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
assert cos >= 0.99999, "cosine %.9f" % cos
print("tiny-qwen3 --prompt-name query: %d tokens, cosine %.9f" % (r["tokens"], cos))
'; then
    pass=$((pass + 1))
else
    echo "FAIL: tiny-qwen3 --prompt-name query: $out" >&2
    fail=$((fail + 1))
fi
echo "cli_model_families: $pass passed, $fail failed"
[ $fail -eq 0 ]
