"""bench/search_quality.py — search quality by meaning (vector), by words (keyword) and both fused
(hybrid), side by side, on the committed evaluation set bench/search_eval.jsonl: 140 queries over
two corpora, each with the documents that answer it, written in plain language (paraphrases) and as
keywords (identifiers, error codes, rare words, names).
  demo    demo/corpus (29 documents: text, Markdown, HTML, PDF)
  pydoc   the plain-text pydoc pages of 62 standard-library modules (bench/make_pydoc_corpus.py,
          made offline from this machine's Python)
Each query runs through `modattn serve`'s POST /search (k = 50 chunks, folded into documents in rank
order) in each mode. Reported per mode: recall@1, @3, @10 (the share of a query's expected
documents among the first 1, 3, 10 documents, averaged over queries) and MRR (mean of 1 / the rank of
the first expected document, 0 when it is not in the first 50 chunks). Writes
bench/results/search_quality.md (and .json).

With --rerank DIR (a cross-encoder), the server also runs with --rerank-model DIR and every query is
asked once more in hybrid mode with "rerank": true (its --rerank-top first candidates re-scored, as
`modattn search --rerank`): a quality row for it, and its added latency per query (each query's
plain hybrid search and reranked one timed back to back, --rerank-reps times, the median of each;
p50 and p90 over the queries), with the host's load average at the start and the end.

  python3 bench/search_quality.py --bin build/modattn --model .models/all-MiniLM-L6-v2 [--work DIR]
      [--rerank .models/tiny-cross-encoder [--rerank-top 50] [--rerank-reps 3]]

Another model, side by side: run it alone into its own file, then add a "By model" table to the main
file, either in the main run (--column) or, without searching again, from the two .json files
(--columns-only: rewrites only that table, keeping the sections around it; --work names the main run's
stores, for their chunk counts). The table: recall@1, recall@3 and MRR of each mode, a column per model,
in every slice (all queries, corpus x kind of query, kind over both corpora), over the queries all runs
share; above it, what differs between the models (architecture from their files, chunks per store):
  python3 bench/search_quality.py --model .models/all-mpnet-base-v2 --weights "" --work DIR2 \
      --out bench/results/search_quality_all-mpnet-base-v2.md
  python3 bench/search_quality.py --columns-only --work DIR \
      --column bench/results/search_quality_all-mpnet-base-v2.json
Each run's .json keeps its rows and, under "meta", the model, date, command and its stores' sizes.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MODES = ["vector", "keyword", "hybrid"]
DEFAULT_WEIGHT = 0.7  # modattn's default: MODATTN_SEARCH_KEYWORD_WEIGHT in include/modattn/search.h
DEFAULT_K = 10.0  # and the fusion's K: MODATTN_SEARCH_RRF_K


class Server:
    def __init__(self, binary, model, db, workdir, extra=()):
        pf = os.path.join(workdir, f"port-{os.path.basename(db)}")
        if os.path.exists(pf):
            os.remove(pf)
        self.proc = subprocess.Popen([binary, "serve", "--model", model, "--db", db, "--quiet", "--port", "0",
                                      "--port-file", pf, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(pf):
            if self.proc.poll() is not None:
                sys.exit("search_quality: the server did not start")
            time.sleep(0.05)
        self.port = int(open(pf).read())
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        while True:
            try:
                self.conn.request("GET", "/health")
                r = self.conn.getresponse()
                r.read()
                if r.status == 200:
                    break
            except OSError:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
            time.sleep(0.1)

    def search(self, query, mode, k=50, weight=None, rrf_k=None, rerank_top=None):
        req = {"query": query, "k": k, "mode": mode}
        if rerank_top is not None:
            req["rerank"] = True
            req["rerank_top"] = rerank_top
        if weight is not None:
            req["keyword_weight"] = weight
        if rrf_k is not None:
            req["rrf_k"] = rrf_k
        self.conn.request("POST", "/search", json.dumps(req),
                          {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"search {mode} {query!r}: {r.status} {data[:300]!r}")
        j = json.loads(data)
        if rerank_top is not None and j.get("rerank") is None:
            raise RuntimeError(f"search {query!r}: the server did not rerank: {data[:300]!r}")
        return j["results"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def documents(results):
    """Chunk results folded into document names, in the rank of each document's best chunk."""
    seen = []
    for r in results:
        name = os.path.basename(r["path"])
        if name not in seen:
            seen.append(name)
    return seen


def metrics(rows):
    def rec(k):
        return sum(len(set(r["expect"]) & set(r["docs"][:k])) / len(r["expect"]) for r in rows) / len(rows)

    def rr(r):
        for i, d in enumerate(r["docs"]):
            if d in r["expect"]:
                return 1.0 / (i + 1)
        return 0.0

    return {"r1": rec(1), "r3": rec(3), "r10": rec(10), "mrr": sum(rr(r) for r in rows) / len(rows), "n": len(rows)}


def pct(xs, q):
    """The q-quantile of xs (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def timed(f, reps):
    """f()'s result and the median of reps wall times (ms)."""
    ts, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        ts.append((time.perf_counter() - t0) * 1e3)
    return out, pct(ts, 0.5)

def store_stats(db):
    """What a store holds (documents, chunks, the chunk length and overlap in word pieces, the seconds between
    its first document's write and its last: how long indexing took, less the first document), or None."""
    if not os.path.exists(db):
        return None
    import sqlite3
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        d, ch, tok, ov, span = c.execute("SELECT count(*), sum(nchunks), max(chunk_tokens), max(overlap), "
                                         "max(indexed_at) - min(indexed_at) FROM documents").fetchone()
        model = c.execute("SELECT value FROM meta WHERE key = 'model_name'").fetchone()
    finally:
        c.close()
    return {"documents": d, "chunks": ch, "chunk_tokens": tok, "overlap": ov, "span_s": span,
            "model": model[0] if model else None}


def describe_model(meta):
    """One line on a column's model: its architecture from its files, its stores from the run's meta."""
    cfg, st = {}, {}
    d = meta.get("model_dir") or ""
    for f, dst in (("config.json", cfg), ("sentence_bert_config.json", st)):
        try:
            dst.update(json.load(open(os.path.join(d, f))))
        except (OSError, ValueError):
            pass
    parts = []
    if cfg:
        parts.append(f"{cfg.get('model_type', '?')}, {cfg.get('num_hidden_layers', '?')} layers, width "
                     f"{cfg.get('hidden_size', '?')} ({cfg.get('hidden_size', '?')}-dimensional vectors), "
                     f"max_seq_length {st.get('max_seq_length', '?')}")
    stores = meta.get("stores") or {}
    for c in sorted(stores):
        x = stores[c]
        t = f", its documents written over {x['span_s']:,} s" if x.get("span_s") is not None else ""
        parts.append(f"{c}: {x['chunks']:,} chunks of up to {x['chunk_tokens']} word pieces (overlap {x['overlap']}){t}")
    if meta.get("written"):
        parts.append(f"run {meta['written']}" + (f" by `{meta['command']}`" if meta.get("command") else ""))
    return "; ".join(parts)


def by_model(a, rows, base_meta, command):
    """The By model table: this run's rows and each --column's, over the queries all of them ran: recall@1,
    recall@3 and MRR for every mode, a column per model beside each other, in every slice (all queries, each
    corpus x kind of query, each kind over both corpora)."""
    cols = [(os.path.basename(a.model.rstrip("/")), rows, base_meta)]
    for c in a.column:
        path, _, label = c.partition(":")
        if not label:
            label = os.path.basename(path)[len("search_quality_"):-len(".json")] or path
        cj = json.load(open(path))
        meta = cj.get("meta") or {}
        if not meta and os.path.isdir(os.path.join(REPO, ".models", label)):  # a run from before meta: its files
            meta = {"model_dir": os.path.join(REPO, ".models", label)}
        cols.append((label, cj, meta))
    common = set.intersection(*[{r["query"] + "\0" + r["corpus"] for r in cr["vector"]} for _, cr, _ in cols])
    corp = sorted({q.split("\0")[1] for q in common})
    out = ["### By model", "",
           f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: the same queries ({len(common)}: those of " + " and ".join(corp) + " that every column ran), corpora and "
           "search settings (k = 50 chunks folded into documents; hybrid with K 10 and keyword weight 0.7), each store "
           "indexed with the model of its column (" + ", ".join(f"`{c.partition(':')[0]}`" for c in a.column)
           + " for the others). What differs between the models:", ""]
    for label, _, meta in cols:
        out.append(f"- **{label}**: {describe_model(meta) or 'no details recorded'}")
    ran = [(l, sorted({r["corpus"] for r in cr["vector"]})) for l, cr, _ in cols]
    if any(c != ran[0][1] for _, c in ran):
        out += ["", "Not every column ran every corpus (" + "; ".join(f"{l}: {', '.join(c)}" for l, c in ran)
                + "): the table holds only the queries they share."]
    out += ["",
            "Keyword search ranks the same words with the same BM25 in both; it differs only through the chunks, "
            "whose lengths follow each model's max_seq_length (longer chunks: fewer, and each holds more words).", "",
            "| queries | mode | " + " | ".join(f"{m}, {l}" for m in ("recall@1", "recall@3", "MRR") for l, _, _ in cols)
            + " |", "|---|---|" + "---:|" * (3 * len(cols))]
    sels = [("all", lambda r: True)]
    sels += [(f"{c}, {k}", lambda r, c=c, k=k: r["corpus"] == c and r["kind"] == k)
             for c in corp for k in ("plain", "keyword")]
    if len(corp) > 1:
        sels += [(f"both corpora, {k}", lambda r, k=k: r["kind"] == k) for k in ("plain", "keyword")]
    for title, sel in sels:
        for m in MODES:
            ms = [metrics([r for r in cr[m] if sel(r) and r["query"] + "\0" + r["corpus"] in common]) for _, cr, _ in cols]
            out.append(f"| {title} ({ms[0]['n']}) | {m} | " + " | ".join(f"{x[k]:.3f}" for k in ("r1", "r3", "mrr") for x in ms) + " |")
    return out + [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build/modattn"))
    ap.add_argument("--model", default=os.path.join(REPO, ".models/all-MiniLM-L6-v2"))
    ap.add_argument("--work", help="folder for the corpora and stores (kept; reused when there)")
    ap.add_argument("--out", default=os.path.join(HERE, "results/search_quality.md"))
    ap.add_argument("--before-json", help="the .json of an earlier run (another modattn): a before/after table")
    ap.add_argument("--before-label", default="before", help="what the earlier run was")
    ap.add_argument("--weights", default="60:0.3,60:0.5,60:0.6,60:0.7,60:1,20:0.5,20:0.7,20:1,10:0.5,10:0.7,10:1",
                    help="K:weight pairs of the hybrid sweep (comma-separated; empty: no sweep)")
    ap.add_argument("--rerank", help="a cross-encoder's directory: a hybrid + rerank row and its added latency")
    ap.add_argument("--rerank-top", type=int, default=50, help="candidates the cross-encoder re-scores (default 50)")
    ap.add_argument("--rerank-reps", type=int, default=3, help="timings of each query, the median kept (default 3)")
    ap.add_argument("--corpora", default="demo,pydoc",
                    help="which corpora to evaluate (comma-separated; a slow model on a shared machine: demo)")
    ap.add_argument("--columns-only", action="store_true",
                    help="no searches: rewrite --out's By model table from its .json (this --model's rows) and --column")
    ap.add_argument("--column", action="append", default=[],
                    help="the .json of a run with another --model (the model named by its file, "
                         "search_quality_<model>.json, or JSON:LABEL): a column of the By model table")
    a = ap.parse_args()
    command = "python3 bench/search_quality.py " + " ".join(
        os.path.relpath(x, REPO) if os.path.isabs(x) and x.startswith(REPO) else x for x in sys.argv[1:])
    work = a.work or tempfile.mkdtemp(prefix="search-quality-")
    os.makedirs(work, exist_ok=True)
    if a.columns_only:
        with open(a.out) as f:
            head, sep, tail = f.read().partition("\n### By model\n")
        # the sections after the By model table (bench/search_quality_sparse.py's) are kept
        i = tail.find("\n## ") if sep else -1
        rest = tail[i:] if i >= 0 else ""
        with open(a.out.replace(".md", ".json")) as f:
            base = json.load(f)
        meta = base.get("meta")
        if not meta:  # a run from before the .json kept its meta: the model's files, and --work's stores
            meta = {"model_dir": os.path.abspath(a.model), "stores": {}}
            for c in ("demo", "pydoc"):
                st = store_stats(os.path.join(work, f"{c}.db"))
                if st and st["model"] == os.path.basename(a.model.rstrip("/")):
                    meta["stores"][c] = st
        table = by_model(a, base, meta, command)
        open(a.out, "w").write(head.rstrip("\n") + "\n\n" + "\n".join(table) + rest)
        print("\n".join(table))
        return
    evals = [json.loads(l) for l in open(os.path.join(HERE, "search_eval.jsonl")) if l.strip()]
    chosen = [c.strip() for c in a.corpora.split(",") if c.strip()]
    evals = [e for e in evals if e["corpus"] in chosen]
    stores = {c: os.path.join(work, f"{c}.db") for c in ("demo", "pydoc") if c in chosen}
    corpora = {"demo": os.path.join(REPO, "demo/corpus"), "pydoc": os.path.join(work, "pydoc")}
    if "pydoc" in stores and not os.path.isdir(corpora["pydoc"]):
        subprocess.run([sys.executable, os.path.join(HERE, "make_pydoc_corpus.py"), corpora["pydoc"]], check=True)
    meta = {"model": os.path.basename(a.model.rstrip("/")), "model_dir": os.path.abspath(a.model),
            "written": time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), "command": command, "stores": {}}
    for name, db in stores.items():
        t0 = time.time()
        subprocess.run([a.bin, "index", "--quiet", "--model", a.model, "--db", db, corpora[name]], check=True)
        print(f"search_quality: {name} indexed in {time.time() - t0:.1f} s", flush=True)
        meta["stores"][name] = dict(store_stats(db) or {}, index_s=time.time() - t0)
    rows = {m: [] for m in MODES}
    weights = [tuple(float(x) for x in w.split(":")) for w in a.weights.split(",") if w.strip()]
    sweep = {w: [] for w in weights}
    rr_rows, lat_plain, lat_rr = [], [], []
    load0 = os.getloadavg()
    for name, db in stores.items():
        srv = Server(a.bin, a.model, db, work, ("--rerank-model", a.rerank) if a.rerank else ())
        for e in evals:
            if e["corpus"] != name:
                continue
            for m in MODES:
                docs = documents(srv.search(e["query"], m))
                rows[m].append(dict(e, docs=docs))
            if a.rerank:  # the plain hybrid search and the reranked one, back to back
                _, tp = timed(lambda: srv.search(e["query"], "hybrid"), a.rerank_reps)
                res, tr = timed(lambda: srv.search(e["query"], "hybrid", rerank_top=a.rerank_top), a.rerank_reps)
                rr_rows.append(dict(e, docs=documents(res)))
                lat_plain.append(tp)
                lat_rr.append(tr)
            for w in weights:
                sweep[w].append(dict(e, docs=documents(srv.search(e["query"], "hybrid", weight=w[1], rrf_k=w[0]))))
        srv.stop()

    def table(select, title):
        out = [f"### {title}", "", "| mode | recall@1 | recall@3 | recall@10 | MRR | queries |", "|---|---:|---:|---:|---:|---:|"]
        res = {}
        for m in MODES:
            sel = [r for r in rows[m] if select(r)]
            res[m] = metrics(sel)
            x = res[m]
            out.append(f"| {m} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} | {x['mrr']:.3f} | {x['n']} |")
        return out + [""], res

    lines = ["# Search quality: by meaning, by words, and both", "",
             f"Written by `bench/search_quality.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
             f"the {len(evals)} queries of `bench/search_eval.jsonl` over "
             + ("demo/corpus and the pydoc corpus " if len(stores) == 2 else
                "demo/corpus (only: --corpora demo) " if "demo" in stores else "the pydoc corpus (only: --corpora pydoc) ")
             + 
             f"(`bench/make_pydoc_corpus.py`, Python {sys.version.split()[0]}), model "
             f"{os.path.basename(a.model)}, k = 50 chunks folded into documents, hybrid with its defaults "
             f"(reciprocal rank fusion, K {DEFAULT_K:g}, the keyword ranking weighted {DEFAULT_WEIGHT:g} against the vector's 1, "
             f"50 candidates each).", ""]
    all_l, all_r = table(lambda r: True, "All queries")
    lines += all_l
    for corpus in stores:
        for kind in ("plain", "keyword"):
            l, _ = table(lambda r, c=corpus, k=kind: r["corpus"] == c and r["kind"] == k, f"{corpus}, {kind}")
            lines += l
    for kind in ("plain", "keyword"):
        l, _ = table(lambda r, k=kind: r["kind"] == k, f"both corpora, {kind}")
        lines += l
    h, v = all_r["hybrid"], all_r["vector"]
    ok = all(h[x] >= v[x] for x in ("r1", "r3", "r10", "mrr")) and h["r1"] > v["r1"]
    lines += [f"Target (issue 20): hybrid no worse than vector on every metric and strictly better on "
              f"recall@1, over all queries: {'met' if ok else 'NOT met'} (recall@1 {v['r1']:.3f} -> {h['r1']:.3f}, "
              f"MRR {v['mrr']:.3f} -> {h['mrr']:.3f}).", ""]
    if weights:
        lines += ["### Hybrid by fusion K and keyword weight (the vector ranking weighs 1)", "",
                  "How the defaults were chosen: the pair with the best MRR over all queries among those no worse "
                  "than vector search on any metric of any table (corpus x kind of query). At the textbook K of 60 "
                  "only keyword weights up to 0.5 qualify, and with them a chunk that only the words find "
                  "(1/(60+1) x 0.5) comes after all 50 candidates found by meaning: on a large store, where "
                  "meaning alone misses more exact names, that loses what keywords are for. At K 10 and 0.7 the "
                  "best match by words scores as the 6th by meaning.", "",
                  "| K | keyword weight | recall@1 | recall@3 | recall@10 | MRR | plain MRR | keyword MRR | "
                  "worst of the 4 tables x 4 metrics, hybrid minus vector |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for w in weights:
            x = metrics(sweep[w])
            pm = metrics([r for r in sweep[w] if r["kind"] == "plain"])["mrr"]
            km = metrics([r for r in sweep[w] if r["kind"] == "keyword"])["mrr"]
            worst = min((metrics([r for r in sweep[w] if r["corpus"] == c and r["kind"] == k])[x] -
                         metrics([r for r in rows["vector"] if r["corpus"] == c and r["kind"] == k])[x], f"{c}/{k} {x}")
                        for c in stores for k in ("plain", "keyword") for x in ("r1", "r3", "r10", "mrr"))
            mark = " (default)" if w == (DEFAULT_K, DEFAULT_WEIGHT) else ""
            lines.append(f"| {w[0]:g} | {w[1]:g}{mark} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} | {x['mrr']:.3f} | "
                         f"{pm:.3f} | {km:.3f} | {worst[0]:+.3f} ({worst[1]}) |")
        lines.append("")
    if a.before_json:
        before = json.load(open(a.before_json))
        lines += [f"### Before and after ({a.before_label} -> this run)", "",
                  "| queries | mode | recall@1 | recall@3 | recall@10 | MRR |", "|---|---|---:|---:|---:|---:|"]
        sels = [("all", lambda r: True)] + [(f"{c}, {k}", lambda r, c=c, k=k: r["corpus"] == c and r["kind"] == k)
                                            for c in stores for k in ("plain", "keyword")]
        for title, sel in sels:
            for m in MODES:
                b = metrics([r for r in before[m] if sel(r)])
                x = metrics([r for r in rows[m] if sel(r)])
                lines.append(f"| {title} | {m} | " + " | ".join(f"{b[k]:.3f} -> {x[k]:.3f}" for k in ("r1", "r3", "r10", "mrr")) + " |")
        worst = min((metrics([r for r in rows["hybrid"] if sel(r)])[k] - metrics([r for r in rows["vector"] if sel(r)])[k], f"{t} {k}")
                    for t, sel in sels for k in ("r1", "r3", "r10", "mrr"))
        lines += ["", f"Hybrid minus vector, the worst of every table and metric of this run: {worst[0]:+.3f} ({worst[1]}): "
                  f"hybrid is {'no worse than' if worst[0] >= 0 else 'WORSE than'} meaning alone on every metric.", ""]
    if a.rerank:
        load1 = os.getloadavg()
        h, x = all_r["hybrid"], metrics(rr_rows)
        added = [r - p for p, r in zip(lat_plain, lat_rr)]
        name = os.path.basename(os.path.normpath(a.rerank))
        shown = os.path.relpath(a.rerank, REPO) if os.path.abspath(a.rerank).startswith(REPO) else a.rerank
        lines += [f"### Second stage: hybrid + `--rerank` ({name})", "",
                  f"Every query once more through POST /search with `\"rerank\": true, \"rerank_top\": {a.rerank_top}` "
                  f"on a server started with `--rerank-model {shown}` "
                  f"(what `modattn search --rerank DIR --rerank-top {a.rerank_top}` does): the first "
                  f"{a.rerank_top} candidates of the hybrid search re-scored by the cross-encoder and re-ordered.", "",
                  "| mode | recall@1 | recall@3 | recall@10 | MRR | queries |", "|---|---:|---:|---:|---:|---:|",
                  f"| hybrid | {h['r1']:.3f} | {h['r3']:.3f} | {h['r10']:.3f} | {h['mrr']:.3f} | {h['n']} |",
                  f"| hybrid + rerank | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} | {x['mrr']:.3f} | {x['n']} |", ""]
        if name.startswith("tiny-cross-encoder"):
            lines += [f"{name} is the test suite's cross-encoder with **random, untrained weights** (`make model`): its "
                      "scores mean nothing, so the row above is what a random re-ordering of the first "
                      f"{a.rerank_top} candidates does to quality, not what reranking is worth. No trained cross-encoder "
                      "is available offline here; the figure to read is the latency below (a trained model of the "
                      "same shape costs the same).", ""]
        lines += ["| latency per query (server, ms) | p50 | p90 |", "|---|---:|---:|",
                  f"| hybrid | {pct(lat_plain, 0.5):.1f} | {pct(lat_plain, 0.9):.1f} |",
                  f"| hybrid + rerank | {pct(lat_rr, 0.5):.1f} | {pct(lat_rr, 0.9):.1f} |",
                  f"| **added by the rerank** (per query, reranked minus plain) | **{pct(added, 0.5):.1f}** | "
                  f"{pct(added, 0.9):.1f} |", "",
                  f"Each query's two searches timed back to back, {a.rerank_reps} times each, the median kept; "
                  f"{len(added)} queries (both corpora); wall time of the HTTP request from this script (one client, "
                  f"so one executor runs each on every thread). Host: {os.cpu_count()} CPUs shared with other work: "
                  f"load average {load0[0]:.1f} when the searches started, {load1[0]:.1f} when they ended, so the "
                  "absolute figures are inflated by that load; the difference is the cross-encoder's "
                  f"{a.rerank_top} pairs. Command: `{command}`.", ""]
    misses = [r for r in rows["hybrid"] if not set(r["expect"]) & set(r["docs"][:3])]
    if misses:
        lines += ["Hybrid's misses at 3 (expected: first three documents found):", ""]
        for r in misses:
            lines.append(f"- {r['corpus']}/{r['kind']}: \"{r['query']}\": {', '.join(r['expect'])}: "
                         f"{', '.join(r['docs'][:3]) or '(none)'}")
        lines.append("")
    if a.column:
        lines += by_model(a, rows, meta, command)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    open(a.out, "w").write("\n".join(lines))
    out_json = {m: rows[m] for m in MODES}
    out_json["meta"] = meta
    if a.rerank:
        out_json["hybrid+rerank"] = rr_rows
        out_json["rerank_latency_ms"] = {"plain": lat_plain, "reranked": lat_rr, "reps": a.rerank_reps,
                                         "rerank_top": a.rerank_top, "model": os.path.basename(os.path.normpath(a.rerank))}
    json.dump(out_json, open(a.out.replace(".md", ".json"), "w"), indent=1)
    print("\n".join(lines[:12]))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
