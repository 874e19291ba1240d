#!/usr/bin/env bash
# bench/search_bench.sh [BUILD] — the search and indexing benchmark, written to
# bench/results/search.md. Not a test. Run from the repository root on a quiet machine.
#
# In one run:
#   1. bench/search_bench (C): this machine's streaming-read memory bandwidth, then modattn's exact
#      top-k scan (modattn__topk, as `modattn search` runs it) at 10k, 100k and 1M synthetic
#      L2-normalised 384-d vectors, k = 10: p50/p99 latency, GB/s, % of the bandwidth;
#   2. bench/search_bench_faiss.py: FAISS IndexFlatIP on the same sizes, k and thread count
#      (faiss-cpu from PyPI in a virtual environment under /tmp);
#   3. bench/index_bench.sh: `modattn index` throughput on demo/corpus.
# Environment: SIZES (10000,100000,1000000), QUERIES (200), THREADS (all CPUs),
# FAISS_VENV (/tmp/modattn-faiss-venv).
set -euo pipefail
BUILD=${1:-build}
SIZES=${SIZES:-10000,100000,1000000}
QUERIES=${QUERIES:-200}
THREADS=${THREADS:-$(nproc)}
VENV=${FAISS_VENV:-/tmp/modattn-faiss-venv}
OUT=bench/results/search.md
T=$(mktemp -d /tmp/modattn-search-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT

[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD" -j2 --target search_bench modattn_cli
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import faiss, numpy" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet faiss-cpu numpy
fi

LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
echo "== modattn scan"
"$BUILD/bench/search_bench" --sizes "$SIZES" --queries "$QUERIES" --k 10 --threads "$THREADS" \
  --json "$T/modattn.json" | tee "$T/modattn.txt"
echo "== FAISS"
OMP_NUM_THREADS=$THREADS "$VENV/bin/python" bench/search_bench_faiss.py --sizes "$SIZES" \
  --queries "$QUERIES" --k 10 --threads "$THREADS" --json "$T/faiss.json" | tee "$T/faiss.txt"
echo "== indexing"
INDEX_BENCH_JSON=$T/index.json bench/index_bench.sh "$BUILD" demo/corpus | tee "$T/index.txt"

mkdir -p bench/results
LOAD_START=$LOAD_START python3 - "$T" "$OUT" "$BUILD" "$SIZES" "$QUERIES" "$THREADS" <<'PY'
import json, os, platform, subprocess, sys, time
t, out, build, sizes, queries, threads = sys.argv[1:]
m = json.load(open(os.path.join(t, "modattn.json")))
f = json.load(open(os.path.join(t, "faiss.json")))
ix = json.load(open(os.path.join(t, "index.json")))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
L = []
L.append("# Search and indexing benchmark\n")
L.append("Made by `bench/search_bench.sh %s` on %s (%s, %d CPUs, scan kernel %s), %s. Sizes %s, "
         "dimension %d, k = %d, %s queries per size, %s threads for modattn and FAISS alike. "
         "Vectors are synthetic, L2-normalised, float32; the scan is exact (every vector compared)."
         % (build, platform.node(), cpu, os.cpu_count(), m["kernel"], time.strftime("%Y-%m-%d %H:%M"),
            sizes, m["dim"], m["k"], queries, threads))
L.append("Load average (1 min) when the run started: %s; when it ended: %s (other jobs share the "
         "machine: see the paired figure below)." % (os.environ.get("LOAD_START", "?"),
                                                     open("/proc/loadavg").read().split()[0]))
L.append("\n## Memory bandwidth of this machine (same run)\n")
L.append("Streaming read (a sum over the 1M-vector matrix, %.2f GB, best of 5): **%.1f GB/s** with %d "
         "threads, %.1f GB/s with one." % (max(int(s) for s in sizes.split(",")) * m["dim"] * 4e-9,
                                            m["bandwidth_gbs"], m["threads"], m["bandwidth_1t_gbs"]))
L.append("\n## Search latency (milliseconds; for the rows \"queries per call\", the per-query share of one call)\n")
L.append("| vectors | implementation | p50 | p99 | scan GB/s (at p50) | % of bandwidth |")
L.append("| ---: | --- | ---: | ---: | ---: | ---: |")
allr = m["results"] + f["results"]
by_n = sorted(set(r["n"] for r in allr))
for n in by_n:
    for r in allr:
        if r["n"] != n:
            continue
        bw = m["bandwidth_1t_gbs"] if "1 thread" in r["config"] else m["bandwidth_gbs"]
        p99 = "%.3f" % r["p99_ms"] if r["p99_ms"] is not None else "—"
        gbs = "%.1f" % r["gbs"] if r["gbs"] is not None else "—"
        pct = "%.0f%%" % (100 * r["gbs"] / bw) if r["gbs"] is not None and "queries per call" not in r["config"] else "—"
        L.append("| %d | %s | %.3f | %s | %s | %s |" % (n, r["config"], r["p50_ms"], p99, gbs, pct))
big = max(by_n)
mine = next(r for r in m["results"] if r["n"] == big and r["config"] == "modattn (all threads)")
fs = next(r for r in f["results"] if r["n"] == big and "1 query" in r["config"])
fb = next(r for r in f["results"] if r["n"] == big and "queries per call" in r["config"])
pct = 100 * mine["gbs"] / m["bandwidth_gbs"]
L.append("\n## At %d vectors\n" % big)
paired = 100 * m["paired_fraction"]
L.append("- modattn: p50 %.2f ms = %.1f GB/s, %.0f%% of the bandwidth measured before the runs; timed "
         "back to back with a probe pass (median of %s pairs, which cancels the other jobs' share "
         "of the memory bus): **%.0f%% of the streaming-read bandwidth** (target: within 20%%, "
         "i.e. >= 80%%: %s)." % (mine["p50_ms"], mine["gbs"], pct, min(60, int(queries)), paired,
                                 "met" if paired >= 80 else "NOT met"))
L.append("- FAISS IndexFlatIP, one query per call: p50 %.2f ms: modattn is **%.2fx** its speed (target: "
         ">= 1x: %s)."
         % (fs["p50_ms"], fs["p50_ms"] / mine["p50_ms"], "met" if fs["p50_ms"] >= mine["p50_ms"] else "NOT met"))
mb = next(r for r in m["results"] if r["n"] == big and "queries per call" in r["config"])
L.append("- All %s queries in one call (a GEMM over blocks of vectors and queries; per-query share of "
         "the call): modattn `modattn__topk_batch` (`search --queries`) %.3f ms per query, FAISS %.3f ms: "
         "modattn is **%.2fx** FAISS's batched call (target, issue 15: >= 1x: %s). The batched hits equal "
         "one query at a time's, rows and scores (checked for every query in the run)."
         % (queries, mb["p50_ms"], fb["p50_ms"], fb["p50_ms"] / mb["p50_ms"],
            "met" if fb["p50_ms"] >= mb["p50_ms"] else "NOT met"))
L.append("\nSmall stores fit in the caches (10k x 384 floats = 15 MB < 32 MB of L3 here), so their "
         "GB/s can exceed the DRAM figure. The scan reads each row once, in order, with 4 FMA "
         "accumulators per row (AVX-512 or AVX2 chosen at run time); the pool splits the rows into "
         "blocks of 1024, each thread keeping its own top-k heap.")
L.append("\n## Indexing throughput (`modattn index`, demo/corpus)\n")
L.append("| documents | bytes | chunks | tokens | seconds | documents/s | tokens/s | re-run (unchanged) |")
L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
L.append("| %d | %d | %d | %d | %.1f | %.2f | %.0f | %.2f s |" % (
    ix["documents"], ix["bytes"], ix["chunks"], ix["tokens"], ix["seconds"], ix["documents_per_s"],
    ix["tokens_per_s"], ix["rerun_seconds"]))
L.append("\nIndexing time is the encoder's (all-MiniLM-L6-v2 on the CPU, 256-token chunks); reading, "
         "extraction, chunking and SQLite are a small share. The figures are from a machine shared "
         "with other jobs: re-run on a quiet one for clean numbers.")
# the cold-CLI section is bench/search_cold.sh's: kept as it is
try:
    prev = open(out).read()
    a = prev.index("## Cold CLI")
    b = prev.find("\n## Raw output", a)
    L.append("\n" + prev[a:b if b >= 0 else len(prev)].rstrip())
except (OSError, ValueError):
    pass
L.append("\n## Raw output\n")
for name in ("modattn.txt", "faiss.txt", "index.txt"):
    L.append("```\n" + open(os.path.join(t, name)).read().rstrip() + "\n```")
open(out, "w").write("\n".join(L) + "\n")
print("wrote", out)
PY
