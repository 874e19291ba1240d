"""bench/search_latency.py — what the keyword ranking adds to a search: the latency of POST /search
by meaning (vector), by words (keyword) and both fused (hybrid), through `modattn serve` (the model
loaded once, so the search's own time shows), on a store of N chunks whose texts are real: those of
the pydoc corpus (bench/make_pydoc_corpus.py, indexed), taken in turn by bench/make_store (its
vectors random: their values do not change a scan's time). The queries are those of
bench/search_eval.jsonl over that corpus (plain language and keywords), each in the three modes
interleaved query by query, one client, keep-alive. With --synthetic, the texts are 60 made-up
words each and the queries 3 words of random chunks (mostly common words: a harder case).
Writes bench/results/search_latency.md.

  python3 bench/search_latency.py --bin build/modattn --model .models/all-MiniLM-L6-v2 [--chunks 100000]
"""
import argparse
import http.client
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "../build/modattn"))
    ap.add_argument("--model", default=os.path.join(HERE, "../.models/all-MiniLM-L6-v2"))
    ap.add_argument("--chunks", type=int, default=100000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--store", help="reuse this store (made by a run with the same --chunks)")
    ap.add_argument("--texts-from", help="a store of the pydoc corpus to take texts from (else made here)")
    ap.add_argument("--synthetic", action="store_true", help="made-up words and 3-word queries of random chunks")
    ap.add_argument("--out", default=os.path.join(HERE, "results/search_latency.md"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="search-latency-")
    db = a.store or os.path.join(tmp, "s.db")
    texts = a.texts_from
    if not a.synthetic and not texts:
        corpus, texts = os.path.join(tmp, "pydoc"), os.path.join(tmp, "pydoc.db")
        subprocess.run([sys.executable, os.path.join(HERE, "make_pydoc_corpus.py"), corpus], check=True)
        subprocess.run([a.bin, "index", "--quiet", "--model", a.model, "--db", texts, corpus], check=True)
    if not a.store or not os.path.exists(db):
        t0 = time.time()
        cmd = [os.path.join(os.path.dirname(a.bin), "bench/make_store"), db, a.model, str(a.chunks)]
        subprocess.run(cmd + ([] if a.synthetic else [texts]), check=True)
        print(f"search_latency: {a.chunks} chunks made in {time.time() - t0:.1f} s", flush=True)
    c = sqlite3.connect(db)
    n = c.execute("select count(*) from chunks").fetchone()[0]
    rnd = random.Random(7)
    queries = []
    if a.synthetic:
        while len(queries) < a.queries:
            row = c.execute("select text from chunks where id = ?", (rnd.randint(1, n),)).fetchone()
            if row:
                queries.append(" ".join(rnd.sample(row[0].split(":", 1)[1].split(), 3)))
    else:
        evals = [json.loads(l) for l in open(os.path.join(HERE, "search_eval.jsonl")) if l.strip()]
        queries = [e["query"] for e in evals if e["corpus"] == "pydoc"]
    c.close()
    port_file = os.path.join(tmp, "port")
    srv = subprocess.Popen([a.bin, "serve", "--model", a.model, "--db", db, "--quiet", "--port", "0", "--port-file",
                            port_file], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(port_file):
        time.sleep(0.05)
    port = int(open(port_file).read())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while True:
        try:
            conn.request("GET", "/health")
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                break
        except OSError:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        time.sleep(0.1)

    def search(q, mode):
        body = json.dumps({"query": q, "k": 10, "mode": mode})
        t = time.perf_counter()
        conn.request("POST", "/search", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        dt = time.perf_counter() - t
        assert r.status == 200, data[:300]
        return dt, json.loads(data)

    modes = ["vector", "keyword", "hybrid"]
    for q in queries[:10]:  # warm-up: the vector file mapped, FTS5's pages read
        for m in modes:
            search(q, m)
    lat = {m: [] for m in modes}
    kw_found = 0
    for q in queries:
        for m in modes:
            dt, j = search(q, m)
            lat[m].append(dt * 1e3)
            if m == "keyword" and j["results"]:
                kw_found += 1
    srv.send_signal(signal.SIGTERM)
    srv.wait(60)

    def pct(v, p):
        v = sorted(v)
        return v[min(len(v) - 1, int(p / 100 * len(v)))]

    p50 = {m: statistics.median(lat[m]) for m in modes}
    lines = ["# What keyword search adds to a search's latency", "",
             f"Written by `bench/search_latency.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{os.cpu_count()} CPUs: a store of {n:,} chunks (`bench/make_store`: random vectors; "
             + ("60 made-up words each, queries of 3 words taken from random chunks" if a.synthetic else
                "the texts of the pydoc corpus's chunks in turn, the queries those of `bench/search_eval.jsonl` over "
                "that corpus, plain language and keywords")
             + f"), POST /search of `modattn serve` (model loaded once), k = 10, {len(queries)} "
             f"queries, the three modes interleaved query by query, one "
             f"keep-alive client. Each search embeds the query, scans the vectors and/or queries FTS5, fetches "
             f"the 10 chunks and the spans of their words. The keyword ranking found a match for "
             f"{kw_found} of {len(queries)} queries.", "",
             "| mode | p50 ms | p90 ms | p99 ms | p50 vs vector |", "|---|---:|---:|---:|---:|"]
    for m in modes:
        lines.append(f"| {m} | {p50[m]:.1f} | {pct(lat[m], 90):.1f} | {pct(lat[m], 99):.1f} | "
                     f"{p50[m] / p50['vector']:.2f}x |")
    ok = p50["hybrid"] <= 1.2 * p50["vector"]
    lines += ["", f"Target (issue 20): hybrid adds at most 20% to a vector search's latency at 100k chunks: "
              f"{'met' if ok else 'NOT met'} ({(p50['hybrid'] / p50['vector'] - 1) * 100:+.0f}% at p50).", ""]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    open(a.out, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
