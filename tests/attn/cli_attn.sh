#!/usr/bin/env bash
# tests/attn/cli_attn.sh MODATTN PLUGIN_DIR — the attention commands of the CLI, as a user runs them:
# exit statuses, messages, and JSON that parses and says what it should.
set -u
BIN=$1
PLUGINS=$2
# the whole-grid checks of reference and reference_plugin: 0 = the whole grid; the sanitizer build
# runs its first CONFIGS (the hand-picked cases, every feature of the contract, the head of the
# random sweep), as cli_devices and cli_xla do: the sanitizers look for our host code's memory errors
CONFIGS=${3:-0}
if [ "$CONFIGS" -gt 0 ]; then GRID="--configs $CONFIGS"; WANT=$CONFIGS; else GRID=""; WANT=500; fi
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# expect STATUS NEEDLE -- command...: runs it, checks the exit status and that stdout+stderr contain NEEDLE
expect() {
  local want=$1 needle=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ]; then bad "'$*' exited $rc, expected $want: $out"; return; fi
  if [ -n "$needle" ] && ! grep -qF -- "$needle" <<<"$out"; then bad "'$*' output lacks '$needle': $out"; return; fi
  ok
}
json_check() { # json_check PYTHON-EXPR -- command...: the command's stdout is JSON `j` and EXPR holds
  local expr=$1
  shift 2
  local out
  out=$("$@" 2>/dev/null)
  if python3 -c "import json,sys; j=json.loads(sys.stdin.read()); sys.exit(0 if ($expr) else 1)" <<<"$out"; then ok
  else bad "JSON check '$expr' failed for '$*': $out"; fi
}

expect 0 "usage: modattn" -- "$BIN" --help
expect 2 "usage: modattn" -- "$BIN"
expect 2 "unknown command 'frobnicate'" -- "$BIN" frobnicate
expect 0 "modattn 0." -- "$BIN" --version
# --version says what the build holds and where it came from (issue 17)
for line in "devices: cpu" "attention: reference" "encoder GEMM: " "cpu_flash kernels: " "server: " "build: " "commit: " "cpu: "; do
  expect 0 "$line" -- "$BIN" --version
done
expect 0 "reference" -- "$BIN" backends
expect 0 "usage: modattn backends" -- "$BIN" backends --help
expect 0 "usage: modattn check" -- "$BIN" check --help
expect 0 "usage: modattn explain" -- "$BIN" explain --help
json_check "any(i['name']=='reference' and i['available'] for i in j['implementations'])" -- "$BIN" backends --json
json_check "len(j['implementations'])==1 and j['implementations'][0]['name']=='reference' and j['implementations'][0]['passed']>=$WANT and j['implementations'][0]['failed']==0" -- "$BIN" check --backend reference $GRID --json
expect 0 "OK" -- "$BIN" --threads 1 check --backend reference --configs 50
expect 2 "no implementation named 'nope'" -- "$BIN" check --backend nope
expect 2 "no implementation named 'nope'" -- "$BIN" --attn nope backends
expect 2 "--threads (0 = all CPUs): 'lots'" -- "$BIN" --threads lots backends
expect 2 "--attn needs a value" -- "$BIN" backends --attn
expect 2 "unknown option" -- "$BIN" check --frob
expect 0 "chosen" -- "$BIN" explain --shape 1,12,12,128,128,32
expect 0 "causal" -- "$BIN" explain --shape 2,12,4,100,300,64 --causal
expect 2 "--shape B,Hq,Hkv,Sq,Sk,D is required" -- "$BIN" explain --shape 1,2,3
expect 2 "--shape B,Hq,Hkv,Sq,Sk,D is required" -- "$BIN" explain
expect 2 "must be a multiple of Hkv" -- "$BIN" explain --shape 1,12,5,10,10,32
json_check "j['implementations'][0]['verdict']=='chosen' and j['policy']=='reference'" -- "$BIN" explain --shape 1,2,2,8,8,16 --attn reference --json

# plugins: the reference as a shared object loads and passes; broken ones are refused with reasons
json_check "j['implementations'][0]['name']=='reference_plugin' and j['implementations'][0]['passed']>=$WANT and j['implementations'][0]['failed']==0" -- env MODATTN_PLUGIN_PATH="$PLUGINS/good" "$BIN" check --backend reference_plugin $GRID --json
expect 0 "reference_plugin" -- env MODATTN_PLUGIN_PATH="$PLUGINS/good" "$BIN" backends
expect 1 "api_version" -- env MODATTN_PLUGIN_PATH="$PLUGINS/bad" "$BIN" backends
expect 1 "no accelerator found" -- env MODATTN_PLUGIN_PATH="$PLUGINS/bad" "$BIN" backends
json_check "len(j['refused_plugins'])==3 and not any(i['name']=='future_plugin' for i in j['implementations'])" -- env MODATTN_PLUGIN_PATH="$PLUGINS/bad" "$BIN" backends --json

# bench and tune
expect 0 "GFLOP/s" -- "$BIN" bench attn --shape 1,2,2,64,64,32 --min-time 0.01
json_check "all(r['valid'] and r['gflops']>0 and r['shape']==[1,2,1,32,48,16] and r['causal'] for r in j['results']) and len(j['results'])>=1" -- "$BIN" bench attn --shape 1,2,1,32,48,16 --causal --min-time 0.01 --json
expect 2 "--shape wants" -- "$BIN" bench attn --shape 1,2,3
expect 2 "unknown benchmark" -- "$BIN" bench frob
expect 0 "measured" -- "$BIN" --attn tune explain --shape 1,4,4,64,64,32
json_check "any(i['verdict']=='chosen' and 'measured_ms' in i for i in j['implementations'])" -- "$BIN" explain --shape 1,4,4,64,64,32 --json
# a tune cache whose times are negative, absurd or not numbers is not believed, and says so
TC=$(mktemp -d)
MODATTN_CACHE_DIR=$TC "$BIN" --attn tune explain --shape 1,4,4,64,64,32 > /dev/null 2>&1
python3 - "$TC/tune-v1.tsv" <<'PY'
import sys
p = sys.argv[1]; lines = open(p).read().splitlines()
key, win, times = lines[1].split("\t")
names = [t.split("=")[0] for t in times.split(",")]
# the slowest one made the winner, with a negative time; then the same key again, absurd
bad = ",".join(f"{n}={-5 if n == names[-1] else 0.1}" for n in names)
open(p, "w").write("\n".join([lines[0], f"{key}\t{names[-1]}\t{bad}"]) + "\n")
PY
expect 0 "is not a number of milliseconds in (0, 1e7)" -- env MODATTN_CACHE_DIR="$TC" "$BIN" --attn auto explain --shape 1,4,4,64,64,32
json_check "not any('measured_ms' in i for i in j['implementations'])" -- env MODATTN_CACHE_DIR="$TC" "$BIN" --attn auto explain --shape 1,4,4,64,64,32 --json
rm -rf "$TC"

# trace and stats
tr=$(mktemp)
expect 0 "attention implementations" -- "$BIN" --stats --trace "$tr" check --backend reference --configs 20
if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if any(e['name']=='attention' and e['args']['impl']=='reference' for e in j['traceEvents']) else 1)" "$tr"; then ok; else bad "trace has no attention spans"; fi
rm -f "$tr"
expect 1 "budget" -- "$BIN" --mem-budget 1K check --backend reference --configs 5

# values that are empty, not numbers, out of range or one too many are usage errors (exit 2) that
# name the option (issue 18, class 10); --trace is checked before any work
expect 2 "--threads" -- "$BIN" --threads "" backends
expect 2 "--attn: an empty value" -- "$BIN" --attn "" backends
expect 2 "--device: an empty value" -- "$BIN" --device "" backends
expect 2 "--seed: 'abc'" -- "$BIN" check --seed abc
expect 2 "--seed: '-1'" -- "$BIN" check --seed -1
expect 2 "--seed: '99999999999999999999999'" -- "$BIN" check --seed 99999999999999999999999
expect 2 "--configs: '0'" -- "$BIN" check --configs 0
expect 2 "no implementation named 'nosuch'" -- "$BIN" check --backend nosuch
expect 2 "--max-gflop: '-1'" -- "$BIN" bench attn --max-gflop -1
expect 2 "--peak (GFLOP/s): '-5'" -- "$BIN" bench attn --peak -5
expect 2 "--min-time (seconds): 'x'" -- "$BIN" bench attn --min-time x --shape 1,1,1,16,16,16
expect 2 "--shape wants" -- "$BIN" bench attn --shape 1,2,2,64,64,32,7
expect 2 "--shape B,Hq,Hkv,Sq,Sk,D is required" -- "$BIN" explain --shape 1,2,2,64,64,32,7
expect 2 "--shape B,Hq,Hkv,Sq,Sk,D is required" -- "$BIN" explain --shape 1,2,2,64,64,
expect 2 "--trace: the folder '/nonexistent-dir' does not exist" -- "$BIN" --trace /nonexistent-dir/t.json check --backend reference
expect 2 "it is a folder" -- "$BIN" --trace /tmp backends
expect 0 "OK" -- "$BIN" check --backend reference --configs 5 --seed 0x10
expect 0 "OK" -- "$BIN" --mem-budget 0 check --backend reference --configs 5

# check --seed draws other inputs over the same configurations: the worst error ratio (a function
# of the inputs) changes with the seed, is the same for the same seed, and 0 is the default seed
worst() { "$BIN" check --backend reference --configs 20 "$@" --json 2>/dev/null |
  python3 -c "import json,sys; j=json.load(sys.stdin); i=j['implementations'][0]; print(j['configurations'], i['passed'], repr(i['worst_error_ratio']))"; }
w_def=$(worst); w0=$(worst --seed 0); w1=$(worst --seed 1); w1b=$(worst --seed 1); w2=$(worst --seed 2)
case "$w_def" in "20 20 "*) ok ;; *) bad "check --configs 20: '$w_def'" ;; esac
[ "$w1" = "$w1b" ] && [ -n "$w1" ] && ok || bad "check --seed 1 twice differs: '$w1' / '$w1b'"
[ "$w0" = "$w_def" ] && ok || bad "check --seed 0 is not the default seed: '$w0' / '$w_def'"
[ "${w1% *}" = "${w_def% *}" ] && [ "$w1" != "$w_def" ] && [ "$w2" != "$w1" ] && [ "$w2" != "$w_def" ] && ok ||
  bad "check --seed does not change the inputs (same configurations, other errors): default '$w_def', 1 '$w1', 2 '$w2'"
# check --verbose: progress every 100 configurations on stderr; without it, none
out=$("$BIN" check --backend reference --configs 200 --verbose 2>&1 >/dev/null)
grep -q "^  100/200 configurations" <<<"$out" && grep -q "^  200/200 configurations" <<<"$out" && ok ||
  bad "check --verbose: no progress lines: $out"
out=$("$BIN" check --backend reference --configs 200 2>&1 >/dev/null)
grep -q "configurations" <<<"$out" && bad "check without --verbose prints progress: $out" || ok

# bench attn --peak (and MODATTN_PEAK_GFLOPS): % of that peak, in the table and in the JSON
json_check "j['peak_gflops']==250 and len(j['results'])==1 and all(abs(r['pct_peak']-100*r['gflops']/250)<1e-9 for r in j['results'])" -- "$BIN" bench attn --backend reference --shape 1,2,2,32,32,16 --min-time 0.01 --peak 250 --json
json_check "j['peak_gflops']==125 and all(abs(r['pct_peak']-100*r['gflops']/125)<1e-9 for r in j['results'])" -- env MODATTN_PEAK_GFLOPS=125 "$BIN" bench attn --backend reference --shape 1,2,2,32,32,16 --min-time 0.01 --json
json_check "'peak_gflops' not in j and all('pct_peak' not in r for r in j['results'])" -- env -u MODATTN_PEAK_GFLOPS "$BIN" bench attn --backend reference --shape 1,2,2,32,32,16 --min-time 0.01 --json
out=$("$BIN" bench attn --backend reference --shape 1,2,2,32,32,16 --min-time 0.01 --peak 250 2>&1)
python3 -c "
import sys
rows = [l.split() for l in sys.stdin.read().splitlines() if l.startswith('reference')]
# backend shape causal ms GFLOP/s workspace %peak check
assert len(rows) == 1 and abs(float(rows[0][6]) - 100 * float(rows[0][4]) / 250) < 0.06 + 1e-3 * float(rows[0][6]), rows
assert rows[0][7] == 'ok', rows" <<<"$out" && ok || bad "bench attn --peak 250: the %peak column: $out"
# bench attn without --shape: the sweep (B 1,2,4,8 x H 12,16 x S 128..8192 x D 32,64,128, causal and
# not), every shape of it at or under --max-gflop and none above (a bound no shape is near)
json_check "$(cat <<'PY'
(lambda got, grid: sorted(got) == sorted(grid) and len(grid) >= 10 and all(r['valid'] and r['gflops'] > 0 for r in j['results']))(
  [(tuple(r['shape']), r['causal']) for r in j['results']],
  [((B, H, H, S, S, D), c) for c in (False, True) for D in (32, 64, 128) for S in (128, 256, 512, 1024, 2048, 4096, 8192)
   for B in (1, 2, 4, 8) for H in (12, 16)
   if not (0.97 * 0.09e9 < 4 * B * H * S * S * D * (0.5 if c else 1) < 1.03 * 0.09e9) and 4 * B * H * S * S * D * (0.5 if c else 1) <= 0.09e9])
PY
)" -- "$BIN" bench attn --backend cpu_flash --max-gflop 0.09 --min-time 0.005 --json
# (no shape of the grid lies within 3% of 0.09 GFLOP, so the formula's causal rounding cannot matter)
python3 -c "
import sys
near = [(B, H, S, D, c) for c in (0, 1) for D in (32, 64, 128) for S in (128, 256, 512, 1024, 2048, 4096, 8192)
        for B in (1, 2, 4, 8) for H in (12, 16) if 0.97 * 0.09e9 < 4 * B * H * S * S * D * (0.5 if c else 1) < 1.03 * 0.09e9]
sys.exit(1 if near else 0)" && ok || bad "a sweep shape lies within 3% of the --max-gflop bound of the test"

echo "cli_attn: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
