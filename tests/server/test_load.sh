#!/usr/bin/env bash
# tests/server/test_load.sh BIN MODEL_DIR [SECONDS] — overload, bounded: wrk drives `modattn serve`
# with twice --max-concurrent-requests connections for SECONDS (default 60) on loopback. Every
# answer must be 200 or 429 (never a 5xx), and the server's resident memory flat: the last
# samples within 10% of those a third of the way in.
set -u
BIN=$1
MODEL=$2
SECS=${3:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../pipeline/harness.sh"
need_model "$MODEL" test_load
scratch server-load
command -v wrk > /dev/null || { bad "wrk is not installed (make deps)"; finish test_load; exit 1; }
MAXC=8
# under AddressSanitizer its quarantine of freed blocks (256 MB by default) would grow the resident
# size by itself: keep it small, so that what is measured is the server's own memory
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4:thread_local_quarantine_size_kb=64" \
"$BIN" serve --model "$MODEL" --quiet --port 0 --port-file "$T/port" --max-concurrent-requests $MAXC \
  > "$T/server.log" 2>&1 &
spid=$!
trap 'kill -9 $spid 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
# curl as a client: a request, a wrong method, /search without a store
code=$(curl -s -o "$T/c1.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"model": "all-MiniLM-L6-v2", "input": ["curl says hello"]}' "http://127.0.0.1:$PORT/v1/embeddings")
check "curl POST /v1/embeddings: $code $(head -c 200 "$T/c1.json")" python3 -c "
import json, sys
j = json.load(open(sys.argv[1])); assert sys.argv[2] == '200' and len(j['data'][0]['embedding']) == 384, j" "$T/c1.json" "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "http://127.0.0.1:$PORT/v1/embeddings")
check "curl PUT /v1/embeddings: $code" [ "$code" = 405 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{"query": "x"}' \
  "http://127.0.0.1:$PORT/search")
check "curl POST /search without a store: $code" [ "$code" = 503 ]
# resident memory every second while wrk runs
( while kill -0 $spid 2>/dev/null; do awk '/^VmRSS/ {print $2}' /proc/$spid/status; sleep 1; done ) > "$T/rss" &
rpid=$!
# requests of 4 sentences each, a different body each time (the benchmark's wrk script)
INPUTS=4 SENTENCES="$HERE/../../bench/corpus_sentences.txt" \
  wrk -t2 -c$((2 * MAXC)) -d"${SECS}s" --timeout 30s -s "$HERE/../../bench/server_wrk.lua" \
  "http://127.0.0.1:$PORT/v1/embeddings" > "$T/wrk.out" 2>&1
wrc=$?
kill $rpid 2>/dev/null
cat "$T/wrk.out"
check "wrk ran: rc $wrc" [ $wrc -eq 0 ]
python3 - "$T/wrk.out" "$T/rss" "$SECS" <<'PY' || fail=$((fail + 1))
import re, sys
out = open(sys.argv[1]).read()
m = re.search(r"^RESULT .* errors=(\d+) statuses=(\S*)$", out, re.M)
st = {int(a): int(b) for a, b in re.findall(r"(\d+):(\d+)", m.group(2))} if m else {}
ok = True
def want(c, msg):
    global ok
    if not c:
        ok = False
        print("FAIL: " + msg, file=sys.stderr)
want(st.get(200, 0) > 0, f"some requests served: {st}")
want(set(st) <= {200, 429}, f"only 200 and 429: {st}")
rss = [int(x) for x in open(sys.argv[2]).read().split()]
n = len(rss)
want(n >= int(sys.argv[3]) // 2, f"{n} memory samples")
if n >= 6:
    early = max(rss[n // 3: n // 3 + 3])
    late = max(rss[-3:])
    want(late <= early * 1.10, f"resident memory grew: {early} kB a third of the way in, {late} kB at the end")
    print(f"load: {st}, RSS {early} -> {late} kB")
sys.exit(0 if ok else 1)
PY
[ $? -eq 0 ] && ok
curl -sf "http://127.0.0.1:$PORT/metrics" | grep -E '^modattn_http_requests_total' > "$T/metrics"
check "metrics counted the 429s: $(cat "$T/metrics")" grep -q 'status="429"' "$T/metrics"
kill -TERM $spid
wait $spid
src=$?
check "exit 0 after SIGTERM: $src" [ $src -eq 0 ]
finish test_load
