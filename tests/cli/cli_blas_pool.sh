#!/usr/bin/env bash
# tests/cli/cli_blas_pool.sh MODATTN — the program stops OpenBLAS's idle thread pool at start
# (cli/main.c cli_stop_idle_blas_pool): OpenBLAS, linked for FAISS, starts a pool as it loads whose
# threads spin for ~0.1 s of CPU each, waiting for work modattn never gives them (its BLAS calls
# run one thread each in its own pool). A `serve` waiting for requests has exactly as many threads as
# with OPENBLAS_NUM_THREADS=1, where OpenBLAS starts none; an approximate index (FAISS's training,
# a BLAS call that may start the pool again) still builds. Exit 77 (skipped), with the
# reason, where this CPU count or build gives OpenBLAS no pool to stop.
set -u
BIN=$1
MODEL=.models/tiny-bert-cls
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
TMP=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
if [ ! -d "$MODEL" ]; then echo "FAIL: $MODEL is missing: run \`make model\`" >&2; exit 1; fi
if ! grep -q "libopenblas" <(ldd "$BIN"); then echo "cli_blas_pool: SKIPPED: $BIN does not load OpenBLAS"; exit 77; fi
if [ "$(nproc)" -lt 2 ]; then echo "cli_blas_pool: SKIPPED: 1 CPU: OpenBLAS starts no pool"; exit 77; fi

# threads of a `serve` (one worker) that is up and waiting for requests
threads_waiting() { # $1: a name, then env assignments
  local name=$1; shift
  env "$@" "$BIN" serve --model "$MODEL" --host 127.0.0.1 --port 0 --port-file "$TMP/port-$name" --workers 1 \
    --threads 2 --quiet > "$TMP/log-$name" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 600); do [ -s "$TMP/port-$name" ] && break; sleep 0.1; done
  # the port file comes as it listens, before the model loads and the executors start: wait for
  # /health's 200 (ready: every thread of the server started; CI once counted too early, 5 of 7)
  local up=0
  if [ -s "$TMP/port-$name" ]; then
    local url="http://127.0.0.1:$(cat "$TMP/port-$name")/health"
    for _ in $(seq 600); do
      [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url")" = 200 ] && { up=1; break; }
      sleep 0.1
    done
  fi
  sleep 0.3 # (a pool started late would show here)
  if [ $up = 1 ]; then ls "/proc/$pid/task" | wc -l; else echo "none"; fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
n_default=$(threads_waiting default)
n_one=$(threads_waiting one OPENBLAS_NUM_THREADS=1)
n_unstopped=$(threads_waiting unstopped OPENBLAS_NUM_THREADS=2)
echo "cli_blas_pool: threads of a waiting serve: $n_default; with OPENBLAS_NUM_THREADS=1 (no pool): $n_one"
[ "$n_default" != none ] && [ "$n_one" != none ] && [ "$n_unstopped" != none ] && ok ||
  { bad "serve did not come up: $(tail -n 3 "$TMP/log-default" "$TMP/log-one" "$TMP/log-unstopped")"; echo "cli_blas_pool: $pass passed, $fail failed"; exit 1; }
[ "$n_default" -eq "$n_one" ] && ok || bad "OpenBLAS's pool is still running: $n_default threads, $n_one without a pool"
# the check can fail: OPENBLAS_NUM_THREADS=2 starts a pool too, which the program stops as well
[ "$n_unstopped" -eq "$n_one" ] && ok || bad "OPENBLAS_NUM_THREADS=2: $n_unstopped threads, $n_one without a pool"

# BLAS after the stop: FAISS's IVF training (k-means through sgemm; OpenBLAS starts its pool again
# on a call large enough to thread) builds the index
if "$BIN" --version | grep -q "^ann: faiss"; then
  mkdir -p "$TMP/docs"
  for i in $(seq 200); do echo "document $i about bees, honey, rivers and the number $((i * 37))" > "$TMP/docs/d$i.txt"; done
  "$BIN" index --model "$MODEL" --quiet --db "$TMP/s.db" --ann ivf-sq8 --ann-params nlist=4 "$TMP/docs" > "$TMP/o" 2>&1; rc=$?
  [ $rc -eq 0 ] && [ -s "$TMP/s.db.ann" ] && ok || bad "index --ann ivf-sq8 after the pool was stopped: rc $rc, $(cat "$TMP/o")"
else
  echo "cli_blas_pool: this build has no FAISS: the IVF index is not built here"
fi

echo "cli_blas_pool: $pass passed, $fail failed"
[ $fail -eq 0 ]
