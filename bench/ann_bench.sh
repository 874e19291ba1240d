#!/usr/bin/env bash
# bench/ann_bench.sh [BUILD] — the ANN benchmark, written to bench/results/ann.md (+ ann.json,
# ann.png). Not a test; takes ~40 min at 1M rows on 2 cores. Run from the repository root on a
# quiet machine.
#
# In one run, on the same vectors (bench/ann_data.py: N base vectors and 1000 queries grown from
# real MiniLM embeddings of the demo corpus and the Python documentation, exact top-100 by numpy):
#   1. a store of them (bench/make_store, chunk id i + 1 = row i) and its vector file;
#   2. modattn: the exact batched scan (the anchor), then `modattn index --ann hnsw` (M, efC),
#      `--ann ivf-sq8` and `--ann ivf-pq` built and timed, each searched at a sweep of its search
#      parameter (bench/ann_bench.c): recall@10, queries/s in one batched call, p50 one query/call;
#   3. hnswlib and FAISS (faiss-cpu) from PyPI building HNSW with the same M and efConstruction and
#      searched at the same efSearch values (bench/ann_bench_py.py).
# Environment: N (1000000), QUERIES (1000), M (32), EFC (40), EFS (16,32,64,128,256), THREADS (all
# CPUs), NPROBES (ivf: 4,8,16,32,64,128), APPEND (1: add to the results of an earlier run instead
# of starting them again), PY_SYSTEMS (hnswlib,faiss; empty: neither), SEEDS (comma-separated stores with real embeddings; default: made here from demo/corpus
# and the pydoc corpus), VENV (/tmp/modattn-faiss-venv), WORK (/tmp/modattn-ann-bench: kept, so a
# rerun reuses the vectors and the store), KINDS (hnsw,ivf-sq8,ivf-pq; also f16, int8, binary: the
# compact copies, swept over rescore: RESCORES_F16 10,20,50, RESCORES_INT8 20,50,100,
# RESCORES_BINARY 100,300,1000), REPORT (ann: the name of the files written under bench/results).
set -euo pipefail
BUILD=${1:-build}
N=${N:-1000000}
QUERIES=${QUERIES:-1000}
M=${M:-32}
EFC=${EFC:-40}
EFS=${EFS:-16,32,64,128,256}
THREADS=${THREADS:-$(nproc)}
VENV=${VENV:-/tmp/modattn-faiss-venv}
WORK=${WORK:-/tmp/modattn-ann-bench}
KINDS=${KINDS:-hnsw,ivf-sq8,ivf-pq}
MODEL=${MODEL:-.models/all-MiniLM-L6-v2}
OUT=bench/results
mkdir -p "$WORK"

[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD" -j2 --target ann_bench make_store modattn_cli
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import faiss, hnswlib, numpy, matplotlib" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet faiss-cpu hnswlib numpy matplotlib
fi
PY="$VENV/bin/python"
CLI="$BUILD/modattn"

# real embeddings to grow the vectors from
if [ -z "${SEEDS:-}" ]; then
  [ -f "$WORK/seed-demo.db" ] || "$CLI" index --quiet --db "$WORK/seed-demo.db" --model "$MODEL" demo/corpus
  if [ ! -f "$WORK/seed-pydoc.db" ]; then
    python3 bench/make_pydoc_corpus.py "$WORK/pydoc"
    "$CLI" index --quiet --db "$WORK/seed-pydoc.db" --model "$MODEL" "$WORK/pydoc"
  fi
  SEEDS="$WORK/seed-demo.db,$WORK/seed-pydoc.db"
fi
DATA="$WORK/data-$N"
[ -f "$DATA/gt.i32" ] || "$PY" bench/ann_data.py "$SEEDS" "$DATA" "$N" "$QUERIES"
DB="$WORK/ann-$N.db"
if [ ! -f "$DB.vec" ]; then
  rm -f "$DB" "$DB"-* "$DB".*
  echo "ann_bench: a store of $N vectors" >&2
  "$BUILD/bench/make_store" "$DB" "$MODEL" "$N" - "$DATA/base.f32"
fi

RES="$WORK/results-$N.jsonl"
[ "${APPEND:-0}" = 1 ] || : > "$RES"
peak_rss_kb() { awk '/Maximum resident/ {print $6}' "$1"; }
IFS=, read -ra kinds <<< "$KINDS"
for kind in "${kinds[@]}"; do
  case $kind in
    hnsw) params="M=$M,efConstruction=$EFC"; sweep_param=efSearch; sweep=$EFS ;;
    ivf-sq8|ivf-pq) params=""; sweep_param=nprobe; sweep=${NPROBES:-4,8,16,32,64,128} ;;
    f16) params=""; sweep_param=rescore; sweep=${RESCORES_F16:-10,20,50} ;;
    int8) params=""; sweep_param=rescore; sweep=${RESCORES_INT8:-20,50,100} ;;
    binary) params=""; sweep_param=rescore; sweep=${RESCORES_BINARY:-100,300,1000} ;;
    *) echo "ann_bench: unknown kind $kind" >&2; exit 2 ;;
  esac
  echo "ann_bench: building $kind ($params) over $N rows" >&2
  rm -f "$DB.ann" # built from nothing, so that the time is a whole build's
  args=(index --db "$DB" --model "$MODEL" --threads "$THREADS" --ann "$kind" --json)
  [ -n "$params" ] && args+=(--ann-params "$params")
  /usr/bin/time -v "$CLI" "${args[@]}" > "$WORK/build-$kind.json" 2> "$WORK/build-$kind.time"
  "$PY" - "$WORK/build-$kind.json" "$kind" "$(peak_rss_kb "$WORK/build-$kind.time")" >> "$RES" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["ann"]
print(json.dumps({"system": "modattn", "index": sys.argv[2], "phase": "build", "build_s": round(j["seconds"], 2),
                  "file_bytes": j["bytes"], "build_params": j["params"], "rows": j["rows"],
                  "peak_rss_mb": round(int(sys.argv[3]) / 1024)}))
PY
  echo "ann_bench: searching $kind" >&2
  "$BUILD/bench/ann_bench" "$DB" "$DATA" "$sweep_param" "$sweep" "$THREADS" | tee -a "$RES" >&2
done
if [ -n "${PY_SYSTEMS-hnswlib,faiss}" ]; then
  echo "ann_bench: ${PY_SYSTEMS-hnswlib,faiss}" >&2
  "$PY" bench/ann_bench_py.py "$DATA" --M "$M" --ef-construction "$EFC" --ef "$EFS" --threads "$THREADS" \
    --systems "${PY_SYSTEMS-hnswlib,faiss}" | tee -a "$RES" >&2
fi

# which kernels ran, for the record
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
"$PY" bench/ann_report.py "$RES" "$DATA/meta.json" "$cpu" "$THREADS" "$OUT" "${REPORT:-ann}"
