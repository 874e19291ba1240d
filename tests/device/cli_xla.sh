#!/bin/sh
# tests/device/cli_xla.sh MODATTN — the XLA device on XLA's CPU plugin (the pinned xla-cpu-pjrt wheel
# `make deps` lays out; the same code runs libtpu and the CUDA plugin): it is listed; the whole
# encoder compiled as one program gives sentence-transformers' vectors on every golden text (cosine
# >= 0.99999, the same token counts) and our CPU device's; the compiled program is cached on disk,
# used on the next run, and a damaged cache file is recompiled, never trusted; a plugin that is
# missing, not a plugin, or asked for what it does not run is a clear error naming it. A build
# without the xla device fails here (run `make deps`), it does not skip.
set -u
BIN=$1
CONFIGS=${2:-0} # conformance configurations: 0 = the whole grid (the sanitizer build runs a part)
MODEL=.models/all-MiniLM-L6-v2
GOLD=tests/fixtures/golden_minilm.jsonl
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$2"; then ok; else ko "$1"; fi; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export MODATTN_CACHE_DIR="$TMP/cache"
if [ ! -d "$MODEL" ]; then
    echo "FAIL: $MODEL is missing: run \`make model\` first" >&2
    echo "cli_xla: 0 passed, 1 failed"
    exit 1
fi

"$BIN" devices --json > "$TMP/dev.json" 2> "$TMP/err"; rc=$?
check "devices --json exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "devices lists xla:0 on the PJRT CPU plugin, whole encoder ($(head -c 300 "$TMP/err"))" \
    "python3 -c \"import json,sys; d=[x for x in json.load(open('$TMP/dev.json'))['devices'] if x['name']=='xla:0']; sys.exit(0 if d and d[0]['platform']=='PJRT cpu' and d[0]['whole_encoder'] and 'PJRT API 0.' in d[0]['driver'] else 1)\""

# every golden text through the xla device, one per line as JSON (texts with newlines), and the CPU's
# (the sanitizer build, CONFIGS != 0, runs every third text: 83 of 2 to 256 tokens, 5 of them
# truncated, a third of the tokens; the plain build runs all; the goldens filtered alike). The
# compile cache's checks and bf16 run that third in both builds (sub.jsonl, gold_sub.jsonl): XLA's
# CPU plugin takes ~8 s to run all 249 texts, and what those checks look at (which programs are
# compiled or read, the same bits) is per bucket, which every third text fills as all do.
python3 -c "
import json
part = '$CONFIGS' != '0'
with open('$TMP/gold.jsonl', 'w') as g, open('$TMP/gold_sub.jsonl', 'w') as gs, open('$TMP/sub.jsonl', 'w') as s:
    for i, l in enumerate(open('$GOLD')):
        j = json.loads(l)
        if i % 3 == 0:
            gs.write(l)
            s.write(json.dumps(j['text']) + '\n')
        if part and i % 3:
            continue
        g.write(l)
        print(json.dumps(j['text']))" > "$TMP/in.jsonl"
GOLD="$TMP/gold.jsonl"
# the first run, on the third: it compiles, and writes the compiled programs to the cache
"$BIN" --device xla --trace "$TMP/t1.json" embed --model "$MODEL" --jsonl - < "$TMP/sub.jsonl" > "$TMP/xsub.out" 2> "$TMP/err"; rc=$?
check "embed --device xla on $(wc -l < "$TMP/sub.jsonl") golden texts exits 0 (rc $rc: $(head -c 300 "$TMP/err"))" '[ $rc -eq 0 ]'
check "the first run compiled (an xla.compile span)" 'grep -q "\"name\":\"xla.compile\"" "$TMP/t1.json"'
check "it wrote compiled programs to the cache" '[ -n "$(ls "$MODATTN_CACHE_DIR"/xla/*.xlaexe 2>/dev/null)" ]'
# the cache: a second run compiles nothing and gives the same bits, and --stats says so (one run
# gives the trace and the counters)
"$BIN" --device xla --trace "$TMP/t2.json" --stats embed --model "$MODEL" --jsonl - < "$TMP/sub.jsonl" > "$TMP/xla2.out" 2> "$TMP/stats"
check "a second run compiles nothing (every bucket from the cache)" '! grep -q "\"name\":\"xla.compile\"" "$TMP/t2.json"'
check "--stats counts the device's programs: none compiled, some from the cache ($(grep '^xla:0' "$TMP/stats"))" \
    'grep -q "^xla:0: 0 programs compiled (0.00 s), [1-9][0-9]* from the compile cache" "$TMP/stats"'
check "--stats shows the weights' device memory on xla:0" 'grep -q "device memory on xla:0" "$TMP/stats"'
check "and gives the same bits" 'cmp -s "$TMP/xsub.out" "$TMP/xla2.out"'
# damaged cache files: recompiled, the same vectors, no crash. Two of them, the first and the last
# (every file takes the same path; damaging all recompiled every bucket, the cost of the first run)
cached=$(ls "$MODATTN_CACHE_DIR"/xla/*.xlaexe | wc -l)
for f in $(ls "$MODATTN_CACHE_DIR"/xla/*.xlaexe | sed -n '1p;$p'); do printf 'damaged' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null; done
"$BIN" --device xla --trace "$TMP/t3.json" embed --model "$MODEL" --jsonl - < "$TMP/sub.jsonl" > "$TMP/xla3.out" 2> "$TMP/err"; rc=$?
check "damaged cache files: exit 0 (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ]'
recompiled=$(grep -o '"name":"xla.compile"' "$TMP/t3.json" | wc -l)
check "the 2 damaged cache files of $cached are recompiled, the others read ($recompiled compiles)" '[ "$cached" -ge 2 ] && [ "$recompiled" -eq 2 ]'
check "and give the same bits" 'cmp -s "$TMP/xsub.out" "$TMP/xla3.out"'
# every golden text (the plain build; the sanitizer build's are the third already run) against
# sentence-transformers and against our CPU device
if [ "$CONFIGS" -gt 0 ]; then
    cp "$TMP/xsub.out" "$TMP/xla.out"
else
    "$BIN" --device xla embed --model "$MODEL" --jsonl - < "$TMP/in.jsonl" > "$TMP/xla.out" 2> "$TMP/err"; rc=$?
    check "embed --device xla on all $(wc -l < "$TMP/in.jsonl") golden texts exits 0 (rc $rc: $(head -c 300 "$TMP/err"))" '[ $rc -eq 0 ]'
fi
"$BIN" --device cpu embed --model "$MODEL" --jsonl - < "$TMP/in.jsonl" > "$TMP/cpu.out" 2>/dev/null
python3 - "$GOLD" "$TMP/xla.out" "$TMP/cpu.out" > "$TMP/cmp" <<'PY'
import json, math, sys
gold = [json.loads(l) for l in open(sys.argv[1])]
xla = [json.loads(l) for l in open(sys.argv[2])]
cpu = [json.loads(l) for l in open(sys.argv[3])]
def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)) or 1)
assert len(xla) == len(gold) == len(cpu), (len(xla), len(gold), len(cpu))
worst = min(cos(g["embedding"], x["embedding"]) for g, x in zip(gold, xla))
worst_cpu = min(cos(c["embedding"], x["embedding"]) for c, x in zip(cpu, xla))
tok = sum(1 for g, x in zip(gold, xla) if len(g["ids"]) != x["tokens"])
print(f"{worst:.9f} {worst_cpu:.9f} {tok} {len(gold)}")
PY
read -r worst worst_cpu tokbad n < "$TMP/cmp" || true
echo "xla vs sentence-transformers: min cosine $worst over $n texts; vs --device cpu: $worst_cpu"
check "xla vs sentence-transformers: min cosine $worst >= 0.99999" "python3 -c 'import sys; sys.exit(0 if float(\"$worst\") >= 0.99999 else 1)'"
check "xla vs our CPU device: min cosine $worst_cpu >= 0.99999" "python3 -c 'import sys; sys.exit(0 if float(\"$worst_cpu\") >= 0.99999 else 1)'"
check "token counts equal the goldens' ids ($tokbad differ)" '[ "$tokbad" = 0 ]'
: > "$(ls "$MODATTN_CACHE_DIR"/xla/*.xlaexe | head -1)" # an empty file too
"$BIN" --device xla embed --model "$MODEL" "an empty cache file" > /dev/null 2>&1; rc=$?
check "an empty cache file: exit 0 (rc $rc)" '[ $rc -eq 0 ]'

# attention alone through the contract: the conformance grid against the fp64 oracle. Every
# configuration is one XLA compile, ~0.35 s of CPU each at the plugin's default LLVM optimisation
# (about 4 of this test's 5 minutes); what the grid checks is ours: the program xla_hlo.c writes
# for each shape and feature and the views gathered and scattered around it, the same HLO whatever
# code XLA's backend makes of it. So the grid compiles at LLVM level 0 and with XLA's classic
# elemental emitter instead of its MLIR fusion emitters (XLA_FLAGS, XLA's own variable): the MLIR
# ones build a fresh MLIR context and pass pipeline for every program, 60% of each compile here
# (perf). The whole grid: 90 -> 34 CPU s, every configuration still run, the same worst error
# (0.5598 of the tolerance either way). Each program is also emitted as one LLVM module rather than
# split for parallel code generation (--xla_cpu_parallel_codegen_split_count=1): for programs this
# small the split only adds work (150 configurations, 3 interleaved pairs: 11.0-11.3 -> 8.9-9.6 CPU s).
# The encoder's programs above run at XLA's defaults, as users get them.
if [ "$CONFIGS" -gt 0 ]; then CARGS="--configs $CONFIGS"; else CARGS=""; fi
XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1" \
    "$BIN" check --backend xla $CARGS --json > "$TMP/check.json" 2> "$TMP/err"; rc=$?
check "check --backend xla $CARGS exits 0 (rc $rc: $(head -c 300 "$TMP/err"))" '[ $rc -eq 0 ]'
# xla claims every row of the contract's feature table (windows, ALiBi, softcap: docs/ATTENTION.md):
# every configuration runs and passes, the grid's 38 ALiBi rows included
check "every configuration ran and passed, none refused ($(head -c 400 "$TMP/check.json"))" \
    "python3 -c \"import json,sys; j=json.load(open('$TMP/check.json')); i=j['implementations'][0]; n=j['configurations']; sys.exit(0 if i['name']=='xla' and n==($CONFIGS or n) and i['passed']==n and i['failed']==0 and i['unsupported']==0 else 1)\""

# jina_bert (ALiBi, GEGLU): the compiled encoder graph is BERT's, so the model is refused at load, naming why
"$BIN" --device xla embed --model .models/tiny-jina "alibi" > "$TMP/out" 2> "$TMP/err"; rc=$?
check "tiny-jina on xla: exit 1 naming ALiBi and glu (rc $rc: $(head -c 300 "$TMP/err"))" \
    '[ $rc -eq 1 ] && grep -q "ALiBi slopes and op .glu." "$TMP/err" && [ ! -s "$TMP/out" ]'

# --device auto: every device asked and measured once, the fastest chosen, the choice explained
"$BIN" --device auto explain --model "$MODEL" > "$TMP/auto1" 2> "$TMP/err"; rc=$?
check "--device auto explain --model exits 0 (rc $rc: $(head -c 300 "$TMP/err"))" '[ $rc -eq 0 ]'
check "it says which device auto chose, with xla:0 measured ($(grep device: "$TMP/auto1"))" \
    'grep -q "^device: auto chose " "$TMP/auto1" && grep "^device:" "$TMP/auto1" | grep -q "xla:0"'
"$BIN" --device auto explain --model "$MODEL" > "$TMP/auto2" 2>/dev/null
check "a second load measures nothing (the timings are cached)" 'grep -q "measured before, cached" "$TMP/auto2"'
CHOSEN=$(sed -n 's/^model: .* on \([^ ,]*\),.*/\1/p' "$TMP/auto1")
printf '"the same text on whichever device auto chose"\n' > "$TMP/one.jsonl"
"$BIN" --device auto embed --model "$MODEL" --jsonl - < "$TMP/one.jsonl" > "$TMP/a.out" 2>/dev/null
"$BIN" --device "$CHOSEN" embed --model "$MODEL" --jsonl - < "$TMP/one.jsonl" > "$TMP/b.out" 2>/dev/null
check "embed --device auto gives the chosen device's ($CHOSEN) vectors" 'cmp -s "$TMP/a.out" "$TMP/b.out"'
# a device that fails to load the model after its timing was cached is passed over for the next
echo "not a library" > "$TMP/fake.so"
MODATTN_PJRT_PLUGIN=$TMP/fake.so "$BIN" --device auto explain --model "$MODEL" > "$TMP/auto3" 2> "$TMP/err"; rc=$?
check "auto with a broken plugin still loads elsewhere (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ]'
check "and says why xla:0 was not used ($(grep device: "$TMP/auto3" | head -c 300))" 'grep "^device:" "$TMP/auto3" | grep -q "xla:0 not used: .*dlopen"'
KEY=$(sed -n 's/\(.*|xla:0|\)[^\t]*\t.*/\1/p' "$MODATTN_CACHE_DIR/device-auto-v1.tsv" | head -1)
printf '%s\t0.0001\n' "$KEY" >> "$MODATTN_CACHE_DIR/device-auto-v1.tsv" # xla:0 "fastest", with an empty driver
MODATTN_PJRT_PLUGIN=$TMP/fake.so "$BIN" --device auto explain --model "$MODEL" > "$TMP/auto4" 2> "$TMP/err"; rc=$?
check "a cached winner that fails to load is passed over (rc $rc: $(grep device: "$TMP/auto4" | head -c 300))" \
    '[ $rc -eq 0 ] && ! grep -q "^model: .* on xla:0" "$TMP/auto4" && grep "^device:" "$TMP/auto4" | grep -q "xla:0 not used"'

# plugins that cannot be used: the plugin and the step named, exit 1, nothing on stdout
MODATTN_PJRT_PLUGIN=/nonexistent/plugin.so "$BIN" --device xla embed --model "$MODEL" hi > "$TMP/out" 2> "$TMP/err"; rc=$?
check "a plugin path that is no file: exit 1 naming it (rc $rc: $(cat "$TMP/err"))" '[ $rc -eq 1 ] && grep -q "/nonexistent/plugin.so" "$TMP/err" && [ ! -s "$TMP/out" ]'
LIBM=$(ls /usr/lib/*-linux-gnu/libm.so.6 2>/dev/null | head -1)
MODATTN_PJRT_PLUGIN=$LIBM "$BIN" --device xla embed --model "$MODEL" hi > "$TMP/out" 2> "$TMP/err"; rc=$?
check "a library that is no PJRT plugin: exit 1, 'no GetPjrtApi' (rc $rc: $(cat "$TMP/err"))" '[ $rc -eq 1 ] && grep -q "GetPjrtApi" "$TMP/err"'
echo "not a library" > "$TMP/fake.so"
MODATTN_PJRT_PLUGIN=$TMP/fake.so "$BIN" --device xla embed --model "$MODEL" hi > "$TMP/out" 2> "$TMP/err"; rc=$?
check "a file that is no library: exit 1 naming dlopen (rc $rc: $(cat "$TMP/err"))" '[ $rc -eq 1 ] && grep -q "dlopen" "$TMP/err"'
MODATTN_PJRT_PLUGIN=$TMP/fake.so "$BIN" devices > "$TMP/out" 2>&1; rc=$?
check "devices still lists it, saying why it cannot be used (rc $rc)" '[ $rc -eq 0 ] && grep -q "cannot be used" "$TMP/out"'
"$BIN" --device xla --precision int8 embed --model "$MODEL" hi > "$TMP/out" 2> "$TMP/err"; rc=$?
check "int8 on xla is refused with the reason, not run in fp32 (rc $rc: $(cat "$TMP/err"))" '[ $rc -eq 1 ] && grep -q "runs fp32 .* and bf16 .* only" "$TMP/err"'
# bf16: the dense layers' operands in bfloat16, fp32 sums (as the CPU's bf16): near the goldens, not equal
"$BIN" --device xla --precision bf16 embed --model "$MODEL" --jsonl - < "$TMP/sub.jsonl" > "$TMP/xbf.out" 2> "$TMP/err"; rc=$?
check "embed --device xla --precision bf16 exits 0 (rc $rc: $(head -c 200 "$TMP/err"))" '[ $rc -eq 0 ]'
python3 - "$TMP/gold_sub.jsonl" "$TMP/xbf.out" "$TMP/xsub.out" > "$TMP/cmpb" <<'PY'
import json, math, sys
g = [json.loads(l)["embedding"] for l in open(sys.argv[1])]
b = [json.loads(l)["embedding"] for l in open(sys.argv[2])]
f = [json.loads(l)["embedding"] for l in open(sys.argv[3])]
cos = lambda x, y: sum(p * q for p, q in zip(x, y)) / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y))
print(f"{min(cos(x, y) for x, y in zip(g, b)):.9f} {sum(1 for x, y in zip(b, f) if x != y)}")
PY
read -r wb differ < "$TMP/cmpb" || true
echo "xla bf16 vs sentence-transformers: min cosine $wb ($differ of the vectors differ from fp32's)"
check "bf16 on xla: min cosine $wb >= 0.9999 to sentence-transformers" "python3 -c 'import sys; sys.exit(0 if float(\"$wb\") >= 0.9999 else 1)'"
check "bf16 on xla is not fp32 under another name ($differ vectors differ)" '[ "$differ" -gt 0 ]'
echo "cli_xla: $pass passed, $fail failed"
[ $fail -eq 0 ]
