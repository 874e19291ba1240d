#!/usr/bin/env bash
# tests/server/test_schemathesis.sh BIN MODEL_DIR VENV — schemathesis (PyPI) generates requests from
# the server's own /openapi.json and runs every check it has (server errors, status codes, content
# types, headers, response schemas, schema-violating requests rejected, valid ones accepted,
# unsupported methods, ...): it must find nothing. A store is served so /search answers 200.
set -u
BIN=$1
MODEL=$2
VENV=$(cd "$3" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
. "$HERE/../pipeline/harness.sh"
need_model "$MODEL" test_schemathesis
scratch server-schemathesis
cp -r "$REPO/demo/corpus" "$T/corpus"
"$BIN" index --quiet --model "$MODEL" --db "$T/s.db" "$T/corpus" > /dev/null 2>&1 || bad "index of the demo corpus failed"
"$BIN" serve --model "$MODEL" --db "$T/s.db" --port 0 --port-file "$T/port" > "$T/server.log" 2>&1 &
spid=$!
trap 'kill -9 $spid 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break; sleep 0.1; done
cd "$T"  # schemathesis keeps its example database in the working folder
"$VENV/bin/schemathesis" --config-file "$HERE/schemathesis.toml" run "http://127.0.0.1:$PORT/openapi.json" \
  --checks all --max-examples "${SCHEMATHESIS_EXAMPLES:-150}" --workers 2 --seed 1 --no-color > "$T/st.out" 2>&1
src=$?
grep -E "Test cases:|generated|passed|failures|Failures|API Operations|Tested" "$T/st.out" | head -12
if [ $src -eq 0 ] && grep -q "No issues found\|passed" "$T/st.out" && ! grep -q "FAILURES" "$T/st.out"; then ok
else bad "schemathesis found problems (rc $src):"; tail -80 "$T/st.out" >&2; fi
# (the /health polls before the model was ready are 503 by design)
grep '" 5[0-9][0-9] ' "$T/server.log" | grep -v '"GET /health" 503' > "$T/5xx"
check "no 5xx in the server's log: $(head -5 "$T/5xx")" [ ! -s "$T/5xx" ]
kill -TERM $spid
wait $spid
src=$?
check "exit 0 after SIGTERM: $src" [ $src -eq 0 ]
finish test_schemathesis
