#!/usr/bin/env python3
"""Sparse (SPLADE) encoding speed (issue 39 item 5: target >= 1.5x sentence-transformers' SparseEncoder):
modattn.SparseEncoder.encode against sentence_transformers.SparseEncoder.encode, same model, same texts,
same threads, batch_size 32 for both.

    bench/.venv/bin/python bench/sparse_bench.py [--model .models/splade-tiny] [--lines 256] [--rounds 3]
                                                 [--reps 3] [--threads 2]

Texts: the first --lines lines of bench/corpus_sentences.txt. Model: .models/splade-tiny (a real
2-layer, width-128 BertForMaskedLM SPLADE, vocabulary 30522: the MLM head's 128 x 30522 product per
token is most of its arithmetic).

Method. Each system runs in its own child process (so its CPU time is its own: user + system time of
all its threads, from time.process_time(), which a shared machine disturbs far less than wall time):
it loads the model, encodes the texts twice to warm up, then --reps timed encode() calls of all the
texts. There are --rounds rounds, each starting one child per system, the order alternating, so
slow minutes of a shared machine fall on both. Reported: the medians over all timed calls of wall
seconds and CPU seconds, texts/s and word pieces/s by each, and the ratio modattn / sentence-
transformers by CPU time (the figure to judge the target on here) and by wall time. Before each child
the CPU use of others is sampled (/proc/stat) and the load average recorded.

Agreement, checked before the timing is reported (exit 1 when it fails): per text, the sets of
non-zero token ids must be equal and every weight within 1e-5 relative + 5e-6 absolute of
sentence-transformers' (the tolerance the goldens use).

Writes (replaces) the "Sparse encoding" section of bench/results/rerank.md (the rerank/sparse speed file;
bench/rerank_bench.py keeps the section when it rewrites the file) and bench/results/sparse.json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
sys.path.insert(0, str(BENCH))
import embed_bench as eb  # noqa: E402  (cpu_model, cpu_busy_fraction, child_env)

MARK = "<!-- sparse_bench.py: the section below is rewritten by bench/sparse_bench.py -->"
RTOL, ATOL = 1e-5, 5e-6


def worker(args) -> int:
    texts = Path(args.texts).read_text(encoding="utf-8").splitlines()
    info = {}
    if args.worker == "st":
        import torch
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
        from sentence_transformers import SparseEncoder
        m = SparseEncoder(str(args.model), device="cpu")
        enc = lambda: m.encode(texts, batch_size=32, show_progress_bar=False)  # noqa: E731  (its default output)
        info["torch_blas"] = "MKL" if torch.backends.mkl.is_available() else "other"
        info["torch_mkldnn"] = bool(torch.backends.mkldnn.is_available())
    else:
        sys.path.insert(0, str(REPO / "build" / "python"))
        import modattn
        m = modattn.SparseEncoder(str(args.model), threads=args.threads)
        enc = lambda: m.encode(texts, batch_size=32)  # noqa: E731
    loaded = sorted({ln.split()[-1] for ln in open("/proc/self/maps") if "/libopenblas" in ln})
    try:  # the kernel Debian's OpenBLAS (which modattn links) picked, where this process loaded it
        if not loaded:
            raise OSError("not loaded in this process")
        ob = ctypes.CDLL(loaded[0])
        ob.openblas_get_corename.restype = ctypes.c_char_p
        info["openblas_core"] = f"{ob.openblas_get_corename().decode()} ({Path(loaded[0]).name})"
    except (OSError, AttributeError) as e:
        info["openblas_core"] = f"({e})"
    try:
        import threadpoolctl
        info["threadpools"] = [{k: p.get(k) for k in ("internal_api", "architecture", "num_threads", "version", "filepath")}
                               for p in threadpoolctl.threadpool_info()]
    except ImportError:
        pass
    first = enc()
    enc()
    walls, cpus = [], []
    for _ in range(args.reps):
        t0, c0 = time.perf_counter(), time.process_time()
        enc()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    if args.worker == "st":
        d = first.to_dense() if hasattr(first, "to_dense") else first
        vecs = []
        for i in range(d.shape[0]):
            nz = d[i].nonzero().flatten().tolist()
            vecs.append({str(k): float(d[i, k]) for k in nz})
    else:
        vecs = [{str(k): float(w) for k, w in v.items()} for v in first]
    Path(args.out).write_text(json.dumps({"walls": walls, "cpus": cpus, "vecs": vecs, "info": info}))
    return 0


def agree(a: list[dict], b: list[dict]) -> dict:
    """modattn's vectors a against sentence-transformers' b."""
    set_diff, bad, max_abs, max_rel, terms = 0, 0, 0.0, 0.0, 0
    for x, y in zip(a, b):
        if set(x) != set(y):
            set_diff += 1
        for k in set(x) & set(y):
            d = abs(x[k] - y[k])
            terms += 1
            max_abs = max(max_abs, d)
            max_rel = max(max_rel, d / max(abs(y[k]), 1e-30))
            if d > RTOL * abs(y[k]) + ATOL:
                bad += 1
    return {"texts": len(b), "texts_with_other_nonzero_ids": set_diff, "weights_compared": terms,
            "weights_outside_tolerance": bad, "max_abs_diff": max_abs, "max_rel_diff": max_rel,
            "ok": len(a) == len(b) and set_diff == 0 and bad == 0}


def onednn_kernel(model: Path, env: dict) -> str:
    exe = REPO / "build" / "modattn"
    p = subprocess.run([str(exe), "embed", "--sparse", "--model", str(model), "-"], input="warm up\n",
                       capture_output=True, text=True, env=dict(env, ONEDNN_VERBOSE="1"), timeout=120)
    kinds = sorted({ln.split(",")[4] for ln in (p.stdout + p.stderr).splitlines()
                    if ln.startswith("onednn_verbose,exec,cpu,matmul,")})
    return ", ".join(kinds) or "(no oneDNN matmul seen)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=REPO / ".models" / "splade-tiny")
    ap.add_argument("--lines", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--worker", choices=["st", "modattn"], help=argparse.SUPPRESS)
    ap.add_argument("--texts", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.model = args.model.absolute()
    if args.worker:
        return worker(args)

    lines = [ln for ln in eb.CORPUS.read_text(encoding="utf-8").splitlines()][:args.lines]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=512)
    n_tok = sum(len(e.ids) for e in tok.encode_batch(lines))
    env = eb.child_env(args.threads)
    load_start = os.getloadavg()
    names = ["st", "modattn"]
    res = {k: {"walls": [], "cpus": [], "busy_before": [], "load1": []} for k in names}
    outs = {}
    with tempfile.TemporaryDirectory(prefix="sparse_bench.") as td:
        tf = Path(td) / "texts.txt"
        tf.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for r in range(args.rounds):
            for k in (names if r % 2 == 0 else names[::-1]):
                busy = eb.cpu_busy_fraction(2.0)
                res[k]["busy_before"].append(round(busy, 3))
                res[k]["load1"].append(round(os.getloadavg()[0], 2))
                out = Path(td) / f"{k}_{r}.json"
                cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", k, "--texts", str(tf), "--out", str(out),
                       "--model", str(args.model), "--reps", str(args.reps), "--threads", str(args.threads)]
                p = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    print(p.stdout[-2000:], p.stderr[-4000:], file=sys.stderr)
                    raise SystemExit(f"sparse_bench: the {k} worker failed (exit {p.returncode})")
                o = json.loads(out.read_text())
                res[k]["walls"] += o["walls"]
                res[k]["cpus"] += o["cpus"]
                outs[k] = o
                print(f"sparse_bench: round {r + 1} {k}: wall {['%.2f' % x for x in o['walls']]} s, "
                      f"CPU {['%.2f' % x for x in o['cpus']]} s (others' CPU use before {busy:.0%})", file=sys.stderr)
    chk = agree(outs["modattn"]["vecs"], outs["st"]["vecs"])
    load_end = os.getloadavg()
    kern = onednn_kernel(args.model, env)
    summ = {}
    for k in names:
        w, c = statistics.median(res[k]["walls"]), statistics.median(res[k]["cpus"])
        summ[k] = {"wall_s": w, "cpu_s": c, "texts_per_s": len(lines) / w, "texts_per_cpu_s": len(lines) / c,
                   "tokens_per_s": n_tok / w, "tokens_per_cpu_s": n_tok / c, "calls": len(res[k]["walls"])}
    r_cpu = summ["st"]["cpu_s"] / summ["modattn"]["cpu_s"]
    r_wall = summ["st"]["wall_s"] / summ["modattn"]["wall_s"]
    cpu = eb.cpu_model()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    import importlib.metadata as md
    vers = ", ".join(f"{p} {md.version(p)}" for p in ("sentence-transformers", "transformers", "torch", "numpy"))
    st_pools = "; ".join(sorted(set(f"{p['internal_api']} {p.get('architecture') or ''} ({Path(p['filepath']).name})".replace("  ", " ")
                         for p in outs["st"]["info"].get("threadpools", []))))
    ma_pools = "; ".join(f"{p['internal_api']} {p.get('architecture') or ''} ({Path(p['filepath']).name})".replace("  ", " ")
                         for p in outs["modattn"]["info"].get("threadpools", []))
    label = {"st": "sentence-transformers SparseEncoder", "modattn": "modattn.SparseEncoder"}
    shown_model = args.model.relative_to(REPO) if args.model.is_relative_to(REPO) else args.model
    L = [MARK, "", f"## Sparse encoding (SPLADE): {shown_model.name}, {len(lines)} texts, CPU — measured {when}", "",
         f"Made by `bench/.venv/bin/python bench/sparse_bench.py --model {shown_model} --lines {args.lines} "
         f"--rounds {args.rounds} --reps {args.reps} --threads {args.threads}` (its docstring has the method): the first "
         f"{len(lines)} lines of bench/corpus_sentences.txt ({n_tok} word pieces incl. specials), encode(texts, "
         f"batch_size=32) with each system, each in its own process, {args.threads} threads; {args.rounds} rounds "
         f"(order alternating) x {args.reps} timed calls after 2 warm-up calls; medians over the "
         f"{summ['st']['calls']} calls. CPU s = user + system time of the whole process during the call.", "",
         f"Agreement (checked first): {chk['texts']} texts, {'the same' if chk['texts_with_other_nonzero_ids'] == 0 else 'DIFFERENT'} "
         f"non-zero token ids in every text ({chk['texts_with_other_nonzero_ids']} differ), {chk['weights_compared']} weights, "
         f"{chk['weights_outside_tolerance']} outside 1e-5 rel + 5e-6 abs; max abs diff {chk['max_abs_diff']:.2e}, "
         f"max rel diff {chk['max_rel_diff']:.2e}.", "",
         "| system | wall s (median) | CPU s (median) | texts/s | word pieces/s | word pieces per CPU s | "
         "vs sentence-transformers, by CPU time | by wall time |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k in names:
        s = summ[k]
        rc = summ["st"]["cpu_s"] / s["cpu_s"]
        rw = summ["st"]["wall_s"] / s["wall_s"]
        L.append(f"| {label[k]} | {s['wall_s']:.3f} | {s['cpu_s']:.3f} | {s['texts_per_s']:.0f} | {s['tokens_per_s']:.0f} | "
                 f"{s['tokens_per_cpu_s']:.0f} | {rc:.2f}x | {rw:.2f}x |")
    L += ["", f"Target (issue 39): >= 1.5x. Measured: **{r_cpu:.2f}x by CPU time, {r_wall:.2f}x by wall time**.", "",
          f"- Machine: {cpu}, {os.cpu_count()} logical CPUs, shared with other work: load average "
          f"{', '.join(f'{x:.2f}' for x in load_start)} at start, {', '.join(f'{x:.2f}' for x in load_end)} at end; "
          f"others' CPU use sampled before each child: st {res['st']['busy_before']}, modattn {res['modattn']['busy_before']}",
          f"- OPENBLAS_CORETYPE: `{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}`; OpenBLAS kernel in modattn's process "
          f"(Debian libopenblas.so.0, openblas_get_corename): `{outs['modattn']['info'].get('openblas_core')}`; modattn's "
          f"GEMMs: oneDNN `{kern}` (ONEDNN_VERBOSE on a one-line `modattn embed --sparse`); thread pools in modattn's "
          f"process: {ma_pools or '?'}",
          f"- sentence-transformers' process: torch CPU BLAS {outs['st']['info'].get('torch_blas')}; thread pools: "
          f"{st_pools or '?'}; libopenblas.so.0 kernel there: `{outs['st']['info'].get('openblas_core')}`",
          f"- Versions: {vers}; modattn from build/python; repository commit {commit}",
          "- Per-call figures: bench/results/sparse.json", ""]
    RES = BENCH / "results"
    md_path = RES / "rerank.md"
    old = md_path.read_text(encoding="utf-8") if md_path.exists() else ""
    head = old.split(MARK)[0].rstrip("\n")
    md_path.write_text((head + "\n\n" if head else "") + "\n".join(L), encoding="utf-8")
    (RES / "sparse.json").write_text(json.dumps({"summary": summ, "per_call": res, "agreement": chk,
                                                 "loadavg_start": load_start, "loadavg_end": load_end,
                                                 "texts": len(lines), "tokens": n_tok, "when": when,
                                                 "commit": commit}, indent=1) + "\n")
    print("\n".join(L))
    if not chk["ok"]:
        print("sparse_bench: the outputs DISAGREE (see the agreement line): the timing is not a fair comparison",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
