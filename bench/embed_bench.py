#!/usr/bin/env python3
"""Embedding throughput benchmark (issues 3, 15): sentence-transformers vs ONNX Runtime vs modattn,
in each precision people use (fp32, bf16, int8), with a latency table for small calls.

    bench/.venv/bin/python bench/embed_bench.py                 # every system, 3 runs each
    bench/.venv/bin/python bench/embed_bench.py --systems modattn,modattn-bf16   # refresh some rows
    bench/.venv/bin/python bench/embed_bench.py --no-latency    # skip the latency table
    bench/.venv/bin/python bench/embed_bench.py --make-corpus   # (re)write bench/corpus_sentences.txt
    bench/.venv/bin/python bench/embed_bench.py --model .models/all-mpnet-base-v2 --lines 500 --no-latency
                                                                # another model: embed_<name>.md/.json/.png
    bench/.venv/bin/python bench/embed_bench.py --model bench/work/qwen3-0.6b-shaped --lines 32 \
        --token-range 112:144 --no-latency --systems onnx,modattn   # 32 texts of 112-144 word pieces

Systems, all on CPU with 2 threads, model all-MiniLM-L6-v2 from .models/ (tools/setup_model.sh), or the
sentence-transformers folder --model names (its results go to embed_<folder name>.*; its
max_seq_length from sentence_bert_config.json; --lines N times the corpus' first N lines only, for
models too slow for all of it on a shared machine):
  st            sentence-transformers (PyTorch), encode(batch_size=32) - its own length-sorted batching
  onnx          ONNX Runtime: the same transformers model (AutoModel: BertModel, MPNetModel, ...;
                token_type_ids an input only where its forward takes them) exported with torch.onnx.export (cached under
                .models/.cache/onnx/), tokenizers (Rust) for the ids, length-sorted batches of 32,
                the folder's pooling (1_Pooling/config.json: mean, or last-token for Qwen3-Embedding
                and other decoders, or CLS) + L2 normalisation in numpy
  onnx-int8     the same, on the model quantised by onnxruntime.quantization.quantize_dynamic
                (weight_type=QInt8, its defaults: what its documentation tells users to run)
  modattn       the C CLI: build/modattn embed --model DIR - < corpus (one JSON line per input:
                {"index": i, "tokens": n, "embedding": [...]}); "not built" when the binary is missing
  modattn-bf16  the same with --precision bf16 (or why not, where the CPU lacks AVX512_BF16)
  modattn-int8  the same with --precision int8 (or why not, where the CPU lacks AVX512_VNNI)
ONNX Runtime has no bf16 mode on x86 CPUs, so that cell of the table says so.

Peaks: bench/peak_flops measures, in the same invocation, each instruction class a mode can use:
fp32 FMA, VDPBF16PS, VPDPBUSD, and AMX's TDPBF16PS / TDPBSSD where the CPU has them. Each row's
"% of peak" divides its useful arithmetic (the model's dense + attention FLOPs) by the peak of the
class its GEMMs ran on: for modattn the oneDNN kernel is read from ONEDNN_VERBOSE on a one-line run
and recorded; ONNX Runtime's int8 kernel is not visible, so its row uses the best int8 class the CPU
has (the same as modattn-int8's where both have AMX). The fp32 ceiling section also measures what
the encoder's GEMMs reach alone (build/bench/gemm_plan: the same oneDNN plans on the four layer
shapes, no post-ops, no attention, one copy per thread at once), the rate fp32 end to end is judged
against.

Latency (--latency, on by default): in one child process per system, p50/p99 of calls embedding one
search query of 8-16 word pieces (bench/search_eval.jsonl's, 400 calls), and 1, 8 and 32 corpus lines
(200, 100, 50 calls), each after 10 warm-up calls: modattn through its Python binding (build/python,
the C library in-process), ONNX Runtime through its session, both with the tokenizer.

Each system runs --runs times (default 3), each run in its own child process, so peak RSS (ru_maxrss
from wait4 on that child) belongs to that run alone. The medians are reported. Throughput counts
the corpus' word pieces as the model sees them (incl. its specials, truncated at its max_seq_length).
The Python workers time encoding only (model load excluded) and also report process wall time;
for modattn, whose process cannot report that split, the encode time is the process wall time minus
the median wall time of the same command on a one-line input (load + start-up).

modattn's and ONNX Runtime's embeddings are checked against sentence-transformers' (min cosine,
max abs difference) in the same invocation.

Writes bench/results/embed.md (table), bench/results/embed.png (bar plot) and
bench/results/embed.json (raw numbers, reused when only some systems are re-run); for another
--model, embed_<folder name>.md/.png/.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
CORPUS = BENCH / "corpus_sentences.txt"
RESULTS = BENCH / "results"
MODEL_DIR = REPO / ".models" / "all-MiniLM-L6-v2"
DEFAULT_MODEL = MODEL_DIR
STEM = "embed"          # results file names: embed.md, or embed_<model folder>.md for another --model
HIDDEN = [384]          # the model's hidden_size (config.json)
CORPUS_SHOWN = ["bench/corpus_sentences.txt"]


def set_model(path: Path | None, lines: int = 0) -> None:
    """Point the script at a sentence-transformers folder: its name, hidden size and max_seq_length."""
    global MODEL_DIR, STEM, MAX_SEQ
    if path is not None:
        MODEL_DIR = path.absolute()
    STEM = "embed" if MODEL_DIR == DEFAULT_MODEL and not lines else f"embed_{MODEL_DIR.name}"
    cfg = MODEL_DIR / "config.json"
    if cfg.exists():
        HIDDEN[0] = int(json.loads(cfg.read_text())["hidden_size"])
    sb = MODEL_DIR / "sentence_bert_config.json"
    if sb.exists() and MODEL_DIR != DEFAULT_MODEL:
        MAX_SEQ = int(json.loads(sb.read_text()).get("max_seq_length", MAX_SEQ))
CACHE = REPO / ".models" / ".cache" / "bench"
MODATTN_EXE = [REPO / "build" / "modattn"]  # --modattn overrides
MAX_SEQ = 256
BATCH = 32
SYSTEM_LABELS = {
    "st": "sentence-transformers (PyTorch)",
    "onnx": "ONNX Runtime",
    "onnx-int8": "ONNX Runtime, int8 (quantize_dynamic)",
    "modattn": "modattn (C)",
    "modattn-bf16": "modattn (C), bf16",
    "modattn-int8": "modattn (C), int8",
}
ORDER = ["st", "onnx", "onnx-int8", "modattn", "modattn-bf16", "modattn-int8"]
MODE = {"st": "fp32", "onnx": "fp32", "onnx-int8": "int8", "modattn": "fp32", "modattn-bf16": "bf16",
        "modattn-int8": "int8"}

# ============================================================================================
# Corpus: deterministic, written from word lists in this file (no outside text).
# ============================================================================================

_SUBJ = ["the engineer", "a small team", "the committee", "my neighbour", "the old library", "our server",
         "the river", "a young student", "the city council", "the orchestra", "the compiler",
         "the research group", "a travelling merchant", "the museum", "the weather service",
         "the startup", "her grandmother", "the night train", "the hospital", "every visitor",
         "the farmer", "the new model", "the database", "a stray cat", "the school board",
         "the pilot", "the bakery on the corner", "the mayor", "the satellite", "the captain"]
_VERB = ["announced", "rebuilt", "measured", "questioned", "painted", "delivered", "rejected",
         "described", "repaired", "studied", "ignored", "celebrated", "shipped", "translated",
         "documented", "tested", "borrowed", "discovered", "planned", "reviewed", "explained",
         "compressed", "recorded", "published", "cleaned", "replaced", "counted", "sorted"]
_OBJ = ["a detailed report", "the broken bridge", "three hundred letters", "the quarterly budget",
        "an unusual painting", "the new schedule", "a faster algorithm", "the harbour lights",
        "the missing files", "a long list of complaints", "the winter garden", "a set of old maps",
        "the results of the survey", "the kitchen", "a strange noise", "the final draft",
        "every single invoice", "the rules of the game", "a pile of wet leaves", "the test suite",
        "the evening news", "a fragile vase", "the memory leak", "the railway timetable"]
_PP = ["after the storm", "before lunch", "in the main hall", "during the festival",
       "without any warning", "under a grey sky", "for the third time this year", "with great care",
       "at the edge of town", "on a quiet Sunday", "despite the noise", "by the end of the week",
       "in less than an hour", "near the old harbour", "across the valley", "behind closed doors",
       "on the second floor", "since early March", "until midnight", "in front of everyone"]
_SUB = ["because the deadline was moving closer", "although nobody had asked for it",
        "while the rest of the city was asleep", "so that the children could see it",
        "even though the numbers did not add up", "when the lights finally came back on",
        "as soon as the rain stopped", "since the previous version kept crashing",
        "unless someone objected in writing", "after the first attempt had failed",
        "before the inspectors arrived", "which surprised almost everyone"]
_QUEST = ["Why did {s} wait so long?", "Has {s} {v} {o} yet?", "Who {v} {o} {p}?",
          "How many people noticed that {s} {v} {o}?", "Is it true that {s} {v} {o}?"]
_SHORT = ["Thanks!", "See you tomorrow.", "It works.", "Not again.", "Good morning, everyone.",
          "Please try again later.", "The meeting is cancelled.", "Coffee is ready.",
          "Everything is fine.", "Read the manual.", "Turn left at the lights.", "Well done.",
          "The door is open.", "Call me back.", "Nobody knows."]
_NAMES = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Giulia", "Hiro", "Ines", "Jonas",
          "Kofi", "Lena", "Mateo", "Noor", "Oskar", "Priya"]


def _clause(rng: random.Random) -> str:
    s, v, o = rng.choice(_SUBJ), rng.choice(_VERB), rng.choice(_OBJ)
    parts = [s, v, o]
    if rng.random() < 0.6:
        parts.append(rng.choice(_PP))
    if rng.random() < 0.35:
        parts.append(rng.choice(_SUB))
    return " ".join(parts)


def _sentence(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.08:
        return rng.choice(_SHORT)
    if r < 0.16:
        q = rng.choice(_QUEST)
        return q.format(s=rng.choice(_SUBJ), v=rng.choice(_VERB), o=rng.choice(_OBJ), p=rng.choice(_PP))
    if r < 0.24:
        n = rng.choice(_NAMES)
        return (f"{n} said that {_clause(rng)}, and that the figure was {rng.randint(2, 9999):,} "
                f"({rng.randint(1, 99)}% more than in {rng.randint(1990, 2024)}).")
    text = _clause(rng)
    while rng.random() < 0.3:
        text += rng.choice([", and ", "; ", ", but ", ", so "]) + _clause(rng)
    return text[0].upper() + text[1:] + "."


def make_corpus(n_lines: int = 2000, seed: int = 3) -> list[str]:
    """Lines of mixed length: mostly single sentences, some short paragraphs, a few long ones
    (over 256 word pieces, so truncation is part of the workload)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.60:
            k = 1
        elif r < 0.88:
            k = rng.randint(2, 4)
        elif r < 0.975:
            k = rng.randint(5, 9)
        else:
            k = rng.randint(14, 22)
        lines.append(" ".join(_sentence(rng) for _ in range(k)))
    return lines


def load_corpus() -> list[str]:
    if not CORPUS.exists():
        raise SystemExit(f"{CORPUS} missing: run with --make-corpus")
    return CORPUS.read_text(encoding="utf-8").splitlines()


# ============================================================================================
# Workers (run in child processes)
# ============================================================================================

def _sorted_batches(lengths: list[int], batch: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch] for i in range(0, len(order), batch)]


def pooling_mode() -> str:
    """The sentence-transformers folder's pooling (1_Pooling/config.json): "lasttoken" (Qwen3-Embedding,
    decoders), "cls", or "mean" (the default, and every model this bench ran before)."""
    cfg = MODEL_DIR / "1_Pooling" / "config.json"
    c = json.loads(cfg.read_text()) if cfg.exists() else {}
    if c.get("pooling_mode_lasttoken"):
        return "lasttoken"
    if c.get("pooling_mode_cls_token"):
        return "cls"
    return "mean"


def pool(h, mask, mode: str):
    """ONNX Runtime's last_hidden_state h [batch, seq, hidden] pooled as sentence-transformers does and
    L2-normalised. The batches here are right-padded (mask [batch, seq] of 1s then 0s), so a text's last
    token is at its length - 1."""
    import numpy as np
    if mode == "lasttoken":
        p = h[np.arange(h.shape[0]), mask.sum(1) - 1]
    elif mode == "cls":
        p = h[:, 0]
    else:
        m = mask[:, :, None].astype(np.float32)
        p = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)


def worker_st(corpus: list[str], threads: int, out: Path, _onnx_file: str = "") -> dict:
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    t0 = time.perf_counter()
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(str(MODEL_DIR), device="cpu")
    model.encode(["warm up"], batch_size=1)
    t1, c1 = time.perf_counter(), time.process_time()
    emb = model.encode(corpus, batch_size=BATCH, convert_to_numpy=True, show_progress_bar=False)
    t2, c2 = time.perf_counter(), time.process_time()
    np.save(out, emb.astype(np.float32))
    return {"load_s": t1 - t0, "encode_s": t2 - t1, "encode_cpu_s": c2 - c1}


def onnx_path() -> Path:
    import torch
    h = hashlib.sha256()
    h.update((MODEL_DIR / "model.safetensors").read_bytes())
    h.update(torch.__version__.encode())
    return REPO / ".models" / ".cache" / "onnx" / f"{MODEL_DIR.name}-{h.hexdigest()[:16]}.onnx"


def export_onnx() -> Path:
    """Export the model (last_hidden_state) to ONNX once; later runs reuse the file. token_type_ids
    is an input only where the model's forward takes it (BERT does, MPNet does not)."""
    path = onnx_path()
    if path.exists():
        return path
    import torch
    from transformers import AutoModel
    model = AutoModel.from_pretrained(str(MODEL_DIR))
    model.eval()
    ids = torch.ones(2, 16, dtype=torch.long)
    mask = torch.ones(2, 16, dtype=torch.long)
    tt = torch.zeros(2, 16, dtype=torch.long)
    import inspect
    use_tt = "token_type_ids" in inspect.signature(model.forward).parameters
    use_cache = "use_cache" in inspect.signature(model.forward).parameters

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kw = {"token_type_ids": token_type_ids} if use_tt else {}
            if use_cache:  # decoders (Qwen3): no key/value cache in the graph, only the hidden states
                kw["use_cache"] = False
            return self.m(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state

    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if use_tt else [])
    args_in = (ids, mask, tt) if use_tt else (ids, mask)

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    axes = {0: "batch", 1: "seq"}
    with torch.no_grad():
        try:  # TorchScript-based exporter: one self-contained file, dynamic axes by name
            torch.onnx.export(Wrap(model), args_in, str(tmp), dynamo=False,
                              input_names=names, output_names=["last_hidden_state"], opset_version=17,
                              dynamic_axes={**{n: axes for n in names}, "last_hidden_state": axes})
            exporter = "torchscript"
        except Exception as e:  # torch versions without it: the dynamo exporter
            print(f"embed_bench: torchscript ONNX export failed ({e}); trying dynamo=True", file=sys.stderr)
            b, s = torch.export.Dim("batch"), torch.export.Dim("seq", max=512)
            prog = torch.onnx.export(Wrap(model), args_in, dynamo=True, input_names=names,
                                     output_names=["last_hidden_state"],
                                     dynamic_shapes=tuple({0: b, 1: s} for _ in names))
            prog.save(str(tmp), external_data=False)
            exporter = "dynamo"
    os.replace(tmp, path)
    path.with_suffix(".txt").write_text(f"exporter={exporter} torch={torch.__version__}\n")
    return path


def quantize_onnx(fp32: Path) -> Path:
    """ONNX Runtime's dynamic int8 quantisation of the exported model, with its defaults (weights
    QInt8 per tensor, activations uint8 per tensor, scales computed per call); cached beside it."""
    q = fp32.with_name(fp32.stem + "-int8-dynamic.onnx")
    if not q.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic
        tmp = q.with_suffix(".tmp.onnx")
        quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8)
        os.replace(tmp, q)
    return q


def worker_onnx(corpus: list[str], threads: int, out: Path, onnx_file: str) -> dict:
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer
    t0 = time.perf_counter()
    path = Path(onnx_file)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_SEQ)
    tok.no_padding()
    tok.encode("warm up")
    t1, c1 = time.perf_counter(), time.process_time()
    encs = tok.encode_batch(corpus)
    lengths = [len(e.ids) for e in encs]
    emb = np.zeros((len(corpus), HIDDEN[0]), dtype=np.float32)
    feeds_tt = any(i.name == "token_type_ids" for i in sess.get_inputs())
    mode = pooling_mode()
    for idx in _sorted_batches(lengths, BATCH):
        L = max(lengths[i] for i in idx)
        ids = np.zeros((len(idx), L), dtype=np.int64)
        mask = np.zeros((len(idx), L), dtype=np.int64)
        for r, i in enumerate(idx):
            ids[r, :lengths[i]] = encs[i].ids
            mask[r, :lengths[i]] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if feeds_tt:
            feed["token_type_ids"] = np.zeros_like(ids)
        (h,) = sess.run(None, feed)
        emb[idx] = pool(h, mask, mode)
    t2, c2 = time.perf_counter(), time.process_time()
    np.save(out, emb)
    return {"load_s": t1 - t0, "encode_s": t2 - t1, "encode_cpu_s": c2 - c1}


LATENCY_CALLS = {1: 200, 8: 100, 32: 50}
QUERIES = Path(__file__).resolve().parent / "search_eval.jsonl"  # the search-quality queries
QUERY_TOKENS = (8, 16)
QUERY_CALLS = 400


def worker_latency(corpus: list[str], threads: int, system: str, onnx_file: str) -> dict:
    """p50/p99 of calls embedding n consecutive corpus lines (n = 1, 8, 32), in this process."""
    import numpy as np
    if system.startswith("modattn"):
        import modattn  # build/python on PYTHONPATH (the parent sets it)
        m = modattn.Model(str(MODEL_DIR), threads=threads, precision=MODE[system])

        def embed(texts):
            return m.encode(texts, batch_size=64)
    else:
        import onnxruntime as ort
        from tokenizers import Tokenizer
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(onnx_file, sess_options=opts, providers=["CPUExecutionProvider"])
        tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        tok.enable_truncation(max_length=MAX_SEQ)
        tok.no_padding()
        mode = pooling_mode()

        def embed(texts):  # one padded batch, as a server would run a request
            encs = tok.encode_batch(texts)
            L = max(len(e.ids) for e in encs)
            ids = np.zeros((len(texts), L), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, e in enumerate(encs):
                ids[r, :len(e.ids)] = e.ids
                mask[r, :len(e.ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if any(i.name == "token_type_ids" for i in sess.get_inputs()):
                feed["token_type_ids"] = np.zeros_like(ids)
            (h,) = sess.run(None, feed)
            return pool(h, mask, mode)
    res = {}
    # one search query of 8-16 word pieces a call ([CLS]/[SEP] included): the call a search box or
    # a server's single-query request makes (issue 15's short-input target)
    from tokenizers import Tokenizer as _Tok
    qtok = _Tok.from_file(str(MODEL_DIR / "tokenizer.json"))
    qtok.no_padding()
    qtok.no_truncation()
    queries = [json.loads(l)["query"] for l in open(QUERIES) if l.strip()]
    queries = [q for q in queries if QUERY_TOKENS[0] <= len(qtok.encode(q).ids) <= QUERY_TOKENS[1]]
    if not queries:
        raise SystemExit(f"embed_bench: no query of {QUERY_TOKENS[0]}-{QUERY_TOKENS[1]} word pieces in {QUERIES}")
    times = []
    for c in range(QUERY_CALLS + 10):
        t0 = time.perf_counter()
        embed([queries[c % len(queries)]])
        if c >= 10:
            times.append(time.perf_counter() - t0)
    times.sort()
    res["query"] = {"calls": QUERY_CALLS, "queries": len(queries), "p50_ms": 1e3 * times[len(times) // 2],
                    "p99_ms": 1e3 * times[min(len(times) - 1, int(0.99 * len(times)))]}
    for n, calls in LATENCY_CALLS.items():
        times = []
        for c in range(calls + 10):
            start = (c * n) % (len(corpus) - n)
            t0 = time.perf_counter()
            embed(corpus[start:start + n])
            if c >= 10:
                times.append(time.perf_counter() - t0)
        times.sort()
        res[str(n)] = {"calls": calls, "p50_ms": 1e3 * times[len(times) // 2],
                       "p99_ms": 1e3 * times[min(len(times) - 1, int(0.99 * len(times)))]}
    return res


def worker_main(args) -> int:
    corpus = Path(args.corpus).read_text(encoding="utf-8").splitlines()
    if args.worker == "latency":
        print("RESULT " + json.dumps(worker_latency(corpus, args.threads, args.system, args.onnx or "")), flush=True)
        return 0
    fn = {"st": worker_st, "onnx": worker_onnx}[args.worker]
    res = fn(corpus, args.threads, Path(args.out), args.onnx or "")
    print("RESULT " + json.dumps(res), flush=True)
    return 0


# ============================================================================================
# Parent: runs children, measures wall time and peak RSS per child
# ============================================================================================

def cpu_busy_fraction(seconds: float = 3.0) -> float:
    """Fraction of all CPUs busy over `seconds` (from /proc/stat), i.e. what others are using."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return idle, sum(v)
    i0, t0 = snap()
    time.sleep(seconds)
    i1, t1 = snap()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


QUIET = {"max_wait_s": 0.0, "busy_max": 0.15}


def wait_quiet() -> dict:
    """Before a timed run: wait (up to QUIET['max_wait_s']) until the other users of this shared
    machine leave the CPUs nearly idle. Returns what was seen, recorded with the run."""
    t0 = time.perf_counter()
    busy = cpu_busy_fraction(2.0)
    while busy > QUIET["busy_max"] and time.perf_counter() - t0 < QUIET["max_wait_s"]:
        busy = cpu_busy_fraction(3.0)
    return {"busy_before": round(busy, 3), "waited_s": round(time.perf_counter() - t0, 1),
            "loadavg_1m": round(os.getloadavg()[0], 2)}


TIME_BIN = shutil.which("time", path="/usr/bin:/bin")


class Child:
    """Popen + wait4: the rusage of exactly this child, however its output is read.

    Peak RSS: Linux starts a forked child's high-water mark at its parent's (it survives exec), so
    wait4's ru_maxrss of a child of this Python process (about 1 GB once torch and numpy are in)
    would read the same for every system. The command therefore runs under GNU time
    (/usr/bin/time, Debian package `time`), a small process whose child's ru_maxrss is its own;
    without it the figure is wait4's and the report says it is a floor of the parent's."""
    last_cpu_s = 0.0
    rss_own = TIME_BIN is not None

    @staticmethod
    def run(cmd, stdin_path=None, stdout_path=None, env=None):
        fin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        fout = open(stdout_path, "wb") if stdout_path else tempfile.TemporaryFile()
        ferr = tempfile.TemporaryFile()
        if TIME_BIN:
            cmd = [TIME_BIN, "-f", "EMBED_BENCH_MAXRSS_KIB %M"] + list(cmd)
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=ferr, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        text = ""
        if not stdout_path:
            fout.seek(0)
            text += fout.read().decode("utf-8", "replace")
        ferr.seek(0)
        text += ferr.read().decode("utf-8", "replace")
        for f in (fin, fout, ferr):
            if hasattr(f, "close"):
                f.close()
        Child.last_cpu_s = ru.ru_utime + ru.ru_stime
        rss = int(ru.ru_maxrss)
        marks = [ln for ln in text.splitlines() if ln.startswith("EMBED_BENCH_MAXRSS_KIB ")]
        if marks:
            rss = int(marks[-1].split()[1])
            text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("EMBED_BENCH_MAXRSS_KIB "))
        return p.returncode, wall, rss, text


def child_env(threads: int) -> dict:
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MODATTN_THREADS"):
        env[k] = str(threads)
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def corpus_token_counts(corpus: list[str]) -> list[int]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_SEQ)
    tok.no_padding()  # tokenizer.json pads to 128 by default
    return [len(e.ids) for e in tok.encode_batch(corpus)]


def bench_python(system: str, runs: int, threads: int, tmp: Path, onnx_file: Path | None = None) -> dict:
    import numpy as np
    rows = []
    emb = None
    for r in range(runs):
        out = tmp / f"{system}_{r}.npy"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", system, "--corpus", str(CORPUS),
               "--out", str(out), "--threads", str(threads), "--model", str(MODEL_DIR)]
        if onnx_file:
            cmd += ["--onnx", str(onnx_file)]
        quiet = wait_quiet()
        rc, wall, rss, text = Child.run(cmd, env=child_env(threads))
        line = [l for l in text.splitlines() if l.startswith("RESULT ")]
        if rc != 0 or not line:
            raise SystemExit(f"embed_bench: {system} run {r} failed (rc={rc}):\n{text[-3000:]}")
        res = json.loads(line[-1][7:])
        res.update(wall_s=wall, peak_rss_kib=rss, process_cpu_s=Child.last_cpu_s, **quiet)
        rows.append(res)
        print(f"embed_bench: {system} run {r + 1}/{runs}: encode {res['encode_s']:.2f} s "
              f"(CPU {res['encode_cpu_s']:.1f} s), process {wall:.2f} s, peak RSS {rss / 1024:.0f} MiB, "
              f"others' CPU use before {quiet['busy_before']:.0%}", file=sys.stderr)
        emb = np.load(out)
    return {"runs": rows, "embeddings": emb}


def modattn_binary() -> tuple[Path | None, str]:
    """build/modattn if it exists and lists an `embed` command; else (None, why)."""
    import re
    exe = MODATTN_EXE[0]
    if not exe.exists():
        return None, f"not built ({exe.relative_to(REPO) if exe.is_relative_to(REPO) else exe} missing)"
    try:
        top = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
        top_txt = top.stdout + top.stderr
        if not re.search(r"^\s+embed\b", top_txt, re.M):
            return None, f"not built ({exe.name} has no `embed` command yet)"
        sub = subprocess.run([str(exe), "embed", "--help"], capture_output=True, text=True, timeout=60)
        if sub.returncode != 0:
            return None, f"not built (`modattn embed --help` exits {sub.returncode})"
        return exe, top_txt + sub.stdout + sub.stderr
    except Exception as e:  # noqa: BLE001
        return None, f"not built (build/modattn failed to run: {e})"


def onednn_kernel(exe: Path, precision: str, env: dict) -> str:
    """The oneDNN matmul kernel(s) a one-line run in this precision executes (ONEDNN_VERBOSE)."""
    e = dict(env, ONEDNN_VERBOSE="1")
    p = subprocess.run([str(exe), "--precision", precision, "embed", "--model", str(MODEL_DIR), "-"],
                       input="warm up\n", capture_output=True, text=True, env=e, timeout=120)
    lines = (p.stdout + p.stderr).splitlines()
    kinds = sorted({ln.split(",")[4] for ln in lines if ln.startswith("onednn_verbose,exec,cpu,matmul,")})
    isa = next((ln.split("isa:", 1)[1] for ln in lines if ln.startswith("onednn_verbose,info,cpu,isa:")), "")
    if not kinds and isa:
        # oneDNN linked, no matmul primitive: its matmul would be the jit GEMM, so the plans run our
        # AVX2 GEMM over weights packed at load (the rule of cpu_gemm.c, checked by test_gemm_rows),
        # or dnnl_sgemm with MODATTN_GEMM_OWN=0
        flags = Path("/proc/cpuinfo").read_text().split()
        if env.get("MODATTN_GEMM_OWN", "1") != "0" and "avx2" in flags and "fma" in flags:
            return ("our AVX2+FMA GEMM over weights packed at load (backends/cpu/cpu_sgemm.c; "
                    f"oneDNN's matmul here would be its jit GEMM for {isa})")
        return f"dnnl_sgemm (oneDNN's jit GEMM for {isa}, called directly: no primitive)"
    return ", ".join(kinds) or "(no oneDNN matmul: OpenBLAS build, or the direct kernel)"


def bench_modattn(runs: int, threads: int, tmp: Path, n: int, precision: str = "fp32") -> dict:
    import numpy as np
    exe, helptext = modattn_binary()
    if exe is None:
        return {"status": helptext}
    cmd = [str(exe)] + (["--precision", precision] if precision != "fp32" else []) + ["embed", "--model", str(MODEL_DIR)]
    if "--threads" in helptext:
        cmd += ["--threads", str(threads)]
    cmd.append("-")
    env = child_env(threads)
    one = tmp / "one_line.txt"
    one.write_text("warm up\n", encoding="utf-8")
    loads, load_cpu = [], []
    for _ in range(runs):
        rc, wall, _, text = Child.run(cmd, stdin_path=one, stdout_path=tmp / "one.jsonl", env=env)
        load_cpu.append(Child.last_cpu_s)
        if rc != 0 and "cannot run in" in text:  # the CPU lacks the mode's instructions: said, not hidden
            why = [ln for ln in text.splitlines() if "cannot run in" in ln][-1].split(": ", 2)[-1]
            return {"status": f"not available here: {why}"}
        if rc != 0:
            print(text[-3000:], file=sys.stderr)
            return {"status": f"failed (exit {rc} on a one-line input)", "stderr_tail": text[-2000:]}
        loads.append(wall)
    load_s = statistics.median(loads)
    load_cpu_s = statistics.median(load_cpu)
    rows, emb, tokens = [], None, None
    for r in range(runs):
        out = tmp / f"modattn_{precision}_{r}.jsonl"
        quiet = wait_quiet()
        rc, wall, rss, text = Child.run(cmd, stdin_path=CORPUS, stdout_path=out, env=env)
        if rc != 0:
            print(text[-3000:], file=sys.stderr)
            return {"status": f"failed (exit {rc} on the corpus)", "stderr_tail": text[-2000:]}
        recs = [json.loads(l) for l in out.read_text(encoding="utf-8").splitlines() if l.strip()]
        if len(recs) != n:
            return {"status": f"failed: {len(recs)} output lines for {n} inputs"}
        recs.sort(key=lambda x: x["index"])
        emb = np.asarray([x["embedding"] for x in recs], dtype=np.float32)
        tokens = [int(x.get("tokens", -1)) for x in recs]
        cpu = Child.last_cpu_s
        rows.append({"load_s": load_s, "encode_s": max(wall - load_s, 1e-9), "wall_s": wall,
                     "encode_cpu_s": max(cpu - load_cpu_s, 1e-9), "process_cpu_s": cpu,
                     "peak_rss_kib": rss, **quiet})
        print(f"embed_bench: modattn {precision} run {r + 1}/{runs}: process {wall:.2f} s (CPU {cpu:.1f} s, "
              f"start-up {load_s:.2f} s), peak RSS {rss / 1024:.0f} MiB, "
              f"others' CPU use before {quiet['busy_before']:.0%}", file=sys.stderr)
    shown = [c.replace(str(REPO) + "/", "") for c in cmd[:-1]]
    return {"runs": rows, "embeddings": emb, "tokens": tokens, "kernel": onednn_kernel(exe, precision, env),
            "cmd": " ".join(shown) + f" - < {CORPUS_SHOWN[0]}"}


def bench_latency(key: str, threads: int) -> dict:
    """The latency table's row for one system, in a child process (see the docstring)."""
    if key.startswith("modattn"):
        if not (REPO / "build" / "python").is_dir():
            return {"status": "not built (build/python: the Python binding)"}
    onnx_file = ""
    if key == "onnx":
        onnx_file = str(export_onnx())
    elif key == "onnx-int8":
        onnx_file = str(quantize_onnx(export_onnx()))
    env = child_env(threads)
    env["PYTHONPATH"] = str(REPO / "build" / "python") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "latency", "--system", key,
           "--corpus", str(CORPUS), "--threads", str(threads), "--onnx", onnx_file, "--model", str(MODEL_DIR)]
    quiet = wait_quiet()
    rc, wall, rss, text = Child.run(cmd, env=env)
    line = [l for l in text.splitlines() if l.startswith("RESULT ")]
    if rc != 0 or not line:
        if "UnsupportedError" in text or "cannot run in" in text:
            lines = [ln for ln in text.splitlines() if "cannot run in" in ln or "UnsupportedError" in ln]
            return {"status": "not available here: " + (lines or text.strip().splitlines())[-1][-200:]}
        raise SystemExit(f"embed_bench: latency of {key} failed (rc={rc}):\n{text[-3000:]}")
    res = json.loads(line[-1][7:])
    res.update(quiet)
    print(f"embed_bench: latency {key}: query p50 {res['query']['p50_ms']:.2f} ms, " + ", ".join(
        f"{n}: p50 {res[str(n)]['p50_ms']:.2f} ms" for n in LATENCY_CALLS), file=sys.stderr)
    return res


def compare(a, b) -> dict:
    import numpy as np
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()), "max_abs_diff": float(np.abs(a - b).max())}


# ============================================================================================
# Environment record, report
# ============================================================================================

def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def environment(threads: int) -> dict:
    import importlib.metadata as md
    vers = {}
    for pkg in ("sentence-transformers", "transformers", "torch", "tokenizers", "onnxruntime", "onnx",
                "numpy"):
        try:
            vers[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            vers[pkg] = None
    try:
        import torch
        blas = "MKL" if torch.backends.mkl.is_available() else "other"
    except Exception:  # noqa: BLE001
        blas = "?"
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "threads": threads,
        "loadavg_at_start": os.getloadavg(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
        "python": platform.python_version(),
        "versions": vers,
        "torch_cpu_blas": blas,
        "kernel": platform.release(),
        "git_commit": commit,
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def summarize(res: dict, n_sent: int, n_tok: int) -> dict:
    runs = res["runs"]
    enc = statistics.median(r["encode_s"] for r in runs)
    return {
        "encode_s_median": enc,
        "process_s_median": statistics.median(r["wall_s"] for r in runs),
        "load_s_median": statistics.median(r["load_s"] for r in runs),
        "sentences_per_s": n_sent / enc,
        "tokens_per_s": n_tok / enc,
        "tokens_per_s_best": n_tok / min(r["encode_s"] for r in runs),
        "encode_cpu_s_median": statistics.median(r["encode_cpu_s"] for r in runs),
        "peak_rss_mib_median": statistics.median(r["peak_rss_kib"] for r in runs) / 1024,
        "encode_s_all": [round(r["encode_s"], 3) for r in runs],
    }


PEAK_PROBE = REPO / "build" / "bench" / "peak_flops"


def model_flops(counts: list[int]) -> dict:
    """FLOPs the model must do on the corpus, from its config.json: per token and layer the
    four dense products 2*(4*H*H + 2*H*I) (QKV, output, FFN up and down), per text and layer
    attention 4*len^2*H (scores and P.V over all heads). Padding, softmax, LayerNorm, GELU and
    pooling not counted: a lower bound on the arithmetic any exact fp32 implementation does.
    Qwen2/Qwen3 decoders: Q and O of heads x head_dim, K and V of kv_heads x head_dim (GQA), the gated
    FFN's three products, and causal attention (text i's query j reads j + 1 keys)."""
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    H, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    if cfg.get("model_type") in ("qwen2", "qwen3"):
        nh, kvh = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        D = cfg.get("head_dim") or H // nh
        dense = 2.0 * L * (2 * H * nh * D + 2 * H * kvh * D + 3 * H * I) * sum(counts)
        attn = 4.0 * L * nh * D * sum(c * (c + 1) / 2 for c in counts)
        return {"dense": dense, "attention": attn, "total": dense + attn}
    dense = 2.0 * L * (4 * H * H + 2 * H * I) * sum(counts)
    attn = 4.0 * L * H * sum(c * c for c in counts)
    return {"dense": dense, "attention": attn, "total": dense + attn}


PEAK_CLASSES = {"fma": "", "bf16dot": "bf16dot", "int8dot": "int8dot", "amx_bf16": "amx_bf16", "amx_int8": "amx_int8"}
PEAK_NAMES = {"fma": "fp32 FMA", "bf16dot": "VDPBF16PS", "int8dot": "VPDPBUSD", "amx_bf16": "AMX bf16",
              "amx_int8": "AMX int8"}


def peak_gflops(threads: int, cls: str = "fma") -> dict | None:
    """The machine's peak of one instruction class by CPU-second from bench/peak_flops (None if
    not built or the CPU lacks the class)."""
    if not PEAK_PROBE.exists():
        return None
    cmd = [str(PEAK_PROBE), "0.3", str(threads)] + ([PEAK_CLASSES[cls]] if PEAK_CLASSES[cls] else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return None
    p = json.loads(lines[-1])
    return {"per_core": p["gflops_1thread_cpu"], "all": p["gflops_all_cpu"] if threads > 1 else p["gflops_1thread_cpu"],
            "isa": p["isa"]}


GEMM_PROBE = REPO / "build" / "bench" / "gemm_plan"


def gemm_ceiling(threads: int) -> dict | None:
    """What the encoder's fp32 GEMMs reach alone: bench/gemm_plan (the encoder's GEMM plans, called as
    the encoder calls them, over 8,192 rows of the model's four layer shapes, no post-ops, no
    attention), one copy per
    thread at once (every core busy, as in the forward pass). The rate per copy is its FLOP-weighted
    rate over the four shapes (as a layer mixes them); the copies' rates add up."""
    if not GEMM_PROBE.exists():
        return None
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    shape = (["qwen3"] if cfg.get("model_type") in ("qwen3", "qwen2") else
             [str(cfg.get("hidden_size", 384)), str(cfg.get("intermediate_size", 1536))])
    procs = [subprocess.Popen([str(GEMM_PROBE), "8192", "5"] + shape, stdout=subprocess.PIPE, text=True,
                              env=child_env(1)) for _ in range(threads)]
    rates, ops = [], {}
    outs = [(pr, pr.communicate()[0]) for pr in procs]  # every copy reaped
    for pr, out in outs:
        if pr.returncode != 0:
            return None
        flops = secs = 0.0
        for ln in out.splitlines():
            f = ln.split()
            if len(f) >= 5 and f[0] in ("qkv", "attn_out", "ffn_up", "ffn_down"):
                n, k, rate = int(f[1]), int(f[2]), float(f[4])
                flops += n * k
                secs += n * k / rate
                ops.setdefault(f[0], []).append(rate)
        if secs:
            rates.append(flops / secs)
    if len(rates) != threads:
        return None
    return {"per_core": statistics.median(rates), "all": sum(rates),
            "ops": {k: statistics.median(v) for k, v in ops.items()}, "shape": shape}


def peak_class(key: str, data: dict) -> str | None:
    """The instruction class whose peak a row is measured against (see the docstring)."""
    peaks = data.get("peaks", {})
    mode = MODE[key]
    if mode == "fp32":
        return "fma"
    kernel = data["systems"].get(key, {}).get("kernel", "")
    amx, dot = ("amx_bf16", "bf16dot") if mode == "bf16" else ("amx_int8", "int8dot")
    if key.startswith("modattn"):
        return amx if "amx" in kernel and amx in peaks else dot if dot in peaks else None
    return amx if amx in peaks else dot if dot in peaks else None


def mode_lines(data: dict) -> list[str]:
    """The modes table (issue 15): each precision x system, with the peak of its instruction class."""
    fl, peaks = data.get("flops"), data.get("peaks", {})
    n_tok = data["corpus"]["tokens"]
    per_tok = fl["total"] / n_tok if fl else None
    L = ["", "## Modes: fp32, bf16, int8", "",
         "Same corpus, runs and threads. \"% of peak\" is the useful arithmetic rate (the model's dense + "
         "attention FLOPs per token x tokens/s) over the peak of the instruction class the row's GEMMs ran "
         "on, measured in this invocation (`build/bench/peak_flops`; classes below). Min and mean cosine "
         "are against sentence-transformers' fp32 vectors of the whole corpus.", "",
         "| mode | system | tokens/s | tokens per CPU s | vs ONNX Runtime, same mode | % of peak (class) | "
         "peak RSS MiB | min cosine | mean cosine |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mode in ("fp32", "bf16", "int8"):
        ort = {"fp32": "onnx", "int8": "onnx-int8"}.get(mode)
        ort_tps = data["systems"].get(ort, {}).get("summary", {}).get("tokens_per_s") if ort else None
        for key in [k for k in ORDER if MODE[k] == mode and k != "st"]:
            row = data["systems"].get(key)
            if not row or "summary" not in row:
                L.append(f"| {mode} | {SYSTEM_LABELS[key]} | {(row or {}).get('status', 'not run')} | | | | | | |")
                continue
            s = row["summary"]
            cls = peak_class(key, data)
            pct = (f"{s['tokens_per_s'] * per_tok / 1e9 / peaks[cls]['all']:.1%} ({PEAK_NAMES[cls]})"
                   if cls and per_tok else "n/a")
            vs = f"{s['tokens_per_s'] / ort_tps:.2f}x" if ort_tps and key.startswith("modattn") else ""
            c = row.get("vs_st", {})
            L.append(f"| {mode} | {SYSTEM_LABELS[key]} | {s['tokens_per_s']:,.0f} | "
                     f"{n_tok / s['encode_cpu_s_median']:,.0f} | {vs} | {pct} | {s['peak_rss_mib_median']:.0f} | "
                     f"{c.get('min_cosine', float('nan')):.6f} | {c.get('mean_cosine', float('nan')):.6f} |")
        if mode == "bf16":
            L.append("| bf16 | ONNX Runtime | not available: its CPU provider has no bf16 GEMMs on x86 | | | | | | |")
    L += ["", "Peaks measured in this invocation (GFLOP/s, or int8 GOP/s, per CPU-second on "
          f"{data['environment']['threads']} threads): " +
          ", ".join(f"{PEAK_NAMES[k]} {v['all']:,.0f}" for k, v in peaks.items()) +
          ("; not on this CPU: " + ", ".join(PEAK_NAMES[k] for k in PEAK_CLASSES if k not in peaks)
           if any(k not in peaks for k in PEAK_CLASSES) else "") + ".",
          "oneDNN kernels modattn ran: " + "; ".join(
              f"{MODE[k]}: `{data['systems'][k]['kernel']}`" for k in ORDER
              if k.startswith("modattn") and data["systems"].get(k, {}).get("kernel")) + "."]
    lat = data.get("latency", {})
    if lat:
        L += ["", "## Latency: small calls", "",
              "p50 / p99 in ms of one call embedding n consecutive corpus lines, in one process per system "
              "(modattn through its Python binding, ONNX Runtime through its session; tokenising included; "
              + ", ".join(f"{c} calls of {n}" for n, c in LATENCY_CALLS.items()) + ", after 10 warm-up calls). "
              "ONNX Runtime runs a call's inputs as one batch padded to its longest, as a request to a server "
              "would (the corpus has lines of up to 256 word pieces, so 8 or 32 consecutive lines often "
              "include one); modattn groups a call's inputs by length (`modattn_model_set_batch_tokens`). "
              f"*1 query*: one search query of {QUERY_TOKENS[0]}-{QUERY_TOKENS[1]} word pieces a call "
              f"({QUERY_CALLS} calls cycling over the "
              f"{next((r['query']['queries'] for r in lat.values() if 'query' in r), '?')} such queries of "
              "bench/search_eval.jsonl): the call a search or a server's one-query request makes.", "",
              "| system | 1 query: p50 | p99 | " + " | ".join(f"{n} input{'s' if n > 1 else ''}: p50 | p99" for n in LATENCY_CALLS) + " |",
              "| --- | ---: | ---: | " + " | ".join("---: | ---:" for _ in LATENCY_CALLS) + " |"]
        for key in ORDER:
            r = lat.get(key)
            if not r:
                continue
            if "status" in r:
                L.append(f"| {SYSTEM_LABELS[key]} | {r['status']} |" + " |" * (2 * len(LATENCY_CALLS) + 1))
                continue
            q = r.get("query")
            L.append(f"| {SYSTEM_LABELS[key]} | " + (f"{q['p50_ms']:.2f} | {q['p99_ms']:.2f} | " if q else "— | — | ")
                     + " | ".join(
                f"{r[str(n)]['p50_ms']:.2f} | {r[str(n)]['p99_ms']:.2f}" for n in LATENCY_CALLS) + " |")
        qm, qo = lat.get("modattn", {}).get("query"), lat.get("onnx", {}).get("query")
        if qm and qo:
            ok = qm["p50_ms"] <= qo["p50_ms"] and qm["p50_ms"] <= 3.0
            L += ["", f"One query, fp32: modattn p50 {qm['p50_ms']:.2f} ms against ONNX Runtime's {qo['p50_ms']:.2f} ms "
                  f"in the same run ({qo['p50_ms'] / qm['p50_ms']:.2f}x). Target (issue 15): at most ONNX Runtime's "
                  f"and at most 3 ms on 2 cores: {'met' if ok else 'not met'}."]
    return L


def ceiling_lines(data: dict) -> list[str]:
    fl, peak = data.get("flops"), data.get("peak")
    if not fl or not peak:
        return []
    n_tok, thr = data["corpus"]["tokens"], data["environment"]["threads"]
    per_tok = fl["total"] / n_tok
    max_tps = peak["all"] * 1e9 / per_tok
    L = ["", "## What the hardware allows", "",
         f"The corpus needs {fl['total'] / 1e12:.3f} TFLOP of fp32 arithmetic at the least "
         f"({fl['dense'] / 1e12:.3f} in the dense layers, {fl['attention'] / 1e12:.3f} in attention; padding, "
         f"softmax, LayerNorm, GELU not counted): {per_tok / 1e6:.1f} MFLOP per token. The measured FMA peak "
         f"(`build/bench/peak_flops`, by CPU-second) is {peak['per_core']:.1f} GFLOP/s per core, {peak['all']:.1f} "
         f"on {thr} threads, so no exact fp32 implementation can exceed **{max_tps:,.0f} tokens/s** here, even "
         "with every instruction an FMA at full rate and nothing else to do.", ""]
    rows = ["| system | tokens/s | arithmetic rate, GFLOP/s | % of the FMA peak | tokens/s needed for 2x it | 2x it as % of the peak |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for key in ("st", "onnx", "modattn"):
        row = data["systems"].get(key)
        if not row or "summary" not in row:
            continue
        tps = row["summary"]["tokens_per_s"]
        g = tps * per_tok / 1e9
        rows.append(f"| {SYSTEM_LABELS[key]} | {tps:,.0f} | {g:.1f} | {g / peak['all']:.0%} | {2 * tps:,.0f} | "
                    f"{2 * g / peak['all']:.0%} |")
    gc = data.get("gemm_ceiling")
    m = data["systems"].get("modattn", {}).get("summary")
    if gc and m:
        g = m["tokens_per_s"] * per_tok / 1e9
        rows += ["", f"**The GEMMs alone** (`build/bench/gemm_plan 8192 5 {' '.join(gc.get('shape', []))}`: the encoder's "
                 f"GEMM plans, called as the encoder calls them, on the model's four layer shapes, no post-ops, no attention, one copy per thread at once, measured in "
                 f"this run): {gc['all']:.0f} GFLOP/s on {thr} threads ({gc['per_core']:.0f} per core; "
                 + ", ".join(f"{k} {v:.0f}" for k, v in gc['ops'].items())
                 + f"), **{gc['all'] / peak['all']:.0%} of the FMA peak**. The dense layers are "
                 f"{fl['dense'] / fl['total']:.0%} of the corpus' FLOPs, so with attention, GELU, LayerNorm and the "
                 f"rest free, the encoder could reach about that share; end to end it runs at {g / peak['all']:.0%}, "
                 f"{g / gc['all']:.0%} of its GEMMs' own rate. An end-to-end share of the peak above "
                 f"{gc['all'] / peak['all']:.0%} needs GEMMs faster than these plans' in isolation."]
    return L + rows


def _runs_text(data: dict) -> str:
    """"3 runs per system", or each system's count where invocations with other --runs merged."""
    counts = {k: len(data["systems"][k]["runs"]) for k in ORDER if "runs" in data["systems"].get(k, {})}
    if len(set(counts.values())) <= 1:
        return f"{data['runs']} runs per system"
    return "runs per system: " + ", ".join(f"{SYSTEM_LABELS[k]} {n}" for k, n in counts.items())


def write_report(data: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    env, corpus = data["environment"], data["corpus"]
    quiet = data.get("quiet", QUIET)
    L = [f"# Embedding throughput: {data.get('model', 'all-MiniLM-L6-v2')} on CPU", "",
         "Made by `bench/embed_bench.py` (see its docstring for the method). "
         f"Corpus `{corpus.get('shown', 'bench/corpus_sentences.txt')}`: {corpus['sentences']} lines, "
         f"{corpus['tokens']} word pieces (incl. the specials, truncated at {corpus.get('max_seq', MAX_SEQ)}; "
         f"{corpus['truncated']} lines truncated), "
         f"sha256 `{corpus['sha256'][:16]}…`. {_runs_text(data)}, each in its own process; medians shown. "
         "Throughput counts encoding only (model load excluded); peak RSS is the whole process"
         + (" (its own: measured under GNU time, see `Child`)" if data.get("rss_own") else
            " (wait4's ru_maxrss: at least this script's own RSS when it started the run)") + ". "
         "\"encode CPU s\" is user+system CPU time of the encode phase over all threads: on this shared "
         "2-core machine it is the figure least disturbed by other users; wall-clock figures are noisy "
         f"(before each run the script waited up to {quiet['max_wait_s']:.0f} s for the CPUs to be "
         f"≤ {quiet['busy_max']:.0%} busy; per-run figures are in embed.json).", "",
         "| system | sentences/s | tokens/s | tokens/s, best run | encode s | encode CPU s | tokens per CPU s | process s | peak RSS MiB | others' CPU use before runs | vs sentence-transformers |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for key in ORDER:
        row = data["systems"].get(key)
        label = SYSTEM_LABELS[key]
        if not row or "summary" not in row:
            status = (row or {}).get("status", "not run")
            L.append(f"| {label} | {status} | | | | | | | | | |")
            continue
        s = row["summary"]
        busy = ", ".join(f"{r['busy_before']:.0%}" for r in row["runs"] if "busy_before" in r) or "n/a"
        cmp_ = row.get("vs_st")
        cmp_txt = "reference" if key == "st" else (
            f"min cos {cmp_['min_cosine']:.7f}, max abs diff {cmp_['max_abs_diff']:.2e}" if cmp_ else "")
        L.append(f"| {label} | {s['sentences_per_s']:.1f} | {s['tokens_per_s']:.0f} | {s['tokens_per_s_best']:.0f} | "
                 f"{s['encode_s_median']:.2f} | {s['encode_cpu_s_median']:.1f} | "
                 f"{corpus['tokens'] / s['encode_cpu_s_median']:.0f} | "
                 f"{s['process_s_median']:.2f} | {s['peak_rss_mib_median']:.0f} | {busy} | {cmp_txt} |")
    L += ["", "## Settings", "",
          f"- CPU: {env['cpu']} ({env['logical_cpus']} logical CPUs, shared machine; load average at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])})",
          f"- Threads: {env['threads']} for every system (torch.set_num_threads, ORT intra_op_num_threads, "
          "OMP/MKL/OPENBLAS_NUM_THREADS and MODATTN_THREADS in the environment; `--threads` to modattn if it has it)",
          f"- Batching: sentence-transformers encode(batch_size={BATCH}) with its length sort; ONNX Runtime the same "
          f"(length-sorted batches of {BATCH}, padded to the longest in the batch)",
          f"- OPENBLAS_CORETYPE: `{env['OPENBLAS_CORETYPE']}`, OPENBLAS_L2_SIZE: `{env['OPENBLAS_L2_SIZE']}`",
          f"- PyTorch CPU BLAS: {env['torch_cpu_blas']}",
          "- Versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()) + f", Python {env['python']}",
          f"- ONNX model: {data.get('onnx_export', 'n/a')}",
          f"- modattn: {data['systems'].get('modattn', {}).get('cmd', 'n/a')}",
          f"- Repository commit: {env['git_commit']}; measured {env['date_utc']} UTC", ""]
    L[-1:-1] = ceiling_lines(data) + mode_lines(data)
    (RESULTS / f"{STEM}.md").write_text("\n".join(L), encoding="utf-8")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("embed_bench: matplotlib missing, no plot", file=sys.stderr)
        return
    keys = [k for k in ORDER if "summary" in data["systems"].get(k, {})]
    short = {"st": "sentence-\ntransformers", "onnx": "ONNX\nRuntime", "onnx-int8": "ONNX RT\nint8",
             "modattn": "modattn\nfp32", "modattn-bf16": "modattn\nbf16", "modattn-int8": "modattn\nint8"}
    labels = [short[k] for k in keys]
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.6))
    for k in keys:  # load-robust efficiency: word pieces per CPU-second of encoding
        data["systems"][k]["summary"]["tokens_per_cpu_s"] = corpus["tokens"] / data["systems"][k]["summary"]["encode_cpu_s_median"]
    metrics = [("sentences_per_s", "sentences / s, median (higher is better)"),
               ("tokens_per_s", "tokens / s, median (higher is better)"),
               ("tokens_per_cpu_s", "tokens per CPU-second (higher is better)"),
               ("peak_rss_mib_median", "peak RSS, MiB (lower is better)")]
    colors = {"st": "#4c72b0", "onnx": "#dd8452", "onnx-int8": "#f2b48a", "modattn": "#55a868",
              "modattn-bf16": "#3d8a4f", "modattn-int8": "#8fd19e"}
    for ax, (m, title) in zip(axes, metrics):
        vals = [data["systems"][k]["summary"][m] for k in keys]
        bars = ax.bar(range(len(keys)), vals, color=[colors[k] for k in keys])
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(title, fontsize=10)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{v:,.0f}", ha="center", va="bottom", fontsize=8)
        ax.margins(y=0.15)
    missing = [SYSTEM_LABELS[k] for k in ORDER if k not in keys]
    sub = f"{data.get('model', 'all-MiniLM-L6-v2')}, {corpus['sentences']} lines / {corpus['tokens']} tokens, {env['threads']} threads, {env['cpu']}"
    if missing:
        sub += "  |  not measured: " + ", ".join(missing)
    fig.suptitle(sub, fontsize=9)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{STEM}.png", dpi=110)
    plt.close(fig)


def main() -> int:
    global CORPUS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default=",".join(ORDER))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quiet-wait", type=float, default=120.0,
                    help="seconds to wait before each run for other processes to leave the CPUs idle")
    ap.add_argument("--make-corpus", action="store_true", help="write bench/corpus_sentences.txt and exit")
    ap.add_argument("--modattn", type=Path, default=MODATTN_EXE[0], help="the modattn binary (default build/modattn)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite embed.md / embed.png from bench/results/embed.json without running anything")
    ap.add_argument("--worker", choices=["st", "onnx", "latency"], help=argparse.SUPPRESS)
    ap.add_argument("--system", help=argparse.SUPPRESS)
    ap.add_argument("--latency", action=argparse.BooleanOptionalAction, default=True,
                    help="measure the latency table (p50/p99 of 1, 8, 32 inputs per call)")
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    ap.add_argument("--model", type=Path, default=None,
                    help="a sentence-transformers folder (default .models/all-MiniLM-L6-v2); results in "
                         "bench/results/embed_<folder name>.*")
    ap.add_argument("--lines", type=int, default=0,
                    help="time only the corpus' first N lines (a slow model on a shared machine); 0: all")
    ap.add_argument("--token-range", default="",
                    help="LO:HI: with --lines N, the first N lines of LO to HI word pieces (the model's tokenizer, "
                         "specials included): texts of one size, batches with little padding")
    args = ap.parse_args()
    set_model(args.model, args.lines if not args.worker else 0)

    if args.worker:
        return worker_main(args)
    if args.make_corpus:
        lines = make_corpus()
        CORPUS.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"embed_bench: wrote {CORPUS} ({len(lines)} lines, {CORPUS.stat().st_size} bytes)")
        return 0
    if args.report_only:
        write_report(json.loads((RESULTS / f"{STEM}.json").read_text()))
        print((RESULTS / f"{STEM}.md").read_text())
        return 0
    if not (MODEL_DIR / "model.safetensors").exists():
        raise SystemExit(f"embed_bench: {MODEL_DIR} missing: run tools/setup_model.sh")

    import numpy as np
    QUIET["max_wait_s"] = args.quiet_wait
    MODATTN_EXE[0] = args.modattn.resolve()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    corpus = load_corpus()
    if args.lines:
        if args.token_range:
            lo, hi = (int(x) for x in args.token_range.split(":"))
            counts_all = corpus_token_counts(corpus)
            corpus = [t for t, c in zip(corpus, counts_all) if lo <= c <= hi][:args.lines]
            CORPUS_SHOWN[0] = (f"bench/corpus_sentences.txt, its first {len(corpus)} lines of {lo}-{hi} word pieces "
                               f"(`--token-range {args.token_range}`)")
        else:
            corpus = corpus[:args.lines]
            CORPUS_SHOWN[0] = f"bench/corpus_sentences.txt, its first {args.lines} lines"
        sub = Path(tempfile.gettempdir()) / f"embed_bench_corpus_{os.getpid()}.txt"
        sub.write_text("\n".join(corpus) + "\n", encoding="utf-8")
        CORPUS = sub
    counts = corpus_token_counts(corpus)
    n_sent, n_tok = len(corpus), sum(counts)
    corpus_sha = hashlib.sha256(CORPUS.read_bytes()).hexdigest()
    prev_path = RESULTS / f"{STEM}.json"
    data = json.loads(prev_path.read_text()) if prev_path.exists() else {}
    if data.get("corpus", {}).get("sha256") != corpus_sha:
        data = {}
    data.setdefault("systems", {})
    data["corpus"] = {"sentences": n_sent, "tokens": n_tok, "sha256": corpus_sha,
                      "truncated": sum(1 for c in counts if c >= MAX_SEQ), "max_seq": MAX_SEQ,
                      "shown": CORPUS_SHOWN[0]}
    data["model"] = MODEL_DIR.name
    data["runs"] = args.runs
    data["quiet"] = dict(QUIET)
    data["environment"] = environment(args.threads)
    data["flops"] = model_flops(counts)
    data["rss_own"] = Child.rss_own
    data["peaks"] = {k: v for k in PEAK_CLASSES if (v := peak_gflops(args.threads, k))}
    data["peak"] = data["peaks"].get("fma")  # the fp32 ceiling section's, measured once
    if "modattn" in systems:
        data["gemm_ceiling"] = gemm_ceiling(args.threads)

    CACHE.mkdir(parents=True, exist_ok=True)
    st_ref = CACHE / (f"st_embeddings_{corpus_sha[:16]}.npy" if MODEL_DIR == DEFAULT_MODEL
                      else f"st_embeddings_{MODEL_DIR.name}_{corpus_sha[:16]}.npy")
    with tempfile.TemporaryDirectory(prefix="embed_bench.") as td:
        tmp = Path(td)
        if "st" in systems:
            r = bench_python("st", args.runs, args.threads, tmp)
            np.save(st_ref, r["embeddings"])
            data["systems"]["st"] = {"summary": summarize(r, n_sent, n_tok), "runs": r["runs"]}
        if any(s != "st" for s in systems) and not st_ref.exists():
            print("embed_bench: computing sentence-transformers reference embeddings (1 run)", file=sys.stderr)
            r = bench_python("st", 1, args.threads, tmp)
            np.save(st_ref, r["embeddings"])
        ref = np.load(st_ref) if st_ref.exists() else None
        if "onnx" in systems:
            onnx_file = export_onnx()  # once, outside the timed runs
            r = bench_python("onnx", args.runs, args.threads, tmp, onnx_file)
            data["systems"]["onnx"] = {"summary": summarize(r, n_sent, n_tok), "runs": r["runs"],
                                       "vs_st": compare(r["embeddings"], ref)}
            data["onnx_export"] = (f"{onnx_path().name} ({onnx_path().with_suffix('.txt').read_text().strip()}, "
                                   "ORT_ENABLE_ALL, CPUExecutionProvider)")
        if "onnx-int8" in systems:
            q_file = quantize_onnx(export_onnx())
            r = bench_python("onnx", args.runs, args.threads, tmp, q_file)
            data["systems"]["onnx-int8"] = {"summary": summarize(r, n_sent, n_tok), "runs": r["runs"],
                                            "vs_st": compare(r["embeddings"], ref), "model": q_file.name}
        for key in ("modattn", "modattn-bf16", "modattn-int8"):
            if key not in systems:
                continue
            r = bench_modattn(args.runs, args.threads, tmp, n_sent, MODE[key])
            if "runs" in r:
                entry = {"summary": summarize(r, n_sent, n_tok), "runs": r["runs"],
                         "vs_st": compare(r["embeddings"], ref), "cmd": r["cmd"], "kernel": r["kernel"]}
                if r["tokens"] and r["tokens"] != counts:
                    bad = sum(1 for a, b in zip(r["tokens"], counts) if a != b)
                    entry["token_count_mismatches"] = bad
                    print(f"embed_bench: WARNING modattn token counts differ from the HF tokenizer on "
                          f"{bad} lines", file=sys.stderr)
                data["systems"][key] = entry
            else:
                data["systems"][key] = r
                print(f"embed_bench: {key}: {r['status']}", file=sys.stderr)
        if args.latency:
            data.setdefault("latency", {})
            for key in [k for k in ORDER if k in systems and k != "st"]:
                data["latency"][key] = bench_latency(key, args.threads)

    RESULTS.mkdir(parents=True, exist_ok=True)
    prev_path.write_text(json.dumps(data, indent=2) + "\n")
    write_report(data)
    print((RESULTS / f"{STEM}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
