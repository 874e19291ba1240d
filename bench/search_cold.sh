#!/usr/bin/env bash
# bench/search_cold.sh [BUILD] — the "cold CLI" search benchmark: the whole `modattn search`
# process (start to exit: model load, query embedding, vectors, scan, fetching the top 10) on
# synthetic stores of 10k, 100k and 1M chunks (bench/make_store, bound to all-MiniLM-L6-v2),
# with the vector file (DB.vec, mapped) and without it (MODATTN_VECTOR_FILE=off: every vector
# read out of SQLite, as before the vector file), page cache warm. Writes
# bench/results/search_cold.md. Not a test. Environment: SIZES (10000,100000,1000000), RUNS (7),
# STORES (/tmp/modattn-cold-stores: kept between runs, they take a minute to make at 1M).
set -euo pipefail
BUILD=${1:-build}
SIZES=${SIZES:-10000,100000,1000000}
RUNS=${RUNS:-7}
DIR=${STORES:-/tmp/modattn-cold-stores}
MODEL=.models/all-MiniLM-L6-v2
OUT=bench/results/search_cold.md
mkdir -p "$DIR"
cmake --build "$BUILD" -j2 --target modattn_cli make_store > /dev/null
T=$(mktemp -d /tmp/modattn-cold-XXXXXX)
trap 'rm -rf "$T"' EXIT
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
{
  echo "# Cold-process search (\`modattn search\`, whole process)"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average $LOAD0 at start, $RUNS runs per row (p99 = the slowest),"
  echo "page cache warm (one untimed run first), query \"how are vectors stored\", k = 10, model $MODEL."
  echo "In-process: the search's own spans (vectors + scan + fetch) from \`--trace\` of the median run: what a"
  echo "long-lived handle pays per query once the model is loaded."
  echo
  echo "| chunks | vectors from | p50 ms | p99 ms | peak RSS MB | in-process ms | vector file MB |"
  echo "|---:|---|---:|---:|---:|---:|---:|"
} > "$T/md"
for n in ${SIZES//,/ }; do
  db=$DIR/s$n.db
  if [ ! -f "$db.vec" ]; then rm -f "$db"*; "$BUILD/bench/make_store" "$db" "$MODEL" "$n"; fi
  for mode in file store; do
    env=(); [ $mode = store ] && env=(MODATTN_VECTOR_FILE=off)
    env "${env[@]}" "$BUILD/modattn" search --model "$MODEL" --db "$db" "how are vectors stored" > /dev/null 2>&1
    : > "$T/times"
    for r in $(seq "$RUNS"); do
      env "${env[@]}" /usr/bin/time -f "%e %M" -o "$T/one" "$BUILD/modattn" --trace "$T/tr$r.json" search --model "$MODEL" \
        --db "$db" "how are vectors stored" > /dev/null 2> "$T/err"
      echo "$(cat "$T/one") $r" >> "$T/times"
    done
    python3 - "$T" "$n" "$mode" "$db" >> "$T/md" <<'PY'
import json, os, sys
t, n, mode, db = sys.argv[1:]
rows = sorted((float(a), int(b), int(r)) for a, b, r in (l.split() for l in open(t + '/times')))
med = rows[len(rows) // 2]
tr = json.load(open('%s/tr%d.json' % (t, med[2])))
ev = tr['traceEvents'] if isinstance(tr, dict) else tr
inproc = sum(e.get('dur', 0) for e in ev if e.get('name') in ('search.load_vectors', 'search.scan', 'search.fetch_chunks')) / 1000
vec = os.path.getsize(db + '.vec') / 1e6
print('| %s | %s | %.0f | %.0f | %.0f | %.1f | %.0f |' % (format(int(n), ','), 'vector file (mmap)' if mode == 'file' else 'SQLite (MODATTN_VECTOR_FILE=off)',
      med[0] * 1000, rows[-1][0] * 1000, max(r[1] for r in rows) / 1024, inproc, vec))
PY
  done
done
echo >> "$T/md"
echo "load average at the end: $(cut -d' ' -f1 /proc/loadavg)" >> "$T/md"
cp "$T/md" "$OUT"
cat "$OUT"
