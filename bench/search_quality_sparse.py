"""bench/search_quality_sparse.py — search quality with learned sparse vectors (SPLADE, `index --sparse`):
sparse alone, and hybrid fusion of meaning + words + sparse by sparse weight, beside meaning, words and
hybrid without sparse, on the same store and queries (bench/search_eval.jsonl), through `modattn serve`'s
POST /search (k = 50 chunks folded into documents; the metrics of bench/search_quality.py).

The store is indexed once with `--sparse DIR`; one server runs with `--sparse-model DIR` (its hybrid fuses
the sparse ranking) and one without (hybrid of meaning and words only: the baseline, the same chunks).
The sweep picks the default sparse weight (MODATTN_SEARCH_SPARSE_WEIGHT): the best MRR among weights no
worse than hybrid without sparse on any metric of any table (corpus x kind of query), or, when none is,
among those with the smallest worst loss. Appends its tables
to --out (a section of bench/results/search_quality.md).

  python3 bench/search_quality_sparse.py --sparse .models/splade-tiny [--corpora demo] [--work DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from search_quality import Server, documents, metrics  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build/modattn"))
    ap.add_argument("--model", default=os.path.join(REPO, ".models/all-MiniLM-L6-v2"))
    ap.add_argument("--sparse", default=os.path.join(REPO, ".models/splade-tiny"))
    ap.add_argument("--work", help="folder for the stores (kept; reused when there)")
    ap.add_argument("--corpora", default="demo", help="demo and/or pydoc")
    ap.add_argument("--weights", default="0.3,0.5,0.7,1,1.5,2", help="sparse weights swept (K 10, keyword 0.7)")
    ap.add_argument("--out", default=os.path.join(HERE, "results/search_quality.md"))
    a = ap.parse_args()
    command = "python3 bench/search_quality_sparse.py " + " ".join(
        os.path.relpath(x, REPO) if os.path.isabs(x) and x.startswith(REPO) else x for x in sys.argv[1:])
    work = a.work or tempfile.mkdtemp(prefix="search-quality-sparse-")
    os.makedirs(work, exist_ok=True)
    chosen = [c.strip() for c in a.corpora.split(",") if c.strip()]
    evals = [json.loads(l) for l in open(os.path.join(HERE, "search_eval.jsonl")) if l.strip()]
    evals = [e for e in evals if e["corpus"] in chosen]
    corpora = {"demo": os.path.join(REPO, "demo/corpus"), "pydoc": os.path.join(work, "pydoc")}
    if "pydoc" in chosen and not os.path.isdir(corpora["pydoc"]):
        subprocess.run([sys.executable, os.path.join(HERE, "make_pydoc_corpus.py"), corpora["pydoc"]], check=True)
    stores = {c: os.path.join(work, f"{c}-sparse.db") for c in chosen}
    for name, db in stores.items():
        if os.path.exists(db):
            continue
        t0 = time.time()
        subprocess.run([a.bin, "index", "--quiet", "--model", a.model, "--sparse", a.sparse, "--db", db,
                        corpora[name]], check=True)
        print(f"search_quality_sparse: {name} indexed in {time.time() - t0:.1f} s", flush=True)
    weights = [float(w) for w in a.weights.split(",") if w.strip()]
    base_modes = ["vector", "keyword", "hybrid"]
    rows = {m: [] for m in base_modes + ["sparse"]}
    sweep = {w: [] for w in weights}
    for name, db in stores.items():
        plain = Server(a.bin, a.model, db, work)  # no sparse model: hybrid of meaning and words
        for e in evals:
            if e["corpus"] == name:
                for m in base_modes:
                    rows[m].append(dict(e, docs=documents(plain.search(e["query"], m))))
        plain.stop()
        srv = Server(a.bin, a.model, db, work, ("--sparse-model", a.sparse))
        for e in evals:
            if e["corpus"] != name:
                continue
            rows["sparse"].append(dict(e, docs=documents(srv.search(e["query"], "sparse"))))
            for w in weights:
                srv.conn.request("POST", "/search", json.dumps({"query": e["query"], "k": 50, "mode": "hybrid",
                                                                "sparse_weight": w}),
                                 {"Content-Type": "application/json"})
                r = srv.conn.getresponse()
                data = r.read()
                if r.status != 200:
                    raise RuntimeError(f"search {e['query']!r}: {r.status} {data[:300]!r}")
                sweep[w].append(dict(e, docs=documents(json.loads(data)["results"])))
        srv.stop()
    tables = [("all", lambda r: True)] + [(f"{c}, {k}", lambda r, c=c, k=k: r["corpus"] == c and r["kind"] == k)
                                          for c in stores for k in ("plain", "keyword")]
    keys = ("r1", "r3", "r10", "mrr")

    def worst(sel_rows):
        return min((metrics([r for r in sel_rows if s(r)])[k] - metrics([r for r in rows["hybrid"] if s(r)])[k],
                    f"{t} {k}") for t, s in tables[1:] for k in keys)

    # the best MRR among the weights no worse than hybrid without sparse anywhere; when none is, among
    # those whose worst loss is the smallest
    floor = max(min(worst(sweep[w])[0], 0.0) for w in weights)
    best = None
    for w in weights:
        x = metrics(sweep[w])
        if min(worst(sweep[w])[0], 0.0) >= floor and (best is None or x["mrr"] > metrics(sweep[best])["mrr"]):
            best = w
    model = os.path.basename(os.path.normpath(a.sparse))
    lines = ["", f"## Learned sparse vectors ({model}): sparse alone and hybrid with sparse", "",
             f"Written by `bench/search_quality_sparse.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
             f"the {len(evals)} queries of `bench/search_eval.jsonl` over {', '.join(chosen)}, one store indexed with "
             f"`index --model {os.path.basename(a.model)} --sparse {model}`; meaning, words and hybrid from a server "
             f"without the sparse model (so hybrid fuses meaning and words only, the rows above), sparse and hybrid "
             f"with sparse from one started with `--sparse-model` (the fusion's K 10, keyword weight 0.7, the sparse "
             f"ranking's weight below, 50 candidates each). Command: `{command}`.", ""]
    for title, sel in tables:
        lines += [f"### {title}", "", "| mode | recall@1 | recall@3 | recall@10 | MRR | queries |",
                  "|---|---:|---:|---:|---:|---:|"]
        for m in base_modes + ["sparse"]:
            x = metrics([r for r in rows[m] if sel(r)])
            lines.append(f"| {m} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} | {x['mrr']:.3f} | {x['n']} |")
        for w in weights:
            x = metrics([r for r in sweep[w] if sel(r)])
            mark = " (default)" if w == best else ""
            lines.append(f"| hybrid + sparse, weight {w:g}{mark} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} | "
                         f"{x['mrr']:.3f} | {x['n']} |")
        lines.append("")
    lines += ["| sparse weight | MRR (all) | worst of the tables x 4 metrics, hybrid+sparse minus hybrid |",
              "|---:|---:|---:|"]
    for w in weights:
        wv = worst(sweep[w])
        lines.append(f"| {w:g} | {metrics(sweep[w])['mrr']:.3f} | {wv[0]:+.3f} ({wv[1]}) |")
    lines += ["", (f"The default (MODATTN_SEARCH_SPARSE_WEIGHT) is {best:g}: the best MRR among the weights no worse "
                   "than hybrid without sparse on any metric of any table." if floor >= 0 else
                   f"No weight is no worse than hybrid without sparse on every metric of every table (the least loss "
                   f"is {floor:+.3f}); the default (MODATTN_SEARCH_SPARSE_WEIGHT) is {best:g}, the best MRR among the "
                   "weights with that least loss."), ""]
    text = "\n".join(lines)
    print(text)
    with open(a.out, "a") as f:
        f.write(text)
    json.dump({"rows": rows, "sweep": {str(w): v for w, v in sweep.items()}, "best": best},
              open(os.path.join(work, "sparse.json"), "w"))


if __name__ == "__main__":
    main()
