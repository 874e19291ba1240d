#!/usr/bin/env python3
"""Reranking latency (issue 39): one query against 50 passages of 200 word pieces with a MiniLM-L6-sized
cross-encoder, modattn.CrossEncoder.predict against sentence-transformers' CrossEncoder.predict, in one
process, interleaved, on the same threads.

    bench/.venv/bin/python bench/rerank_bench.py [--reps 15] [--threads 2]

The model: a BertForSequenceClassification of all-MiniLM-L6-v2's sizes (6 layers, hidden 384, 12 heads,
intermediate 1536, all-MiniLM-L6-v2's tokenizer, 1 label) with random weights (torch.manual_seed(0)),
written once under .models/.cache/minilm-l6-cross-encoder by transformers. No package ships a trained
cross-encoder; the speed does not depend on the weights (a trained ms-marco-MiniLM-L6-v2 has these
shapes). The passages: lines of bench/corpus_sentences.txt joined until 200 word pieces, cut there (so
each pair, [CLS] query [SEP] passage [SEP], is about 210 tokens; none is truncated at 512).

Each repetition scores the 50 pairs once with each system (order alternating), after 2 warm-up calls
each; p50 and p90 of the wall time are reported, and pairs/s = 50 / p50. sentence-transformers runs
with its default batch_size (32), modattn with its default token budget (8192 padded tokens a batch).
The scores are compared (max relative difference). Writes bench/results/rerank.md (keeping the sparse
encoding section bench/sparse_bench.py writes there, and the notes from a line starting
`<!-- rerank notes:` up to that section) and rerank.json.

The ceiling, in the same run: build/bench/peak_flops (fp32 FMA, --threads threads) before the first
and after the last repetition, by the wall clock and by CPU-second. Each call's arithmetic is counted
from the pairs' token counts as bench/embed_bench.py counts it: per token and layer 2 (4 H^2 + 2 H I)
for the four dense products, per pair and layer 4 len^2 H for attention (padding, softmax, LayerNorm,
GELU not counted). % of peak = (FLOPs / p50 wall) / (peak_flops' wall-clock rate); by CPU time =
(FLOPs / (median process CPU seconds of a call / threads)) / (peak_flops' rate per CPU-second,
which is its FLOPs over its CPU seconds per thread), the figure that
other processes' load on a shared machine does not lower.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / ".models" / ".cache" / "minilm-l6-cross-encoder"
MINILM = REPO / ".models" / "all-MiniLM-L6-v2"


def make_model():
    if (MODEL / "model.safetensors").is_file():
        return
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                     intermediate_size=1536, max_position_embeddings=512, num_labels=1,
                     architectures=["BertForSequenceClassification"])
    m = BertForSequenceClassification(cfg).eval()
    MODEL.mkdir(parents=True, exist_ok=True)
    m.save_pretrained(MODEL, safe_serialization=True)
    for f in ("tokenizer.json", "vocab.txt", "special_tokens_map.json", "tokenizer_config.json"):
        shutil.copyfile(MINILM / f, MODEL / f)


def passages(tok, n=50, length=200):
    lines = [ln.strip() for ln in open(REPO / "bench" / "corpus_sentences.txt", encoding="utf-8") if ln.strip()]
    out, i = [], 0
    while len(out) < n:
        ids = []
        while len(ids) < length:
            ids += tok(lines[i % len(lines)], add_special_tokens=False)["input_ids"]
            i += 1
        out.append(tok.decode(ids[:length]))
    return out


PEAK_PROBE = REPO / "build" / "bench" / "peak_flops"


def peak(threads: int) -> dict | None:
    """bench/peak_flops' fp32 FMA rate on `threads` threads: wall clock and per CPU-second (None if
    it is not built)."""
    if not PEAK_PROBE.exists():
        return None
    out = subprocess.run([str(PEAK_PROBE), "0.3", str(threads)], capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return None
    p = json.loads(lines[-1])
    if threads <= 1:
        return {"wall": p["gflops_1thread"], "cpu": p["gflops_1thread_cpu"], "isa": p["isa"], "at": time.strftime("%H:%M:%S")}
    return {"wall": p["gflops_all"], "cpu": p["gflops_all_cpu"], "isa": p["isa"], "at": time.strftime("%H:%M:%S")}


def model_flops(ntok: list[int]) -> dict:
    """The arithmetic of one call (bench/embed_bench.py's count), from the model's config.json."""
    cfg = json.loads((MODEL / "config.json").read_text())
    H, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    dense = 2.0 * L * (4 * H * H + 2 * H * I) * sum(ntok)
    attn = 4.0 * L * H * sum(c * c for c in ntok)
    return {"dense": dense, "attention": attn, "total": dense + attn}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(args.threads)
    sys.path.insert(0, str(REPO / "build" / "python"))
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    import modattn
    from sentence_transformers import CrossEncoder
    from transformers import AutoTokenizer

    make_model()
    tok = AutoTokenizer.from_pretrained(str(MODEL))
    docs = passages(tok)
    query = "how does the store survive a crash"
    pairs = [(query, d) for d in docs]
    ntok = [len(tok(query, d)["input_ids"]) for d in docs]
    st = CrossEncoder(str(MODEL), device="cpu")
    ma = modattn.CrossEncoder(str(MODEL), threads=args.threads)
    s_st = np.asarray(st.predict(pairs), dtype=np.float64)
    s_ma = np.asarray(ma.predict(pairs), dtype=np.float64)
    rel = float(np.max(np.abs(s_ma - s_st) / np.maximum(np.abs(s_st), 1e-12)))
    systems = {"sentence-transformers CrossEncoder": lambda: st.predict(pairs),
               "modattn.CrossEncoder": lambda: ma.predict(pairs)}
    times = {k: [] for k in systems}
    cpus = {k: [] for k in systems}
    for k, f in systems.items():
        for _ in range(2):
            f()
    names = list(systems)
    load0 = os.getloadavg()
    peak0 = peak(args.threads)
    for r in range(args.reps):
        for k in (names if r % 2 == 0 else names[::-1]):
            c0, t0 = time.process_time(), time.perf_counter()
            systems[k]()
            times[k].append(time.perf_counter() - t0)
            cpus[k].append(time.process_time() - c0)
    peak1 = peak(args.threads)
    load1 = os.getloadavg()
    fl = model_flops(ntok)
    res = {}
    for k, v in times.items():
        v = sorted(v)
        p50 = statistics.median(v)
        cpu50 = statistics.median(cpus[k])
        res[k] = {"p50_ms": p50 * 1e3, "p90_ms": v[int(0.9 * (len(v) - 1))] * 1e3, "pairs_per_s": 50 / p50,
                  "cpu_ms": cpu50 * 1e3, "gflops": fl["total"] / p50 * 1e-9, "gflops_cpu": fl["total"] / (cpu50 / args.threads) * 1e-9,
                  "runs_ms": [x * 1e3 for x in times[k]], "runs_cpu_ms": [x * 1e3 for x in cpus[k]]}
    pk = [p for p in (peak0, peak1) if p]
    pwall = max(p["wall"] for p in pk) if pk else None
    pcpu = max(p["cpu"] for p in pk) if pk else None
    ref = res["sentence-transformers CrossEncoder"]["pairs_per_s"]
    ref_cpu = res["sentence-transformers CrossEncoder"]["cpu_ms"]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), platform.processor())
    import sentence_transformers
    import transformers

    lines = ["# Reranking: 50 passages of 200 word pieces, MiniLM-L6-sized cross-encoder, CPU", "",
             "Made by `bench/rerank_bench.py` (its docstring has the method): one query against 50 passages, each pair "
             f"{min(ntok)}-{max(ntok)} tokens; {args.reps} repetitions per system, interleaved in one process, after 2 warm-up "
             f"calls each; {args.threads} threads for both. Random weights of ms-marco-MiniLM-L6-v2's shapes (speed does not "
             f"depend on them). Scores: max relative difference {rel:.2e} between the two.", "",
             "| system | p50 ms | p90 ms | pairs/s (50 / p50) | vs sentence-transformers | CPU ms (median) | "
             "vs sentence-transformers by CPU time | GFLOP/s (wall) | % of peak (wall) | % of peak (CPU time) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k, v in res.items():
        pw = f"{100 * v['gflops'] / pwall:.0f}%" if pwall else "n/a"
        pc = f"{100 * v['gflops_cpu'] / pcpu:.0f}%" if pcpu else "n/a"
        lines.append(f"| {k} | {v['p50_ms']:.1f} | {v['p90_ms']:.1f} | {v['pairs_per_s']:.0f} | {v['pairs_per_s'] / ref:.2f}x "
                     f"| {v['cpu_ms']:.0f} | {ref_cpu / v['cpu_ms']:.2f}x | {v['gflops']:.0f} | {pw} | {pc} |")
    peak_line = ("- The ceiling, measured in this run (`build/bench/peak_flops 0.3 "
                 f"{args.threads}`, fp32 FMA, {pk[0]['isa']}): "
                 + "; ".join(f"{p['wall']:.0f} GFLOP/s wall clock, {p['cpu']:.0f} per CPU-second at {p['at']} UTC" for p in pk)
                 + f" (the higher of each used). One call: {fl['total'] * 1e-9:.1f} GFLOP ({fl['dense'] * 1e-9:.1f} "
                 f"in the dense products, {fl['attention'] * 1e-9:.1f} = {100 * fl['attention'] / fl['total']:.1f}% in "
                 "attention; padding, softmax, LayerNorm, GELU not counted)") if pk else \
        "- The ceiling: build/bench/peak_flops is not built, so no % of peak"
    lines += ["", f"- CPU: {cpu} ({os.cpu_count()} logical CPUs, shared machine; load average "
              f"{', '.join(f'{x:.2f}' for x in load0)} before the timed repetitions, "
              f"{', '.join(f'{x:.2f}' for x in load1)} after)", peak_line,
              f"- Versions: sentence-transformers {sentence_transformers.__version__}, transformers {transformers.__version__}, "
              f"torch {torch.__version__}, numpy {np.__version__}; modattn {modattn.__version__} (build/python)",
              f"- Repository commit: {commit}; measured {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", ""]
    out = REPO / "bench" / "results"
    mark = "<!-- sparse_bench.py:"  # bench/sparse_bench.py's section, kept
    notes = "<!-- rerank notes:"  # hand-written notes between the two (profiles, before/after), kept
    prev = (out / "rerank.md").read_text(encoding="utf-8") if (out / "rerank.md").exists() else ""
    tail = prev[prev.index(mark):] if mark in prev else ""
    if notes in prev:
        tail = prev[prev.index(notes):prev.index(mark) if mark in prev else len(prev)].rstrip("\n") + "\n\n" + tail
    (out / "rerank.md").write_text("\n".join(lines) + ("\n" + tail if tail else ""), encoding="utf-8")
    (out / "rerank.json").write_text(json.dumps({"results": res, "max_rel_diff": rel, "tokens": ntok, "flops": fl,
                                                          "peak": pk, "load": [load0, load1]}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
