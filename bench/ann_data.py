"""bench/ann_data.py SEED_DB[,SEED_DB...] OUT_DIR N Q — vectors for the ANN benchmark: N base
vectors and Q queries of the seeds' dimension, grown from real MiniLM embeddings, and the exact
top-100 of every query (the ground truth).

Why grown: the real corpora at hand (the demo and the Python documentation, ~1.8k chunks) are far
smaller than the 1M rows the benchmark needs, and random vectors have no neighbourhoods (every
point is about as far from every other: an ANN index is then tested on a problem no corpus poses).

How (keeps the seeds' neighbourhood structure): each new point starts at a seed s, moves a random
fraction u ~ U(0, 1) of the way towards one of s's 10 nearest seeds t, and gets Gaussian noise whose
norm is about half the seeds' median distance to their nearest seed; then it is L2-normalised. New
points therefore fill the seeds' local neighbourhoods and the edges between near seeds, at the
seeds' own scale, and never the empty space between far ones. Queries are grown the same way from
the same seeds (held out: they are not among the base vectors). Deterministic for a seed.

Writes OUT_DIR/base.f32 ([N, dim] float32), queries.f32 ([Q, dim]), gt.i32 ([Q, 100], row numbers
of base, best first) and meta.json."""
import json
import os
import sqlite3
import sys
import time

import numpy as np


def seeds_from(paths):
    vecs = []
    for p in paths:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        rows = db.execute("SELECT vector FROM embeddings ORDER BY chunk").fetchall()
        db.close()
        vecs += [np.frombuffer(r[0], dtype="<f4") for r in rows]
    x = np.stack(vecs).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    # the same chunk text in two corpora gives the same vector: keep one
    _, keep = np.unique(np.round(x, 5), axis=0, return_index=True)
    return x[np.sort(keep)]


def grow(seeds, nn, noise, n, rng):
    dim = seeds.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    block = 65536
    for a in range(0, n, block):
        b = min(n, a + block)
        s = rng.integers(0, len(seeds), b - a)
        t = nn[s, rng.integers(0, nn.shape[1], b - a)]
        u = rng.random((b - a, 1), dtype=np.float32)
        x = seeds[s] + u * (seeds[t] - seeds[s])
        x += rng.standard_normal((b - a, dim), dtype=np.float32) * (noise / np.sqrt(dim))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[a:b] = x
    return out


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    paths, out, n, q = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261205)
    seeds = seeds_from(paths)
    sim = seeds @ seeds.T
    np.fill_diagonal(sim, -np.inf)
    nn = np.argsort(-sim, axis=1)[:, :10]
    d1 = np.sqrt(np.maximum(0, 2 - 2 * sim.max(axis=1)))
    noise = 0.5 * float(np.median(d1))
    t0 = time.time()
    base = grow(seeds, nn, noise, n, rng)
    queries = grow(seeds, nn, noise, q, rng)
    base.tofile(os.path.join(out, "base.f32"))
    queries.tofile(os.path.join(out, "queries.f32"))
    # exact top-100 by inner product, in blocks of base rows
    k = 100
    best_s = np.full((q, k), -np.inf, dtype=np.float32)
    best_i = np.zeros((q, k), dtype=np.int64)
    for a in range(0, n, 131072):
        b = min(n, a + 131072)
        s = queries @ base[a:b].T
        idx = np.argpartition(-s, min(k, b - a - 1), axis=1)[:, :k]
        cs = np.take_along_axis(s, idx, axis=1)
        alls = np.concatenate([best_s, cs], axis=1)
        alli = np.concatenate([best_i, idx + a], axis=1)
        order = np.lexsort((alli, -alls), axis=1)[:, :k]
        best_s = np.take_along_axis(alls, order, axis=1)
        best_i = np.take_along_axis(alli, order, axis=1)
    best_i.astype(np.int32).tofile(os.path.join(out, "gt.i32"))
    meta = {"n": n, "queries": q, "dim": int(base.shape[1]), "seeds": int(len(seeds)), "seed_dbs": paths,
            "noise": noise, "median_nn_distance": float(np.median(d1)), "seconds": time.time() - t0}
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
    print(f"ann_data: {n} base + {q} queries of dim {base.shape[1]} grown from {len(seeds)} seeds "
          f"(noise {noise:.3f}) into {out} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
