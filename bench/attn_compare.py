#!/usr/bin/env python3
"""modattn's CPU attention kernels (cpu_flash, cpu_blas) against PyTorch's CPU
scaled_dot_product_attention, in one run, on the same shapes and thread count.

    bench/.venv/bin/python bench/attn_compare.py [--threads 2] [--quick] [--min-time 0.5]
        [--reps 7] [--shape B,H,S,D[,c]]... [--out-md bench/results/attn.md] [--out-png ...]

Per shape it runs, as separate processes and alternating which goes first (torch first on even
shape indices, modattn first on odd ones) so background load hits both alike:
  modattn: build/modattn --threads T bench attn --backend cpu_flash,cpu_blas
           --shape B,H,H,S,S,D [--causal] --min-time SEC --json     (median ms of >= SEC of calls)
  torch:   bench/torch_sdpa.py --threads T --reps N B,H,S,D[,c]      (median ms of N calls)
FLOPs for both: 4*B*H*S^2*D, halved when causal.

Timing: both tools report wall-clock medians per call. torch_sdpa.py also reports the process CPU
time per call (summed over threads), shown as "torch CPU ms". modattn's bench reports wall time
only, so for modattn only the whole process's CPU time is known (getrusage of the child: includes
start-up, warm-up and validation); each process's CPU use as a share of wall x T is listed as a
load indicator (well below 100% means the cores were busy with other work).

Ratio = modattn GFLOP/s / torch GFLOP/s (= torch ms / modattn ms; > 1: modattn faster).
% peak = GFLOP/s / (FMA peak for T threads), the peak from build/bench/peak_flops run once at the
start (its per-CPU-second figures: the hardware's peak, not lowered by other users' load; its
wall-clock figures are printed in the header to show how loaded the machine was).

Writes a markdown table (--out-md) and a grouped bar chart of GFLOP/s per shape (--out-png).
"""
import argparse
import datetime
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT_SHAPES = [
    (1, 12, 1024, 64, False),
    (1, 12, 1024, 64, True),
    (1, 8, 2048, 64, False),
    (1, 8, 1024, 128, False),
    (1, 8, 2048, 128, False),
    (1, 8, 2048, 128, True),
    (32, 12, 128, 32, False),
    (4, 12, 512, 64, False),
]
QUICK_SHAPES = [
    (1, 12, 1024, 64, False),
    (1, 8, 2048, 128, True),
    (32, 12, 128, 32, False),
]
BACKENDS = ["cpu_flash", "cpu_blas"]


def parse_shape(text):
    parts = text.split(",")
    if len(parts) not in (4, 5) or (len(parts) == 5 and parts[4] != "c"):
        raise argparse.ArgumentTypeError(f"bad shape '{text}' (want B,H,S,D[,c])")
    b, h, s, d = (int(p) for p in parts[:4])
    return b, h, s, d, len(parts) == 5


def shape_label(sh):
    b, h, s, d, c = sh
    return f"{b},{h},{s},{d}" + (" causal" if c else "")


def flops(sh):
    b, h, s, d, c = sh
    return 4.0 * b * h * s * s * d * (0.5 if c else 1.0)


def run_child(cmd, env=None):
    """Run cmd; return (returncode, stdout, stderr, wall_s, cpu_s of the child)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return p.returncode, p.stdout, p.stderr, wall, cpu


def run_peak(path, threads):
    rc, out, err, _, _ = run_child([path, "0.3", str(threads)])
    if rc != 0:
        raise SystemExit(f"{path} failed (rc {rc}): {err.strip()}")
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"{path}: no JSON summary line in its output:\n{out}")
    peak = json.loads(lines[-1])
    # Peak for T threads by CPU-second (hardware peak). The probe's all-core run used `threads`.
    if threads == 1:
        peak["peak_T_cpu"] = peak["gflops_1thread_cpu"]
        peak["peak_T_wall"] = peak["gflops_1thread"]
    else:
        peak["peak_T_cpu"] = peak["gflops_all_cpu"]
        peak["peak_T_wall"] = peak["gflops_all"]
    return peak


def run_modattn(exe, sh, threads, min_time):
    b, h, s, d, c = sh
    cmd = [exe, "--threads", str(threads), "bench", "attn", "--backend", ",".join(BACKENDS),
           "--shape", f"{b},{h},{h},{s},{s},{d}"] + (["--causal"] if c else []) + \
          ["--min-time", str(min_time), "--json"]
    rc, out, err, wall, cpu = run_child(cmd)
    res = {"cmd": cmd, "rc": rc, "wall_s": wall, "cpu_s": cpu, "err": err.strip(), "by_backend": {}}
    if rc == 0:
        try:
            doc = json.loads(out)
            res["cpu_model"] = doc.get("cpu")
            for r in doc["results"]:
                res["by_backend"][r["backend"]] = r
        except (ValueError, KeyError) as e:
            res["err"] = f"unparsable output ({e}): {out[:300]} {err[:300]}"
    return res


def run_torch(python, sh, threads, reps):
    b, h, s, d, c = sh
    cmd = [python, os.path.join("bench", "torch_sdpa.py"), "--threads", str(threads), "--reps", str(reps),
           f"{b},{h},{s},{d}" + (",c" if c else "")]
    rc, out, err, wall, cpu = run_child(cmd)
    res = {"cmd": cmd, "rc": rc, "wall_s": wall, "cpu_s": cpu, "err": err.strip(), "r": None}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if lines:
        res["r"] = json.loads(lines[-1])
    return res


def fmt(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="3-shape subset")
    ap.add_argument("--shape", type=parse_shape, action="append", help="B,H,S,D[,c] (repeatable; replaces the list)")
    ap.add_argument("--min-time", type=float, default=0.5, help="modattn --min-time per backend and shape")
    ap.add_argument("--reps", type=int, default=7, help="torch_sdpa.py timed calls per shape")
    ap.add_argument("--modattn", default=os.path.join(ROOT, "build", "modattn"))
    ap.add_argument("--peak-probe", default=os.path.join(ROOT, "build", "bench", "peak_flops"))
    ap.add_argument("--out-md", default=os.path.join(ROOT, "bench", "results", "attn.md"))
    ap.add_argument("--out-png", default=os.path.join(ROOT, "bench", "results", "attn.png"))
    args = ap.parse_args()

    shapes = args.shape or (QUICK_SHAPES if args.quick else DEFAULT_SHAPES)
    T = args.threads
    for p in (args.modattn, args.peak_probe):
        if not os.access(p, os.X_OK):
            raise SystemExit(f"{p} not found: build it (cmake --build build -j2)")

    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT)
                                                 else sys.executable, os.path.relpath(os.path.abspath(__file__), ROOT)]
                       + sys.argv[1:])
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()
    cpu_model = "?"
    with open("/proc/cpuinfo") as f:
        for ln in f:
            if ln.startswith("model name"):
                cpu_model = ln.split(":", 1)[1].strip()
                break
    ncpu = os.cpu_count()

    print(f"peak probe: {args.peak_probe} 0.3 {T}", file=sys.stderr)
    peak = run_peak(args.peak_probe, T)
    print(f"  per core {peak['gflops_1thread_cpu']:.1f} GFLOP/s per CPU-s, {T} threads {peak['peak_T_cpu']:.1f} "
          f"(wall clock {peak['gflops_1thread']:.1f} / {peak['peak_T_wall']:.1f})", file=sys.stderr)

    rows = []
    torch_version = None
    for i, sh in enumerate(shapes):
        order = ["torch", "modattn"] if i % 2 == 0 else ["modattn", "torch"]
        got = {}
        for who in order:
            if who == "torch":
                got["torch"] = run_torch(sys.executable, sh, T, args.reps)
            else:
                got["modattn"] = run_modattn(args.modattn, sh, T, args.min_time)
        t, m = got["torch"], got["modattn"]
        if t["r"]:
            torch_version = t["r"].get("torch", torch_version)
        row = {"shape": sh, "order": order, "torch": t, "modattn": m}
        rows.append(row)
        msg = [f"[{i + 1}/{len(shapes)}] {shape_label(sh)} ({' then '.join(order)}):"]
        if t["r"]:
            msg.append(f"torch {t['r']['median_ms']:.2f} ms {t['r']['gflops']:.1f} GF/s")
        else:
            msg.append(f"torch FAILED rc={t['rc']} {t['err'][-200:]}")
        for bk in BACKENDS:
            r = m["by_backend"].get(bk)
            msg.append(f"{bk} {r['ms']:.2f} ms {r['gflops']:.1f} GF/s" + ("" if r.get("valid") else " INVALID")
                       if r else f"{bk} FAILED rc={m['rc']} {m['err'][-200:]}")
        print("  ".join(msg), file=sys.stderr)
        sys.stdout.flush()

    load_after = os.getloadavg()
    finished = datetime.datetime.now(datetime.timezone.utc)
    pk = peak["peak_T_cpu"]

    # ---- markdown ----
    L = []
    L.append("# Attention kernels: modattn (cpu_flash, cpu_blas) vs PyTorch SDPA on the CPU\n")
    L.append(f"- Command: `{command}`")
    L.append(f"- Date: {started:%Y-%m-%d %H:%M:%S} – {finished:%H:%M:%S} UTC")
    L.append(f"- CPU: {cpu_model} ({ncpu} logical CPUs, /proc/cpuinfo)")
    L.append(f"- Threads: {T} for both (`modattn --threads {T}`, `torch_sdpa.py --threads {T}` = torch.set_num_threads)")
    L.append(f"- torch {torch_version or '?'} (backend auto: PyTorch picks its CPU flash kernel), fp32, "
             f"contiguous [B, H, S, D], Hq = Hkv = H, Sq = Sk = S")
    L.append(f"- OPENBLAS_CORETYPE: `{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}`, "
             f"OPENBLAS_NUM_THREADS: `{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}`, "
             f"OMP_NUM_THREADS: `{os.environ.get('OMP_NUM_THREADS', '(unset)')}`")
    L.append(f"- Load average before: {', '.join(f'{x:.2f}' for x in load_before)}; "
             f"after: {', '.join(f'{x:.2f}' for x in load_after)}")
    L.append(f"- Peak (`{os.path.relpath(args.peak_probe, ROOT)} 0.3 {T}`, run once at the start, ISA {peak['isa']}): "
             f"{peak['gflops_1thread_cpu']:.1f} GFLOP/s per core and {peak['peak_T_cpu']:.1f} GFLOP/s on {T} threads "
             f"per CPU-second (used for % peak); by the wall clock {peak['gflops_1thread']:.1f} and "
             f"{peak['peak_T_wall']:.1f} GFLOP/s at that moment")
    if T > 1 and peak["peak_T_wall"] < 0.75 * peak["peak_T_cpu"]:
        L.append(f"- Note: the probe's {T}-thread wall-clock figure ({peak['peak_T_wall']:.1f}) is only "
                 f"{100 * peak['peak_T_wall'] / peak['peak_T_cpu']:.0f}% of its per-CPU-second figure: when it ran, "
                 f"the {T} threads got about {T * peak['peak_T_wall'] / peak['peak_T_cpu']:.1f} cores' worth of time. "
                 "% peak below is against the full hardware peak, so it understates efficiency on the cores "
                 "actually obtained")
    L.append("")
    L.append(f"**This machine is shared and noisy**: other jobs were running (load average above {ncpu} on "
             f"{ncpu} CPUs means the cores were oversubscribed), so wall-clock figures understate what the kernels do "
             "on idle cores and vary from run to run; modattn and torch were run alternately per shape so the "
             "load hits both alike, and the ratios (same run, adjacent in time) are more trustworthy than the "
             "absolute numbers.\n")
    L.append("Times are wall-clock medians per call: modattn over ≥ "
             f"{args.min_time} s of calls per backend, torch over {args.reps} calls (after 2 warm-up calls). "
             "GFLOP/s = 4·B·H·S²·D / time (halved when causal). "
             "Ratio = modattn GFLOP/s ÷ torch GFLOP/s (> 1: modattn faster). "
             f"% peak = GFLOP/s ÷ {pk:.1f} (FMA peak on {T} threads).\n")
    L.append("| shape B,H,S,D | causal | torch ms | torch GFLOP/s | cpu_flash ms | cpu_flash GFLOP/s | "
             "cpu_flash / torch | cpu_flash % peak | cpu_blas ms | cpu_blas GFLOP/s | cpu_blas / torch | "
             "cpu_blas % peak |")
    L.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        b, h, s, d, c = row["shape"]
        tr = row["torch"]["r"]
        tg = tr["gflops"] if tr else None
        cells = [f"{b},{h},{s},{d}", "yes" if c else "no", fmt(tr["median_ms"], 2) if tr else "failed", fmt(tg)]
        for bk in BACKENDS:
            r = row["modattn"]["by_backend"].get(bk)
            if not r:
                cells += ["failed", "—", "—", "—"]
                continue
            mark = "" if r.get("valid") else " (INVALID)"
            cells += [fmt(r["ms"], 2) + mark, fmt(r["gflops"]),
                      f"{r['gflops'] / tg:.2f}" if tg else "—", f"{100 * r['gflops'] / pk:.0f}%"]
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append("## CPU time and load per shape\n")
    L.append("modattn's `bench attn` reports wall-clock time only, so there is no per-call CPU time for "
             "modattn; torch_sdpa.py measures the process CPU time per call (all threads), given here as "
             "torch CPU ms. For both, the CPU time of the whole child process (start-up, warm-up, validation "
             f"and timing) is shown as a share of its wall time × {T} threads: well under 100% means other "
             "work held the cores during that process.\n")
    L.append("| shape | order | torch CPU ms / call | torch GFLOP/s per CPU-s | torch process CPU use | "
             "modattn process CPU use | modattn reps (flash, blas) | modattn max abs err (flash, blas) |")
    L.append("| --- | --- | ---: | ---: | ---: | ---: | --- | --- |")
    for row in rows:
        t, m = row["torch"], row["modattn"]
        tr = t["r"]
        tcpu = tr.get("gflops_per_core_cpu") if tr else None
        tcpu_ms = flops(row["shape"]) / tcpu * 1e-6 if tcpu else None
        util = lambda x: f"{100 * x['cpu_s'] / (x['wall_s'] * T):.0f}%" if x["wall_s"] > 0 else "—"
        reps = ", ".join(str(m["by_backend"].get(bk, {}).get("reps", "—")) for bk in BACKENDS)
        errs = ", ".join((f"{m['by_backend'][bk]['max_abs_error']:.1e}" if bk in m["by_backend"] else "—")
                         for bk in BACKENDS)
        L.append(f"| {shape_label(row['shape'])} | {' → '.join(row['order'])} | {fmt(tcpu_ms, 2)} | {fmt(tcpu)} | "
                 f"{util(t)} | {util(m)} | {reps} | {errs} |")
    L.append("")
    L.append(f"GFLOP/s per CPU-second for torch is FLOPs ÷ CPU time of all {T} threads, i.e. per core; compare "
             f"with the per-core peak {peak['gflops_1thread_cpu']:.1f}.")
    failures = [(shape_label(r["shape"]), r) for r in rows
                if not r["torch"]["r"] or any(bk not in r["modattn"]["by_backend"] for bk in BACKENDS)]
    if failures:
        L.append("\n## Failures\n")
        for lab, r in failures:
            if not r["torch"]["r"]:
                L.append(f"- {lab}: torch rc {r['torch']['rc']}: `{r['torch']['err'][-300:]}`")
            if any(bk not in r["modattn"]["by_backend"] for bk in BACKENDS):
                L.append(f"- {lab}: modattn rc {r['modattn']['rc']}: `{r['modattn']['err'][-300:]}`")
    os.makedirs(os.path.dirname(args.out_md), exist_ok=True)
    with open(args.out_md, "w") as f:
        f.write("\n".join(L) + "\n")
    print(f"wrote {args.out_md}", file=sys.stderr)

    # ---- chart ----
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [shape_label(r["shape"]).replace(" causal", "\ncausal") for r in rows]
    series = [("torch SDPA", [r["torch"]["r"]["gflops"] if r["torch"]["r"] else np.nan for r in rows])]
    for bk in BACKENDS:
        series.append((f"modattn {bk}", [r["modattn"]["by_backend"][bk]["gflops"]
                                         if bk in r["modattn"]["by_backend"] else np.nan for r in rows]))
    x = np.arange(len(rows))
    w = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(7, 1.3 * len(rows) + 2), 4.8))
    for j, (name, vals) in enumerate(series):
        bars = ax.bar(x + (j - (len(series) - 1) / 2) * w, vals, w, label=name)
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.axhline(pk, color="grey", linestyle="--", linewidth=1)
    ax.text(len(rows) - 0.5, pk, f"FMA peak, {T} threads ({pk:.0f})", ha="right", va="bottom", fontsize=8,
            color="grey")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel("shape B,H,S,D (Hq = Hkv = H, Sq = Sk = S), fp32")
    ax.set_ylabel("GFLOP/s (wall clock, median)")
    ax.set_ylim(0, max(pk, np.nanmax([v for _, vals in series for v in vals] + [0])) * 1.12)
    ax.set_title(f"CPU attention, {T} threads, {cpu_model} (shared machine; load "
                 f"{load_before[0]:.1f} → {load_after[0]:.1f}), {started:%Y-%m-%d}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out_png, dpi=120)
    print(f"wrote {args.out_png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
