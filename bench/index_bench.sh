#!/usr/bin/env bash
# bench/index_bench.sh [BUILD] [CORPUS] — indexing throughput of `modattn index`: a fresh store
# built from CORPUS (default demo/corpus), then a second run (everything unchanged). Prints the
# figures and, with INDEX_BENCH_JSON=FILE, writes them as JSON. Run from the repository root.
set -euo pipefail
BUILD=${1:-build}
CORPUS=${2:-demo/corpus}
BIN=$BUILD/modattn
[ -x "$BIN" ] || { echo "index_bench: no $BIN: build first (make build)" >&2; exit 1; }
T=$(mktemp -d /tmp/modattn-index-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT
bytes=$(find "$CORPUS" -type f ! -name '.*' -printf '%s\n' | awk '{s+=$1} END {print s}')
first=$("$BIN" index --quiet --json --db "$T/bench.db" "$CORPUS")
second=$("$BIN" index --quiet --json --db "$T/bench.db" "$CORPUS")
python3 - "$first" "$second" "$bytes" "${INDEX_BENCH_JSON:-}" "$(nproc)" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
bytes_, out, cpus = int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
r = {
    "documents": a["files_indexed"], "bytes": bytes_, "chunks": a["chunks_embedded"],
    "tokens": a["tokens_embedded"], "seconds": a["seconds"],
    "documents_per_s": a["files_indexed"] / a["seconds"],
    "tokens_per_s": a["tokens_embedded"] / a["seconds"],
    "chunks_per_s": a["chunks_embedded"] / a["seconds"],
    "rerun_seconds": b["seconds"], "rerun_unchanged": b["files_unchanged"], "cpus": cpus,
}
print("index_bench: %(documents)d documents, %(bytes)d bytes, %(chunks)d chunks, %(tokens)d tokens "
      "in %(seconds).1f s: %(documents_per_s).2f documents/s, %(tokens_per_s).0f tokens/s, "
      "%(chunks_per_s).1f chunks/s on %(cpus)d CPUs; re-run (all unchanged) %(rerun_seconds).2f s" % r)
if out:
    json.dump(r, open(out, "w"), indent=1)
PY
