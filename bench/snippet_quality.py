"""bench/snippet_quality.py — are snippets the passage that answers? Before (a binary without the
meaning weight, e.g. main's build before issue 40's snippet work: --before) against after (--bin),
on the same store of demo/corpus and the demo queries of bench/search_eval.jsonl, hybrid, k = 10.

For every shown result whose chunk is longer than one window (240 bytes; shorter ones are shown
whole either way), two measures:
  answer   the snippet holds (at least half of) the chunk's answering sentence: the sentence nearest
           the query by an independent judge, all-mpnet-base-v2 through sentence-transformers (not
           the MiniLM model that chooses the window);
  words    the share of the chunk's distinct marked words (the query's words that carry information,
           "highlights") that the snippet shows.
Reported over all such results, over those found by meaning alone, and over each query's first
result from its expected document.

Latency: each query's hybrid search through `modattn serve`'s POST /search, before's server and
after's taken in turns (--reps times each, the median of each), on one worker; the added latency
per search is the median over queries of (after - before). The load average is reported.

  /work/main/bench/.venv/bin/python bench/snippet_quality.py --bin build/modattn \
      --before /work/main/build/modattn --model .models/all-MiniLM-L6-v2 --judge .models/all-mpnet-base-v2
Writes bench/results/snippet_quality.md (and .json).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from search_quality import Server  # noqa: E402

WINDOW = 240


def sentences(text):
    """(start, end) byte ranges of the sentences of text (split after . ! ? ; : and at blank lines)."""
    b = text.encode()
    out, start = [], 0
    for m in re.finditer(rb"(?<=[.!?;:])\s+|\n\s*\n", b):
        if m.start() > start:
            out.append((start, m.start()))
        start = m.end()
    if start < len(b):
        out.append((start, len(b)))
    return [(a, e) for a, e in out if e - a >= 20] or [(0, len(b))]


def search_json(binary, model, db, queries, k):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(queries) + "\n")
        qf = f.name
    try:
        out = subprocess.run([binary, "search", "--json", "--model", model, "--db", db, "-k", str(k), "--queries", qf],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.remove(qf)
    return [json.loads(line)["results"] for line in out.splitlines() if line.strip()]


def latency(a, db, work, queries):
    """each query's hybrid POST /search through before's and after's servers, in turns"""
    # latency: the two servers in turns, one query at a time
    load0 = os.getloadavg()
    # one server at a time holds the CPUs; the order alternates per rep
    ta = {q: [] for q in queries}
    tb = {q: [] for q in queries}
    for rep in range(a.reps):
        for binary, times in ((a.before, tb), (a.bin, ta)) if rep % 2 == 0 else ((a.bin, ta), (a.before, tb)):
            s = Server(binary, a.model, db, work, ("--workers", "1"))
            s.search(queries[0], "hybrid", k=10)  # warm
            for q in queries:
                t0 = time.perf_counter()
                s.search(q, "hybrid", k=10)
                times[q].append(time.perf_counter() - t0)
            s.stop()
    load1 = os.getloadavg()
    ma = [statistics.median(ta[q]) * 1e3 for q in queries]
    mb = [statistics.median(tb[q]) * 1e3 for q in queries]
    diff = [x - y for x, y in zip(ma, mb)]
    lat = {"after_ms": statistics.median(ma), "before_ms": statistics.median(mb), "added_ms": statistics.median(diff),
           "added_p90_ms": sorted(diff)[int(0.9 * (len(diff) - 1))], "reps": a.reps, "queries": len(queries),
           "load": [round(load0[0], 1), round(load1[0], 1)]}

    return lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "modattn"))
    ap.add_argument("--before", required=True)
    ap.add_argument("--model", default=os.path.join(REPO, ".models", "all-MiniLM-L6-v2"))
    ap.add_argument("--judge", default=os.path.join(REPO, ".models", "all-mpnet-base-v2"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--top", type=int, default=10, help="results measured per query (of the 10 shown)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "snippet_quality.md"))
    ap.add_argument("--latency-only", action="store_true",
                    help="only the latency pairs (no judge, nothing written): prints one JSON line")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="snippet-quality-")
    db = os.path.join(work, "demo.db")
    if not os.path.exists(db):
        subprocess.run([a.bin, "index", "--quiet", "--model", a.model, "--db", db, os.path.join(REPO, "demo", "corpus")],
                       check=True)
    evals = [json.loads(l) for l in open(os.path.join(HERE, "search_eval.jsonl")) if l.strip()]
    evals = [e for e in evals if e["corpus"] == "demo"]
    queries = [e["query"] for e in evals]
    if a.latency_only:
        print(json.dumps(latency(a, db, work, queries)))
        return
    after = search_json(a.bin, a.model, db, queries, 10)
    before = search_json(a.before, a.model, db, queries, 10)
    assert len(after) == len(before) == len(queries)

    import torch
    torch.set_num_threads(2)
    from sentence_transformers import SentenceTransformer  # the judge (tooling only)
    judge = SentenceTransformer(a.judge, device="cpu")
    qv = judge.encode(queries, normalize_embeddings=True)
    # every measured chunk's sentences embedded once, in one call
    chunks = {}
    for runs in (after, before):
        for res in runs:
            for r in res[:a.top]:
                if len(r["text"].encode()) > WINDOW:
                    chunks[r["chunk_id"]] = r["text"]
    ids = sorted(chunks)
    spans = {c: sentences(chunks[c]) for c in ids}
    flat = [chunks[c].encode()[s:e].decode("utf-8", "replace") for c in ids for s, e in spans[c]]
    t0 = time.time()
    fv = judge.encode(flat, normalize_embeddings=True, batch_size=64)
    print(f"judge: {len(flat)} sentences of {len(ids)} chunks in {time.time() - t0:.0f} s", file=sys.stderr)
    sv, at = {}, 0
    for c in ids:
        sv[c] = fv[at:at + len(spans[c])]
        at += len(spans[c])

    def answer(qi, r):
        c = r["chunk_id"]
        best = max(range(len(spans[c])), key=lambda i: (float(sv[c][i] @ qv[qi]), -i))
        return spans[c][best]

    def measure(runs):
        rows = {"all": [], "meaning": [], "expected": []}
        for qi, (e, res) in enumerate(zip(evals, runs)):
            seen_expected = False
            for r in res[:a.top]:
                b = r["text"].encode()
                if len(b) <= WINDOW:
                    continue
                s0, s1 = r["snippet"]
                a0, a1 = answer(qi, r)
                holds = max(0, min(s1, a1) - max(s0, a0)) >= (a1 - a0) / 2
                marked = {b[x:y].lower() for x, y in r["highlights"]}
                shown = {b[x:y].lower() for x, y in r["highlights"] if x >= s0 and y <= s1}
                row = (holds, len(shown) / len(marked) if marked else None)
                rows["all"].append(row)
                if r["found_by"] == "meaning":
                    rows["meaning"].append(row)
                if not seen_expected and os.path.basename(r["path"]) in e["expect"]:
                    rows["expected"].append(row)
                    seen_expected = True
        out = {}
        for k, v in rows.items():
            w = [x[1] for x in v if x[1] is not None]
            out[k] = {"n": len(v), "answer": sum(x[0] for x in v) / len(v) if v else 0,
                      "words": sum(w) / len(w) if w else None, "n_words": len(w)}
        return out

    qa, qb = measure(after), measure(before)

    lat = latency(a, db, work, queries)

    res = {"after": qa, "before": qb, "latency": lat, "queries": len(queries),
           "command": "bench/snippet_quality.py --bin build/modattn --before /work/main/build/modattn"}
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump(res, f, indent=1)

    def pc(x):
        return "–" if x is None else f"{100 * x:.0f}%"

    lines = [
        "# Snippets: the passage that answers (bench/snippet_quality.py)",
        "",
        "Demo corpus, the %d demo queries of bench/search_eval.jsonl, hybrid search, k = 10; of each query's first "
        "%d results, those whose chunk is longer than one 240-byte window. **answer**: the snippet holds the chunk's sentence nearest the query "
        "by a judge model embedding each sentence (%s through sentence-transformers; when it is the model that "
        "chooses the window, the judge is not independent: it embeds sentences, the chooser 240-byte windows); **words**: the share of the chunk's "
        "distinct marked words the snippet shows. Before: the window with the most distinct marked words, a "
        "meaning-only hit's chunk start (main's build before this change); after: the same words first, then the "
        "window nearest the query by meaning (pipeline/snippet.c)." % (len(queries), a.top, os.path.basename(a.judge.rstrip("/"))),
        "",
        "| results | n | answer before | answer after | words before | words after |",
        "|---|---|---|---|---|---|",
    ]
    names = {"all": "every shown result", "meaning": "found by meaning alone", "expected": "first from the expected document"}
    for k in ("all", "meaning", "expected"):
        lines.append(f"| {names[k]} | {qa[k]['n']} | {pc(qb[k]['answer'])} | {pc(qa[k]['answer'])} | "
                     f"{pc(qb[k]['words'])} | {pc(qa[k]['words'])} |")
    lines += [
        "",
        f"Latency per search (POST /search, hybrid, k = 10, one worker; each query's median of {a.reps}, the two "
        f"servers in turns; load average {lat['load'][0]} at the start, {lat['load'][1]} at the end, 2 CPUs "
        f"shared): before {lat['before_ms']:.1f} ms, after {lat['after_ms']:.1f} ms (medians over queries); "
        f"added: median {lat['added_ms']:.1f} ms, p90 {lat['added_p90_ms']:.1f} ms per search.",
        "",
        "Command: `/work/main/bench/.venv/bin/python bench/snippet_quality.py --bin build/modattn --before "
        f"BEFORE/modattn --model .models/all-MiniLM-L6-v2 --judge {a.judge} --top {a.top} --reps {a.reps}`",
        "",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
