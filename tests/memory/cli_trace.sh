#!/usr/bin/env bash
# tests/memory/cli_trace.sh MODATTN — --trace covers every phase: tokenisation, batches, encoder ops,
# attention, reading/extracting/chunking, store writes, vector loading, the scan and chunk fetches;
# --stats --json gives one parseable line with memory per category.
set -u
BIN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
has_spans() { # has_spans FILE NAME...
  local f=$1
  shift
  if python3 - "$f" "$@" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $f lacks spans among: $*" >&2; fi
import json, sys
names = {e["name"] for e in json.load(open(sys.argv[1]))["traceEvents"]}
missing = [n for n in sys.argv[2:] if n not in names]
if missing:
    print("missing:", missing, "have:", sorted(names), file=sys.stderr)
sys.exit(1 if missing else 0)
PY
}
"$BIN" --trace "$tmp/index.json" index --quiet --db "$tmp/s.db" demo/corpus/jargon-foo.txt demo/corpus/sqlite-isolation.html >/dev/null 2>&1
has_spans "$tmp/index.json" tokenize batch encoder.forward encoder.qkv encoder.ffn_up attention index.read_extract_chunk index.store
"$BIN" --trace "$tmp/search.json" search --db "$tmp/s.db" "isolation" >/dev/null 2>&1
has_spans "$tmp/search.json" tokenize attention search.load_vectors search.scan search.fetch_chunks
"$BIN" --stats search --json --db "$tmp/s.db" "isolation" 2>"$tmp/stats" >/dev/null || true
if python3 -c "import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['stats']; sys.exit(0 if j['memory']['weights']['peak']>0 and any(i['calls']>0 for i in j['implementations']) else 1)" "$tmp/stats"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: --stats --json: $(cat "$tmp/stats")" >&2
fi
echo "cli_trace: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
