#!/usr/bin/env bash
# tests/memory/valgrind.sh VALGRIND MODATTN — valgrind memcheck on model loading + embedding, on one
# index-and-search run, on the attention conformance suite and on a short `serve` session (HTTP
# requests with curl, then SIGTERM): no invalid access, no definite or indirect leak. (valgrind
# emulates a CPU without AVX-512, so the AVX2 kernels run here.)
set -u
VG=$1
BIN=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
run() { # run NAME -- command...
  local name=$1
  shift 2
  if "$VG" --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
       --show-leak-kinds=definite,indirect --track-origins=no "$@" >"$tmp/out" 2>"$tmp/err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: valgrind $name (exit $?)" >&2
    tail -40 "$tmp/err" >&2
  fi
}
mkdir -p "$tmp/docs"
printf 'Attention is computed by one contract with many implementations.\n\nThe dispatcher explains its choices.\n' >"$tmp/docs/a.txt"
printf '<html><body><h1>Bees</h1><p>Honey bees make honey &amp; wax.</p><script>var x=1;</script></body></html>' >"$tmp/docs/b.html"
run "embed" -- "$BIN" --threads 2 embed "hello world" "a second, longer sentence about memory leaks"
run "index" -- "$BIN" --threads 2 index --quiet --db "$tmp/store.db" "$tmp/docs"
run "search" -- "$BIN" --threads 2 search --db "$tmp/store.db" -k 2 "who makes honey"
run "check" -- "$BIN" --threads 2 check --configs 40

# serve: a short scripted session (embeddings, search, models, health, metrics, a malformed body,
# an unknown path), then SIGTERM: the server drains and exits 0, memcheck clean (exit 99 on errors)
serve_session() {
  local spid port="" code ok_all=1
  "$VG" --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --show-leak-kinds=definite,indirect --track-origins=no \
    "$BIN" --threads 2 serve --db "$tmp/store.db" --port 0 --port-file "$tmp/port" --workers 2 \
    --drain-timeout 30 --quiet > "$tmp/serve.out" 2> "$tmp/serve.err" &
  spid=$!
  for _ in $(seq 1200); do # memcheck loads the model in tens of seconds
    [ -s "$tmp/port" ] && port=$(cat "$tmp/port") && curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
    kill -0 $spid 2> /dev/null || break
    sleep 0.1
  done
  req() { # req WANT_CODE curl-args...: the status code must be WANT_CODE
    local want=$1; shift
    code=$(curl -s -o "$tmp/resp" -w '%{http_code}' --max-time 120 "$@")
    if [ "$code" != "$want" ]; then ok_all=0; echo "FAIL: serve under valgrind: $* gave $code, not $want: $(head -c 300 "$tmp/resp")" >&2; fi
  }
  if [ -n "$port" ]; then
    local u="http://127.0.0.1:$port"
    req 200 "$u/health"
    req 200 -H 'Content-Type: application/json' -d '{"input": ["memcheck says hello", "a second input"]}' "$u/v1/embeddings"
    req 200 -H 'Content-Type: application/json' -d '{"query": "who makes honey", "k": 2}' "$u/search"
    req 200 "$u/v1/models"
    req 200 "$u/metrics"
    req 400 -H 'Content-Type: application/json' -d '{"input": [' "$u/v1/embeddings"
    req 404 "$u/no/such/path"
  else
    ok_all=0
    echo "FAIL: serve under valgrind never answered /health: $(tail -20 "$tmp/serve.err")" >&2
  fi
  kill -TERM $spid 2> /dev/null
  wait $spid
  local rc=$?
  if [ "$rc" = 0 ] && [ "$ok_all" = 1 ]; then pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: valgrind serve (exit $rc)" >&2
    tail -40 "$tmp/serve.err" >&2
  fi
}
serve_session
echo "valgrind_memcheck: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
