#!/usr/bin/env python3
"""PyTorch's CPU scaled_dot_product_attention on given shapes, as the baseline for modattn's CPU
kernels (bench/attn_kernels.c prints the same metric for ours).

    bench/.venv/bin/python bench/torch_sdpa.py [--threads 2] [--reps 7] [--backend auto|flash|math] \
        B,H,S,D[,c] ...          (Hq = Hkv = H, Sq = Sk = S; ",c": causal)

fp32, contiguous [B, H, S, D] tensors from torch.randn, torch.set_num_threads(--threads).
Each shape: 2 warm-up calls, then --reps timed calls; prints one JSON object per line with the
median and minimum milliseconds and GFLOP/s counted as 4*B*H*S^2*D (halved when causal), the
FlashAttention convention. GFLOP/s per CPU-second of the process is printed too: on a machine
shared with other work the wall clock also counts time the cores spent elsewhere.
--backend flash/math pins torch.nn.attention.sdpa_kernel to FLASH_ATTENTION / MATH (auto lets
PyTorch choose; on the CPU it picks its flash kernel for these inputs).
"""
import argparse
import json
import statistics
import sys
import time


def parse_shape(text):
    parts = text.split(",")
    if len(parts) not in (4, 5) or (len(parts) == 5 and parts[4] != "c"):
        raise argparse.ArgumentTypeError(f"bad shape '{text}' (want B,H,S,D[,c])")
    b, h, s, d = (int(p) for p in parts[:4])
    return b, h, s, d, len(parts) == 5


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shapes", nargs="+", type=parse_shape)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--backend", choices=["auto", "flash", "math"], default="auto")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ctx = None
    if args.backend != "auto":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = SDPBackend.FLASH_ATTENTION if args.backend == "flash" else SDPBackend.MATH

    for (b, h, s, d, causal) in args.shapes:
        q = torch.randn(b, h, s, d, dtype=torch.float32)
        k = torch.randn(b, h, s, d, dtype=torch.float32)
        v = torch.randn(b, h, s, d, dtype=torch.float32)

        def call():
            if ctx is None:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            with sdpa_kernel(ctx):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        with torch.inference_mode():
            ref = call()
            call()
            ms, cpu_ms = [], []
            for _ in range(args.reps):
                c0, t0 = time.process_time(), time.perf_counter()
                out = call()
                ms.append((time.perf_counter() - t0) * 1e3)
                cpu_ms.append((time.process_time() - c0) * 1e3)
            # validate: a few rows against an fp64 computation
            rows = [0, s // 2, s - 1]
            qd, kd, vd = q[0, 0].double(), k[0, 0].double(), v[0, 0].double()
            sc = qd[rows] @ kd.T / d ** 0.5
            if causal:
                idx = torch.arange(s)
                sc = sc.masked_fill(idx[None, :] > torch.tensor(rows)[:, None], float("-inf"))
            want = torch.softmax(sc, dim=-1) @ vd
            err = (out[0, 0, rows].double() - want).abs().max().item()
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        med, cmed = statistics.median(ms), statistics.median(cpu_ms)
        print(json.dumps({
            "impl": f"torch_sdpa_{args.backend}", "torch": torch.__version__, "B": b, "H": h, "S": s, "D": d,
            "causal": causal, "threads": args.threads, "median_ms": round(med, 4), "min_ms": round(min(ms), 4),
            "gflops": round(flops / med * 1e-6, 2),
            "gflops_per_core_cpu": round(flops / cmed * 1e-6, 2) if cmed > 0 else None,
            "max_err": err}))
        sys.stdout.flush()
        if not err < 1e-4:
            print(f"result check failed for {b},{h},{s},{d}: max err {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
