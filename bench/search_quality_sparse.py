"""bench/search_quality_sparse.py — search quality with learned sparse vectors (SPLADE, `index --sparse`):
sparse alone, and hybrid fusion of meaning + words + sparse by sparse weight, beside meaning, words and
hybrid without sparse, on the same store and queries (bench/search_eval.jsonl), through `modattn serve`'s
POST /search (k = 50 chunks folded into documents; the metrics of bench/search_quality.py).

The store is indexed once with `--sparse DIR`; one server runs with `--sparse-model DIR` (its hybrid fuses
the sparse ranking) and one without (hybrid of meaning and words only: the baseline, the same chunks).
The sweep picks the default sparse weight (MODATTN_SEARCH_SPARSE_WEIGHT): the best MRR among weights no
worse than hybrid without sparse on any metric of any table (corpus x kind of query), or, when none is,
among those with the smallest worst loss; and it compares every weight with the code's default
(read from include/modattn/search.h): a weight should replace it only when it is no worse than it on
every metric of every table (corpus x kind of query) and better in MRR over all queries. Writes its section of --out (a section of
bench/results/search_quality.md: replaced when there, else appended) and its rows to
bench/results/search_quality_sparse.json (beside --out).

  python3 bench/search_quality_sparse.py --sparse .models/splade-tiny [--corpora demo,pydoc] [--work DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from search_quality import Server, documents, metrics, store_stats  # noqa: E402


def code_default():
    """MODATTN_SEARCH_SPARSE_WEIGHT as include/modattn/search.h defines it."""
    with open(os.path.join(REPO, "include/modattn/search.h")) as f:
        return float(re.search(r"#define MODATTN_SEARCH_SPARSE_WEIGHT ([0-9.]+)", f.read()).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build/modattn"))
    ap.add_argument("--model", default=os.path.join(REPO, ".models/all-MiniLM-L6-v2"))
    ap.add_argument("--sparse", default=os.path.join(REPO, ".models/splade-tiny"))
    ap.add_argument("--work", help="folder for the stores (kept; reused when there)")
    ap.add_argument("--corpora", default="demo", help="demo and/or pydoc")
    ap.add_argument("--weights", default="0.2,0.3,0.4,0.5,0.6,0.7,0.8,1,1.5,2",
                    help="sparse weights swept (K 10, keyword 0.7)")
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
    default = code_default()
    for name, db in stores.items():
        if os.path.exists(db):  # reused: its documents' write times still say how long indexing took
            continue
        t0 = time.time()
        subprocess.run([a.bin, "index", "--quiet", "--model", a.model, "--sparse", a.sparse, "--db", db,
                        corpora[name]], check=True)
        print(f"search_quality_sparse: {name} indexed in {time.time() - t0:.1f} s", flush=True)
    weights = [float(w) for w in a.weights.split(",") if w.strip()]
    if default not in weights:
        weights = sorted(weights + [default])
    load0 = os.getloadavg()
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
    load1 = os.getloadavg()
    fine = [(f"{c}, {k}", lambda r, c=c, k=k: r["corpus"] == c and r["kind"] == k)
            for c in stores for k in ("plain", "keyword")]  # the slices every rule below looks at
    tables = [("all", lambda r: True)]
    if len(stores) > 1:
        tables += [(c, lambda r, c=c: r["corpus"] == c) for c in stores]
        tables += [(f"both corpora, {k}", lambda r, k=k: r["kind"] == k) for k in ("plain", "keyword")]
    tables += fine
    keys = ("r1", "r3", "r10", "mrr")

    def worst(sel_rows, ref):
        """The worst difference sel_rows minus ref over every metric of every corpus x kind table."""
        return min((metrics([r for r in sel_rows if s(r)])[k] - metrics([r for r in ref if s(r)])[k],
                    f"{t} {k}") for t, s in fine for k in keys)

    def mrr_of(sel_rows, c):
        return metrics([r for r in sel_rows if r["corpus"] == c])["mrr"]

    # the best MRR among the weights no worse than hybrid without sparse anywhere; when none is, among
    # those whose worst loss is the smallest
    floor = max(min(worst(sweep[w], rows["hybrid"])[0], 0.0) for w in weights)
    best = None
    for w in weights:
        x = metrics(sweep[w])
        if min(worst(sweep[w], rows["hybrid"])[0], 0.0) >= floor and (best is None or x["mrr"] > metrics(sweep[best])["mrr"]):
            best = w
    # a weight that should replace the code's default: no worse than it on every metric of every table,
    # and a better MRR over all queries
    better = [w for w in weights if w != default and worst(sweep[w], sweep[default])[0] >= 0
              and metrics(sweep[w])["mrr"] > metrics(sweep[default])["mrr"]]
    model = os.path.basename(os.path.normpath(a.sparse))
    st = {c: store_stats(db) or {} for c, db in stores.items()}
    lines = ["", f"## Learned sparse vectors ({model}): sparse alone and hybrid with sparse", "",
             f"Written by `bench/search_quality_sparse.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
             f"the {len(evals)} queries of `bench/search_eval.jsonl` over {' and '.join(chosen)}, a store per corpus "
             f"indexed with `index --model {os.path.basename(a.model)} --sparse {model}` ("
             + "; ".join(f"{c}: {x.get('chunks', 0):,} chunks, its documents written over {x.get('span_s') or 0:,} s"
                         for c, x in st.items())
             + f"); meaning, words and hybrid from a server "
             f"without the sparse model (so hybrid fuses meaning and words only), sparse and hybrid "
             f"with sparse from one started with `--sparse-model` (the fusion's K 10, keyword weight 0.7, the sparse "
             f"ranking's weight below, 50 candidates each). Load average {load0[0]:.1f} when the searches started, "
             f"{load1[0]:.1f} when they ended (quality does not depend on it). Command: `{command}`.", ""]
    for title, sel in tables:
        lines += [f"### {title}", "", "| mode | recall@1 | recall@3 | recall@10 | MRR | queries |",
                  "|---|---:|---:|---:|---:|---:|"]
        for m in base_modes + ["sparse"]:
            x = metrics([r for r in rows[m] if sel(r)])
            lines.append(f"| {m} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} | {x['mrr']:.3f} | {x['n']} |")
        for w in weights:
            x = metrics([r for r in sweep[w] if sel(r)])
            mark = " (default)" if w == default else ""
            lines.append(f"| hybrid + sparse, weight {w:g}{mark} | {x['r1']:.3f} | {x['r3']:.3f} | {x['r10']:.3f} | "
                         f"{x['mrr']:.3f} | {x['n']} |")
        lines.append("")
    lines += ["### The sweep", "",
              "| sparse weight | MRR (all) | " + " | ".join(f"MRR ({c})" for c in stores) +
              " | worst of the tables x 4 metrics, minus hybrid without sparse | worst, minus the default "
              f"({default:g}) |", "|---:|---:|" + "---:|" * len(stores) + "---:|---:|"]
    for w in weights:
        wv, wd = worst(sweep[w], rows["hybrid"]), worst(sweep[w], sweep[default])
        mark = " (default)" if w == default else ""
        lines.append(f"| {w:g}{mark} | {metrics(sweep[w])['mrr']:.3f} | "
                     + " | ".join(f"{mrr_of(sweep[w], c):.3f}" for c in stores)
                     + f" | {wv[0]:+.3f} ({wv[1]}) | " + ("—" if w == default else f"{wd[0]:+.3f} ({wd[1]})") + " |")
    tabs = " x ".join(["corpus", "kind of query"]) if len(stores) > 1 else "kind of query"
    lines += ["", (f"By hybrid without sparse: {best:g} has the best MRR among the weights no worse than it on any "
                   f"metric of any table ({tabs})." if floor >= 0 else
                   f"By hybrid without sparse: no weight is no worse than it on every metric of every table ({tabs}; "
                   f"the least loss is {floor:+.3f}); {best:g} has the best MRR among the weights with that least "
                   "loss."),
              "",
              (f"Against the default ({default:g}, MODATTN_SEARCH_SPARSE_WEIGHT): "
               + (f"{', '.join(f'{w:g}' for w in better)} "
                  f"{'is' if len(better) == 1 else 'are'} no worse than it on every metric of every table and better in "
                  "MRR over all queries: the evidence is for changing the default." if better else
                  "no other weight is no worse than it on every metric of every table with a better MRR over all "
                  "queries: it stays.")), ""]
    text = "\n".join(lines)
    print(text)
    # this section replaces the one an earlier run wrote (up to the next "## " section), else it is appended
    old = open(a.out).read() if os.path.exists(a.out) else ""
    k = old.find("\n## Learned sparse vectors (")
    e = old.find("\n## ", k + 1) if k >= 0 else -1
    before, after = (old[:k], old[e:] if e >= 0 else "") if k >= 0 else (old, "")
    with open(a.out, "w") as f:
        f.write(before.rstrip("\n") + "\n" + text.rstrip("\n") + "\n" + after)
    out_json = {"rows": rows, "sweep": {str(w): v for w, v in sweep.items()}, "best": best, "default": default,
                "better_than_default": better,
                "meta": {"model": os.path.basename(a.model), "sparse": model, "corpora": chosen, "stores": st,
                         "written": time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), "command": command,
                         "load": [load0[0], load1[0]]}}
    json.dump(out_json, open(os.path.join(os.path.dirname(a.out), "search_quality_sparse.json"), "w"),
              separators=(",", ":"))


if __name__ == "__main__":
    main()
