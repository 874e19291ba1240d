#!/usr/bin/env bash
# tests/cli/serve_host.sh MODATTN MODEL_DIR — `serve --host`: bound to 127.0.0.2 the server
# answers there and not on 127.0.0.1 (the same port); bound to ::1 it answers on [::1] and not on
# 127.0.0.1 (where the host has no IPv6 loopback, that half says so and is not counted); a host
# that is no address is refused with a message. (tests/server is the server's own suite.)
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/../pipeline/harness.sh"
need_model "$MODEL" serve_host
scratch serve-host
spid=
stop() { [ -n "$spid" ] && kill -TERM "$spid" 2> /dev/null && wait "$spid" 2> /dev/null; spid=; }
trap 'stop; chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
# start HOST: serve on HOST, port in $port ("" when it never came up)
start() {
  rm -f "$T/port"; port=
  "$BIN" serve --model "$MODEL" --host "$1" --port 0 --port-file "$T/port" --workers 1 --quiet > "$T/log" 2>&1 &
  spid=$!
  for _ in $(seq 600); do
    [ -s "$T/port" ] && port=$(cat "$T/port") && break
    kill -0 "$spid" 2> /dev/null || break
    sleep 0.1
  done
}
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$1"; }

start 127.0.0.2
if [ -n "$port" ]; then
  for _ in $(seq 300); do [ "$(code "http://127.0.0.2:$port/health")" = 200 ] && break; sleep 0.1; done
  check "--host 127.0.0.2: /health there is 200" test "$(code "http://127.0.0.2:$port/health")" = 200
  check "--host 127.0.0.2: nothing on 127.0.0.1:$port" test "$(code "http://127.0.0.1:$port/health")" = 000
else
  bad "--host 127.0.0.2: the server did not start: $(tail -5 "$T/log")"
fi
stop

if python3 -c "import socket; s = socket.socket(socket.AF_INET6); s.bind(('::1', 0))" 2> /dev/null; then
  start ::1
  if [ -n "$port" ]; then
    for _ in $(seq 300); do [ "$(code "http://[::1]:$port/health")" = 200 ] && break; sleep 0.1; done
    check "--host ::1: /health on [::1] is 200" test "$(code "http://[::1]:$port/health")" = 200
    check "--host ::1: nothing on 127.0.0.1:$port" test "$(code "http://127.0.0.1:$port/health")" = 000
  else
    bad "--host ::1: the server did not start: $(tail -5 "$T/log")"
  fi
  stop
else
  echo "serve_host: --host ::1 not run: this host has no IPv6 loopback"
fi

"$BIN" serve --model "$MODEL" --host no.such.host.invalid --port 0 > "$T/log" 2>&1 &
spid=$!
for _ in $(seq 300); do kill -0 "$spid" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$spid" 2> /dev/null; then bad "--host no.such.host.invalid: still running"; stop
else
  wait "$spid"; rc=$?; spid=
  check "--host no.such.host.invalid: refused, non-zero ($rc), saying which host: $(head -c 300 "$T/log")" \
    test "$rc" != 0 -a -n "$(grep 'no.such.host.invalid' "$T/log")"
fi
finish serve_host
