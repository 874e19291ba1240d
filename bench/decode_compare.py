#!/usr/bin/env python3
"""Decode-shaped attention (issue 15 part 7): one query row per head over a long key/value cache,
GQA 8:1, modattn's cpu_flash against PyTorch's CPU scaled_dot_product_attention(enable_gqa=True),
in one run, same shapes and threads, with the memory-streaming ceiling measured in the same run.

    bench/.venv/bin/python bench/decode_compare.py [--threads 2] [--min-time 0.5] [--reps 200]
        [--out-md bench/results/decode.md]

Shapes: B = 1, Sq = 1, D = Dv = 128, (Hq, Hkv) in (32, 4) and (8, 1), Sk in 1k, 4k, 8k, 16k, 32k;
and, for reference, multi-head decode (32, 32) at 1k and 4k keys.
Per shape, alternating which goes first:
  modattn: build/modattn --threads T bench attn --backend cpu_flash --shape 1,Hq,Hkv,1,Sk,128
           --min-time SEC --json   (median ms; the result is validated against the reference)
  torch:   F.scaled_dot_product_attention(q, k, v, enable_gqa=True) in this process,
           torch.set_num_threads(T), median of --reps calls after 10 warm-up calls
Both see the same cache sizes; neither keeps the K/V between calls any differently (both re-read
them from wherever the previous call left them: at 1k-4k keys that is the L2/L3 caches).

Ceiling: a decode call must read K and V once, 2 * Hkv * Sk * D * 4 bytes, so its time is at least
those bytes over the memory bandwidth. The bandwidth is measured here, before and after the
shapes, as torch.sum over a 512 MiB float32 tensor on T threads (median of 7); "% of stream" is
the call's K+V bytes per second over it (above 100% where the cache holds K and V).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(hq, hkv, sk) for hq, hkv in ((32, 4), (8, 1)) for sk in (1024, 4096, 8192, 16384, 32768)]
# Not the target (GQA 8:1 is), for reference: multi-head decode, one query row per kv head (the
# 16-slice kernel), where both read 33.5 MB of K and V at 1k keys.
MHA_SHAPES = [(32, 32, 1024), (32, 32, 4096)]
D = 128
KERNELS = {}  # (hq, hkv, sk) -> the kernel modattn bench says cpu_flash ran


def stream_gbps(torch, threads):
    x = torch.ones(128 * 1024 * 1024, dtype=torch.float32)  # 512 MiB
    ts = []
    for _ in range(8):
        t0 = time.perf_counter()
        x.sum()
        ts.append(time.perf_counter() - t0)
    return x.numel() * 4 / statistics.median(ts[1:]) / 1e9


def run_modattn(exe, threads, hq, hkv, sk, min_time):
    cmd = [exe, "--threads", str(threads), "bench", "attn", "--backend", "cpu_flash", "--shape",
           f"1,{hq},{hkv},1,{sk},{D}", "--min-time", str(min_time), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"decode_compare: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    r = json.loads(p.stdout)["results"][0]
    if not r.get("valid", False):
        raise SystemExit(f"decode_compare: modattn's result at {hq},{hkv},{sk} did not validate: {r}")
    KERNELS[(hq, hkv, sk)] = r.get("kernel", "?")
    return r["ms"]


def run_torch(torch, hq, hkv, sk, reps):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, hq, 1, D, generator=g)
    k = torch.randn(1, hkv, sk, D, generator=g)
    v = torch.randn(1, hkv, sk, D, generator=g)
    for _ in range(10):
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--modattn", default=os.path.join(ROOT, "build", "modattn"))
    ap.add_argument("--out-md", default=os.path.join(ROOT, "bench", "results", "decode.md"))
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    bw0 = stream_gbps(torch, a.threads)
    rows = []
    for n, (hq, hkv, sk) in enumerate(SHAPES + MHA_SHAPES):
        if n % 2 == 0:
            t_ms = run_torch(torch, hq, hkv, sk, a.reps)
            m_ms = run_modattn(a.modattn, a.threads, hq, hkv, sk, a.min_time)
        else:
            m_ms = run_modattn(a.modattn, a.threads, hq, hkv, sk, a.min_time)
            t_ms = run_torch(torch, hq, hkv, sk, a.reps)
        kv_bytes = 2 * hkv * sk * D * 4
        rows.append((hq, hkv, sk, kv_bytes, m_ms, t_ms))
        print(f"decode_compare: Hq={hq} Hkv={hkv} Sk={sk}: modattn {m_ms:.3f} ms, torch {t_ms:.3f} ms "
              f"({t_ms / m_ms:.2f}x)", file=sys.stderr)
    bw1 = stream_gbps(torch, a.threads)
    bw = max(bw0, bw1)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    L = ["# Decode attention: one query row per head over a long cache (GQA 8:1)", "",
         "Made by `bench/decode_compare.py` (its docstring has the method): modattn's `cpu_flash` (its "
         "sliced decode kernel: each of a kv head's 8 query rows gets 2 of the 16 lanes; split-KV over "
         "512-key ranges, merged through the log-sum-exp) against PyTorch's "
         "`scaled_dot_product_attention(enable_gqa=True)` on the CPU, same shapes, "
         f"{a.threads} threads each, medians, in one run. B = 1, Sq = 1, D = Dv = {D}, fp32.", "",
         f"Memory streaming ceiling, measured in the same run (torch.sum over 512 MiB, {a.threads} threads): "
         f"{bw0:.1f} GB/s before the shapes, {bw1:.1f} after; \"% of stream\" uses {bw:.1f}.", "",
         "| Hq | Hkv | Sk | K+V MB | modattn ms | torch ms | modattn vs torch | modattn GB/s of K+V | % of stream |",
         "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n, (hq, hkv, sk, kvb, m, t) in enumerate(rows):
        if n == len(SHAPES):
            L += ["", "For reference, not the target: multi-head decode (Hq = Hkv, one query row per kv head), "
                  "where both mostly wait on memory.", "",
                  "| Hq | Hkv | Sk | K+V MB | modattn ms | torch ms | modattn vs torch | modattn GB/s of K+V | % of stream |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        gbs = kvb / (m / 1e3) / 1e9
        L.append(f"| {hq} | {hkv} | {sk} | {kvb / 1e6:.1f} | {m:.3f} | {t:.3f} | **{t / m:.2f}x** | {gbs:.1f} | "
                 f"{gbs / bw:.0%} |")
    L += ["", "Kernels (`modattn bench attn --json`'s `kernel`, which cpu_flash reports):", ""]
    L += [f"- Hq {hq}, Hkv {hkv}, {sk} keys: {KERNELS.get((hq, hkv, sk), '?')}" for hq, hkv, sk, *_ in rows]
    L += ["", f"- CPU: {cpu}; torch {torch.__version__}; repository commit {commit}; measured "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", ""]
    os.makedirs(os.path.dirname(a.out_md), exist_ok=True)
    with open(a.out_md, "w") as f:
        f.write("\n".join(L))
    print("\n".join(L))


if __name__ == "__main__":
    main()
