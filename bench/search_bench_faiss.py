#!/usr/bin/env python3
"""bench/search_bench_faiss.py — the FAISS baseline of bench/search_bench.sh: exact inner-product
search (IndexFlatIP) over synthetic L2-normalised float32 vectors of the same sizes, dimension, k
and thread count as bench/search_bench.c.

Validate, then benchmark: the first query's top k is checked against a numpy brute force.
Latency is measured one query per call (what `modattn search` does: one query, then the answer)
and, for reference, as the per-query share of one batched call with every query at once (FAISS
then uses a BLAS matrix product, which a single query cannot).

usage: search_bench_faiss.py --sizes 10000,100000,1000000 --dim 384 --queries 200 --k 10
                             --threads N --json FILE
"""
import argparse
import json
import time

import faiss
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.threads > 0:
        faiss.omp_set_num_threads(a.threads)
    threads = faiss.omp_get_max_threads()
    rng = np.random.default_rng(1234)
    maxn = max(sizes)
    t0 = time.perf_counter()
    x = rng.standard_normal((maxn, a.dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = rng.standard_normal((a.queries, a.dim), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    print("faiss %s: generated %d normalised vectors in %.1f s, %d threads"
          % (faiss.__version__, maxn, time.perf_counter() - t0, threads))
    results = []
    for n in sizes:
        index = faiss.IndexFlatIP(a.dim)
        index.add(x[:n])
        # validate
        d, i = index.search(q[:1], a.k)
        ref = np.argsort(-(x[:n] @ q[0]), kind="stable")[:a.k]
        s_ref = (x[:n] @ q[0])[ref]
        if not np.allclose(np.sort(d[0])[::-1], s_ref, atol=1e-5):
            raise SystemExit("faiss top-k differs from the numpy brute force at n=%d" % n)
        # one query per call
        index.search(q[:1], a.k)
        lat = []
        for j in range(a.queries):
            t = time.perf_counter()
            index.search(q[j:j + 1], a.k)
            lat.append(time.perf_counter() - t)
        lat = np.sort(np.array(lat))
        p50, p99 = np.percentile(lat, 50) * 1e3, np.percentile(lat, 99) * 1e3
        r = {"n": n, "config": "faiss IndexFlatIP (1 query per call)", "p50_ms": p50, "p99_ms": p99,
             "mean_ms": float(lat.mean() * 1e3), "gbs": n * a.dim * 4 / (p50 * 1e-3) * 1e-9}
        results.append(r)
        print("n=%-8d %-38s p50 %8.3f ms  p99 %8.3f ms  %6.1f GB/s" % (n, r["config"], p50, p99, r["gbs"]))
        # all queries in one call
        t = time.perf_counter()
        index.search(q, a.k)
        per = (time.perf_counter() - t) / a.queries * 1e3
        r = {"n": n, "config": "faiss IndexFlatIP (%d queries per call)" % a.queries,
             "p50_ms": per, "p99_ms": None, "mean_ms": per, "gbs": None}
        results.append(r)
        print("n=%-8d %-38s %8.3f ms per query" % (n, r["config"], per))
        del index
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"faiss": faiss.__version__, "threads": threads, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
