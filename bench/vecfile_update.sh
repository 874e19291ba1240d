#!/usr/bin/env bash
# bench/vecfile_update.sh [BUILD] — what keeping the vector file in step costs `modattn index`:
# the whole process (model load, walk, embedding, the update) on synthetic stores
# (bench/make_store, all-MiniLM-L6-v2) of 100k and 1M chunks, for a run that changes nothing
# (file current), a run that changes one small document (an append: one new row, one masked),
# and the same change with the vector file removed (a rewrite, what every change cost before
# appends). Median of RUNS (5) with peak RSS; writes bench/results/vecfile_update.md. Not a test.
# Environment: SIZES (100000,1000000), RUNS, STORES (/tmp/modattn-cold-stores, shared with
# search_cold.sh; stores are made when missing and keep the documents this script adds).
set -euo pipefail
BUILD=${1:-build}
SIZES=${SIZES:-100000,1000000}
RUNS=${RUNS:-5}
DIR=${STORES:-/tmp/modattn-cold-stores}
MODEL=.models/all-MiniLM-L6-v2
OUT=bench/results/vecfile_update.md
mkdir -p "$DIR"
cmake --build "$BUILD" -j2 --target modattn_cli make_store > /dev/null
T=$(mktemp -d /tmp/modattn-vupd-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/docs"
echo "a small document about how vectors are stored" > "$T/docs/doc.txt"
{
  echo "# Keeping the vector file in step (\`modattn index\`, whole process)"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg) at start, median of $RUNS runs,"
  echo "page cache warm, model $MODEL. One changed document = one chunk re-embedded: its old row masked, its new"
  echo "row appended. \"rewrite\" is the same change with DB.vec removed first (the whole file from the store)."
  echo
  echo "| chunks | run | median s | peak RSS MB | vector_file |"
  echo "|---:|---|---:|---:|---|"
} > "$T/md"
for n in ${SIZES//,/ }; do
  db=$DIR/s$n.db
  if [ ! -f "$db.vec" ]; then rm -f "$db"*; "$BUILD/bench/make_store" "$db" "$MODEL" "$n"; fi
  "$BUILD/modattn" index --quiet --model "$MODEL" --db "$db" "$T/docs" > /dev/null
  for kind in unchanged append rewrite; do
    : > "$T/times"
    for r in $(seq "$RUNS"); do
      [ "$kind" != unchanged ] && echo "change $r $kind" >> "$T/docs/doc.txt"
      [ "$kind" = rewrite ] && rm -f "$db.vec"
      /usr/bin/time -f "%e %M" -o "$T/one" "$BUILD/modattn" index --quiet --json --model "$MODEL" --db "$db" "$T/docs" > "$T/out"
      vf=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vector_file'])" "$T/out")
      echo "$(cat "$T/one") $vf" >> "$T/times"
    done
    python3 - "$T/times" "$n" "$kind" >> "$T/md" <<'PY'
import sys
rows = sorted((float(a), int(b), v) for a, b, v in (l.split() for l in open(sys.argv[1])))
m = rows[len(rows) // 2]
print('| %s | %s | %.2f | %.0f | %s |' % (format(int(sys.argv[2]), ','), sys.argv[3], m[0], max(r[1] for r in rows) / 1024,
      ', '.join(sorted(set(r[2] for r in rows)))))
PY
  done
done
mkdir -p bench/results
cp "$T/md" "$OUT"
cat "$OUT"
