#!/usr/bin/env bash
# bench/search_cold.sh [BUILD] — the "cold CLI" search benchmark: the whole `modattn search`
# process (start to exit: model load, query embedding, vectors, scan, fetching the top 10) on
# synthetic stores of 10k, 100k and 1M chunks (bench/make_store, bound to all-MiniLM-L6-v2):
#   - with the vector file (DB.vec, mapped), page cache warm (one untimed run first);
#   - the same with the page cache cold: before each run the store, its vector file and the
#     model's files are evicted from the cache (posix_fadvise DONTNEED, no root needed);
#   - without it (MODATTN_VECTOR_FILE=off: every vector read out of SQLite, as before the vector
#     file existed: the "before" rows), page cache warm.
# Writes bench/results/search_cold.md and its table into bench/results/search.md ("## Cold CLI").
# Not a test. Environment: SIZES (10000,100000,1000000), RUNS (7), STORES
# (/tmp/modattn-cold-stores: kept between runs, they take a minute to make at 1M).
set -euo pipefail
BUILD=${1:-build}
SIZES=${SIZES:-10000,100000,1000000}
RUNS=${RUNS:-7}
DIR=${STORES:-/tmp/modattn-cold-stores}
MODEL=.models/all-MiniLM-L6-v2
OUT=bench/results/search_cold.md
Q="how are vectors stored"
mkdir -p "$DIR"
cmake --build "$BUILD" -j2 --target modattn_cli make_store > /dev/null
T=$(mktemp -d /tmp/modattn-cold-XXXXXX)
trap 'rm -rf "$T"' EXIT
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
evict() { # the files a search reads, out of the page cache
  python3 - "$@" <<'PY'
import os, sys
for p in sys.argv[1:]:
    for f in ([os.path.join(d, n) for d, _, ns in os.walk(p) for n in ns] if os.path.isdir(p) else [p]):
        if os.path.isfile(f):
            fd = os.open(f, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
PY
}
{
  echo "# Cold-process search (\`modattn search\`, whole process)"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),"
  echo "load average $LOAD0 at start, $RUNS runs per row (p99 = the slowest), query \"$Q\", k = 10,"
  echo "model $MODEL, made by \`bench/search_cold.sh\`."
  echo
  echo "- *page cache*: warm = one untimed run first; cold = the store, its vector file and the model's"
  echo "  files evicted from the cache (posix_fadvise DONTNEED) before every run."
  echo "- *beyond the file*: peak RSS less the vector file's size (the scan touches every page of the"
  echo "  mapped file, so those pages are all resident at its end): what the process holds of its own."
  echo "  Without the vector file, all of the peak RSS is the process's own."
  echo "- *in-process*: the search's own spans (vectors + scan + fetch) from \`--trace\` of the median run:"
  echo "  what a long-lived handle (the library call) pays per query once the model is loaded."
  echo "- SQLite rows (MODATTN_VECTOR_FILE=off) are the \"before\": every vector read out of the store."
  echo
  echo "| chunks | vectors from | page cache | p50 ms | p99 ms | peak RSS MB | beyond the file MB | in-process ms | vector file MB |"
  echo "|---:|---|---|---:|---:|---:|---:|---:|---:|"
} > "$T/md"
for n in ${SIZES//,/ }; do
  db=$DIR/s$n.db
  if [ ! -f "$db.vec" ]; then rm -f "$db"*; "$BUILD/bench/make_store" "$db" "$MODEL" "$n"; fi
  for mode in file cold store; do
    env=(); [ $mode = store ] && env=(MODATTN_VECTOR_FILE=off)
    env "${env[@]}" "$BUILD/modattn" search --model "$MODEL" --db "$db" "$Q" > /dev/null 2>&1
    : > "$T/times"
    for r in $(seq "$RUNS"); do
      [ $mode = cold ] && evict "$db" "$db.vec" "$MODEL" "$BUILD/modattn"
      env "${env[@]}" /usr/bin/time -f "%e %M" -o "$T/one" "$BUILD/modattn" --trace "$T/tr$r.json" search --model "$MODEL" \
        --db "$db" "$Q" > "$T/res" 2> "$T/err"
      grep -q "^ 1\. " "$T/res" || { echo "search gave no results:"; cat "$T/err"; exit 1; }
      if [ $mode != store ] && grep -q "vector file" "$T/err"; then echo "the vector file was not used:"; cat "$T/err"; exit 1; fi
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
peak = max(r[1] for r in rows) * 1024 / 1e6  # %M is in KiB; MB here are 10^6 bytes
own = peak - vec if mode != 'store' else peak
print('| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.1f | %.0f |' % (
    format(int(n), ','), 'SQLite (MODATTN_VECTOR_FILE=off)' if mode == 'store' else 'vector file (mmap)',
    'cold' if mode == 'cold' else 'warm', med[0] * 1000, rows[-1][0] * 1000, peak, own, inproc, vec))
PY
  done
done
echo >> "$T/md"
echo "load average at the end: $(cut -d' ' -f1 /proc/loadavg)" >> "$T/md"
cp "$T/md" "$OUT"
python3 - "$OUT" bench/results/search.md <<'PY'
import sys
cold, out = sys.argv[1:]
body = open(cold).read().split("\n", 2)[2].strip()  # without its title
sec = "## Cold CLI (whole `modattn search` process; bench/search_cold.sh, also in search_cold.md)\n\n" + body + "\n"
try:
    s = open(out).read()
except OSError:
    s = "# Search and indexing benchmark\n"
a = s.find("## Cold CLI")
if a >= 0:
    b = s.find("\n## Raw output", a)
    s = s[:a] + sec + (s[b:] if b >= 0 else "")
else:
    b = s.find("## Raw output")
    s = (s[:b] + sec + "\n" + s[b:]) if b >= 0 else s.rstrip() + "\n\n" + sec
open(out, "w").write(s)
PY
cat "$OUT"
