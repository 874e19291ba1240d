"""bench/ann_bench_py.py DATA_DIR [--M 32] [--ef-construction 40] [--ef 16,32,...] [--threads 2]
[--systems hnswlib,faiss] — the rivals' side of the ANN benchmark (bench/ann_bench.sh): hnswlib and
FAISS (faiss-cpu from PyPI) build an HNSW index over bench/ann_data.py's base vectors with the same
M and efConstruction as modattn's, and answer the same queries at each efSearch, all in one
batched call per run (median of 3) and one query per call (p50): recall@10 against the exact top-10,
queries/s, build seconds and index bytes (serialised). One JSON object per line. Not a test."""
import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np


def recall(ids, gt):
    return float(np.mean([len(set(ids[i][:10].tolist()) & set(gt[i, :10].tolist())) / 10 for i in range(len(gt))]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--M", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=40)
    ap.add_argument("--ef", default="16,32,64,128,256")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--systems", default="hnswlib,faiss")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    d = meta["dim"]
    base = np.fromfile(os.path.join(a.data, "base.f32"), dtype="<f4").reshape(-1, d)
    q = np.fromfile(os.path.join(a.data, "queries.f32"), dtype="<f4").reshape(-1, d)
    gt = np.fromfile(os.path.join(a.data, "gt.i32"), dtype="<i4").reshape(len(q), 100)
    efs = [int(x) for x in a.ef.split(",")]
    common = {"rows": len(base), "queries": len(q), "threads": a.threads,
              "build_params": f"M={a.M},efConstruction={a.ef_construction}"}

    for system in a.systems.split(","):
        if system == "hnswlib":
            import hnswlib
            ix = hnswlib.Index(space="ip", dim=d)
            t0 = time.time()
            ix.init_index(max_elements=len(base), M=a.M, ef_construction=a.ef_construction, random_seed=100)
            ix.set_num_threads(a.threads)
            ix.add_items(base, np.arange(len(base)))
            build = time.time() - t0
            with tempfile.NamedTemporaryFile(suffix=".hnsw") as f:
                ix.save_index(f.name)
                nbytes = os.path.getsize(f.name)

            def search(x, ef):
                ix.set_ef(max(ef, 10))
                return ix.knn_query(x, k=10, num_threads=a.threads)[0]
        elif system == "faiss":
            import faiss
            faiss.omp_set_num_threads(a.threads)
            ix = faiss.IndexHNSWFlat(d, a.M, faiss.METRIC_INNER_PRODUCT)
            ix.hnsw.efConstruction = a.ef_construction
            t0 = time.time()
            ix.add(base)
            build = time.time() - t0
            nbytes = len(faiss.serialize_index(ix))

            def search(x, ef):
                ix.hnsw.efSearch = ef
                return ix.search(x, 10)[1]
        else:
            raise SystemExit(f"unknown system {system}")
        print(json.dumps({"system": system, "index": "hnsw", "phase": "build", "build_s": round(build, 2),
                          "file_bytes": nbytes, **common}), flush=True)
        for ef in efs:
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                ids = search(q, ef)
                runs.append(time.perf_counter() - t0)
            lat = []
            for i in range(len(q)):
                t0 = time.perf_counter()
                search(q[i:i + 1], ef)
                lat.append((time.perf_counter() - t0) * 1e3)
            lat.sort()
            print(json.dumps({"system": system, "index": "hnsw", "efSearch": ef, "recall10": round(recall(ids, gt), 4),
                              "qps": round(len(q) / statistics.median(runs), 1), "p50_ms": round(lat[len(lat) // 2], 3),
                              "p99_ms": round(lat[len(lat) * 99 // 100], 3), "build_s": round(build, 2),
                              "file_bytes": nbytes, **common}), flush=True)
        del ix


if __name__ == "__main__":
    main()
