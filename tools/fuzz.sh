#!/usr/bin/env bash
# tools/fuzz.sh — runs the libFuzzer targets of build-fuzz/ (`make fuzz` builds them) for a set
# time each and records what each run did in fuzz/RESULTS.md: seconds, executions, coverage
# (libFuzzer's cov/ft counters), peak memory and crashes, so the CPU time given to each target
# adds up across runs and sessions.
#
#   tools/fuzz.sh [-t SECONDS] [-j LANES] [TARGET...]     (default: 60 s each, 1 lane, all)
#
# Each target grows its working corpus in build-fuzz/corpus/NAME (seeded from fuzz/corpus/NAME,
# which `make test` replays). A crash, leak or timeout is saved as build-fuzz/crashes/NAME-*;
# the script then exits 1 and names it: minimise it (fuzz_NAME -minimize_crash=1 FILE), fix the
# bug and commit the input to fuzz/corpus/NAME so that the replay test keeps it fixed.
set -u
cd "$(dirname "$0")/.."
secs=60 lanes=1
while getopts "t:j:h" o; do
  case $o in
    t) secs=$OPTARG ;;
    j) lanes=$OPTARG ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
case $secs in ''|*[!0-9]*) echo "tools/fuzz.sh: -t needs whole seconds" >&2; exit 2 ;; esac
case $lanes in ''|*[!0-9]*|0) echo "tools/fuzz.sh: -j needs a positive count" >&2; exit 2 ;; esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.c; do n=${f#fuzz/fuzz_}; targets+=("${n%.c}"); done
fi
for t in "${targets[@]}"; do
  if [ ! -x "build-fuzz/fuzz/fuzz_$t" ]; then
    echo "tools/fuzz.sh: build-fuzz/fuzz/fuzz_$t is missing: run \`make fuzz\` first" >&2
    exit 2
  fi
done
mkdir -p build-fuzz/crashes build-fuzz/logs
[ -f fuzz/RESULTS.md ] || printf '%s\n\n%s\n%s\n' "# Fuzzing record (tools/fuzz.sh appends a row per run)" \
  "| date (UTC) | target | seconds | executions | exec/s | cov | ft | corpus | peak RSS MB | result |" \
  "|---|---|---|---|---|---|---|---|---|---|" > fuzz/RESULTS.md

run_one() {
  local t=$1 log="build-fuzz/logs/$1.log" extra=()
  mkdir -p "build-fuzz/corpus/$t"
  [ "$t" = pdf ] && extra+=(-close_fd_mask=2)  # poppler prints every syntax error it recovers from
  local start; start=$(date -u +%FT%TZ)
  TMPDIR=${TMPDIR:-/tmp} nice -n 10 "build-fuzz/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
    -timeout=30 -rss_limit_mb=2560 -max_len=65536 "${extra[@]}" \
    -artifact_prefix="build-fuzz/crashes/$t-" "build-fuzz/corpus/$t" "fuzz/corpus/$t" > "$log" 2>&1
  local rc=$?
  local execs rate rss cov ft units result
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  units=$(find "build-fuzz/corpus/$t" -type f | wc -l)
  if [ $rc -eq 0 ]; then result=ok
  else result="FAILED (rc $rc): $(ls -t build-fuzz/crashes/$t-* 2>/dev/null | head -1)"; fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$start" "$t" "$secs" "${execs:-?}" \
    "${rate:-?}" "${cov:-?}" "${ft:-?}" "$units" "${rss:-?}" "$result" >> fuzz/RESULTS.md
  echo "fuzz_$t: $result, ${execs:-?} executions, cov ${cov:-?} (log: $log)"
  return $rc
}

fail=0 active=0
for t in "${targets[@]}"; do
  run_one "$t" &
  active=$((active + 1))
  if [ $active -ge "$lanes" ]; then wait -n || fail=1; active=$((active - 1)); fi
done
while [ $active -gt 0 ]; do wait -n || fail=1; active=$((active - 1)); done
total=$(awk -F'|' 'NR > 4 { s[$3] += $4 } END { for (t in s) printf "%s%s %.2f h", n++ ? ", " : "", t, s[t] / 3600 }' fuzz/RESULTS.md)
echo "CPU time so far (fuzz/RESULTS.md):$total"
exit $fail
