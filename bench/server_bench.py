"""bench/server_bench.py — `modattn serve` against an anchor server on this machine, same model
directory, same CPU, same load: requests/s and p50/p99 latency at 1, 8 and 64 concurrent clients
with 1 and 32 inputs per request (OpenAI embeddings requests of sentences from
bench/corpus_sentences.txt, a different body each request), driven by wrk (bench/server_wrk.lua).

The anchor is infinity-emb (PyPI, torch engine, CPU) when --infinity names its `infinity_emb`
executable, else sentence-transformers behind uvicorn (--st-python: a python with
sentence-transformers, fastapi and uvicorn; bench/server_st_anchor.py). Servers run one at a time
(never both: they would share the two cores), in rounds A B A B ...; each figure is the median of
the rounds. Writes bench/results/server.md and server.png.

  python bench/server_bench.py --bin build/modattn --model .models/all-MiniLM-L6-v2 \
      --infinity /path/to/venv/bin/infinity_emb [--seconds 15] [--rounds 2]
"""
import argparse
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def torch_version():
    """torch's version in the anchor's venv (beside its infinity_emb)."""
    try:
        import glob
        venv = os.path.dirname(os.path.dirname(ARGS.infinity))
        metas = glob.glob(os.path.join(venv, "lib/python*/site-packages/torch-*.dist-info"))
        return os.path.basename(metas[0])[len("torch-"):-len(".dist-info")] if metas else "?"
    except Exception:  # noqa: BLE001
        return "?"


ARGS = None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_http(url, proc, limit=600):
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.time() - t0
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server not ready: " + url)


def rss_kb(pid):
    """Resident memory of a process and its children (kB)."""
    total = 0
    pids = [pid]
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        pids += [int(p) for p in out]
    except OSError:
        pass
    for p in pids:
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


class Server:
    def __init__(self, name, cmd, health, path, env=None, log=None):
        self.name, self.health, self.path = name, health, path
        e = dict(os.environ)
        e.update(env or {})
        self.log = open(log or os.devnull, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=e, start_new_session=True)
        self.ready_s = wait_http(health, self.proc)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def run_wrk(url, inputs, conns, seconds, sentences, model):
    env = dict(os.environ, INPUTS=str(inputs), SENTENCES=sentences, MODEL=model)
    threads = min(2, conns)
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--timeout", "60s", "-s",
           os.path.join(HERE, "server_wrk.lua"), url]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env).stdout
    m = re.search(r"RESULT requests=(\d+) seconds=([\d.]+) p50_ms=([\d.]+) p99_ms=([\d.]+) errors=(\d+) statuses=(\S*)", out)
    if not m:
        raise RuntimeError("wrk gave no result: " + out[-2000:])
    req, secs, p50, p99, errs, sts = m.groups()
    return {"rps": int(req) / float(secs), "p50": float(p50), "p99": float(p99), "errors": int(errs), "statuses": sts}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build/modattn"))
    ap.add_argument("--model", default=os.path.join(REPO, ".models/all-MiniLM-L6-v2"))
    ap.add_argument("--infinity", help="infinity_emb executable (the anchor)")
    ap.add_argument("--st-python", help="python with sentence-transformers + fastapi + uvicorn (anchor without infinity)")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results/server.md"))
    ap.add_argument("--precisions", default="fp32,bf16x3",
                    help="modattn serve's --precision for each modattn configuration (default fp32,bf16x3; one "
                         "this CPU cannot run is left out, and the report says why)")
    ap.add_argument("--ceiling-only", action="store_true",
                    help="only the ceiling section: the FMA peak, modattn serve's sustained GFLOP/s and the GEMMs alone, replacing that section of --out")
    a = ap.parse_args()
    global ARGS
    ARGS = a
    sentences = os.path.join(HERE, "corpus_sentences.txt")
    model = os.path.abspath(a.model)
    ncpu = os.cpu_count()
    tmp = tempfile.mkdtemp(prefix="server-bench-")

    def start_modattn(precision="fp32"):
        port = free_port()
        return Server("modattn serve", [a.bin, "--precision", precision, "serve", "--model", model, "--port", str(port),
                                        "--quiet"],
                      f"http://127.0.0.1:{port}/health", f"http://127.0.0.1:{port}/v1/embeddings",
                      log=os.path.join(tmp, "modattn.log"))

    # the modattn configurations: one per precision this CPU runs (asked of the binary itself)
    precisions, refused = [], []
    for prec in [x for x in a.precisions.split(",") if x]:
        r = subprocess.run([a.bin, "--precision", prec, "embed", "--model", model, "probe"], capture_output=True, text=True)
        if r.returncode == 0:
            precisions.append(prec)
        else:
            refused.append(f"{prec}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'refused'}")
    mkeys = [f"modattn serve ({p})" for p in precisions]

    def start_anchor():
        port = free_port()
        if a.infinity:
            env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1",
                   "INFINITY_ANONYMOUS_USAGE_STATS": "0", "OMP_NUM_THREADS": str(ncpu)}
            cmd = [a.infinity, "v2", "--model-id", model, "--served-model-name", "all-MiniLM-L6-v2", "--engine", "torch",
                   "--device", "cpu", "--port", str(port), "--host", "127.0.0.1", "--batch-size", "32", "--log-level", "warning"]
            return Server("infinity-emb", cmd, f"http://127.0.0.1:{port}/health", f"http://127.0.0.1:{port}/embeddings",
                          env=env, log=os.path.join(tmp, "anchor.log"))
        cmd = [a.st_python, os.path.join(HERE, "server_st_anchor.py"), model, str(port)]
        return Server("sentence-transformers + uvicorn", cmd, f"http://127.0.0.1:{port}/health",
                      f"http://127.0.0.1:{port}/v1/embeddings", env={"HF_HUB_OFFLINE": "1"},
                      log=os.path.join(tmp, "anchor.log"))

    if a.ceiling_only:
        # replaces the report's ceiling section (the rows above it stay)
        text = open(a.out).read() if os.path.exists(a.out) else ""
        cut = text.find("\n## The ceiling")
        rows = [(int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))) for m in
                re.finditer(r"^\| (\d+) \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \| [0-9.]+x \|", text, re.M)][:6]  # the first table (fp32)
        open(a.out, "w").write((text if cut < 0 else text[:cut]) + ceiling(a, start_modattn, sentences, rows))
        return
    if not a.infinity and not a.st_python:
        sys.exit("server_bench: name an anchor: --infinity PATH or --st-python PATH")
    configs = [(i, c) for i in (1, 32) for c in (1, 8, 64)]

    def seconds_for(inputs, conns):
        """Long enough for every client to be answered a few times: on 2 CPUs a request of 32
        sentences takes about half a second, so 64 such clients need a minute a round."""
        if inputs == 1:
            return a.seconds
        return {1: max(a.seconds, 20), 8: max(a.seconds, 45), 64: max(a.seconds, 150)}[conns]

    def drain(url):
        """wrk leaves requests in flight when it stops (their clients gone, the work not): wait
        until a one-text request comes back, i.e. the server has nothing queued before it."""
        body = json.dumps({"model": "all-MiniLM-L6-v2", "input": ["drain"]}).encode()
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=900) as r:
            r.read()
    results = {k: {} for k in mkeys + ["anchor"]}
    rss = {k: [] for k in mkeys + ["anchor"]}
    anchor_name = None
    ready = {}
    servers = [(k, (lambda p=p: start_modattn(p))) for k, p in zip(mkeys, precisions)] + [("anchor", start_anchor)]
    for rnd in range(a.rounds):
        for key, start in servers:
            srv = start()
            if key == "anchor":
                anchor_name = srv.name
            ready.setdefault(key, []).append(srv.ready_s)
            run_wrk(srv.path, 8, 8, 3, sentences, "all-MiniLM-L6-v2")  # warm-up
            drain(srv.path)
            for inputs, conns in configs:
                secs = seconds_for(inputs, conns)
                r = run_wrk(srv.path, inputs, conns, secs, sentences, "all-MiniLM-L6-v2")
                r["seconds"] = secs
                drain(srv.path)
                results[key].setdefault((inputs, conns), []).append(r)
                print(f"round {rnd + 1} {key if key != 'anchor' else srv.name:32s} inputs={inputs:2d} clients={conns:2d}: {r['rps']:8.1f} req/s "
                      f"p50 {r['p50']:8.1f} ms p99 {r['p99']:8.1f} ms statuses {r['statuses']} errors {r['errors']}",
                      flush=True)
            rss[key].append(rss_kb(srv.proc.pid))
            srv.stop()

    def med(key, cfg, field):
        return statistics.median(r[field] for r in results[key][cfg])

    cpu = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    lines = ["# `modattn serve` against " + anchor_name, "",
             f"Written by `bench/server_bench.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {ncpu} CPUs "
             f"({cpu}), OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, model "
             f"{os.path.basename(model)} from the same directory for both, CPU only. Load: wrk "
             f"(`bench/server_wrk.lua`), OpenAI embeddings requests of 1 or 32 sentences of "
             f"`bench/corpus_sentences.txt` (a different body each request), for {a.seconds} s per row with 1 input "
             f"and 20, 45 and 150 s with 32 inputs at 1, 8 and 64 clients (so that every client is answered "
             f"several times), after a 3 s warm-up; after each row the server is drained (a one-text request "
             f"waits behind what wrk left in flight) before the next; the servers ran one at a time, {a.rounds} rounds alternating, medians shown. wrk shares "
             f"the {ncpu} CPUs with the server under test, the same for both.",
             "", f"modattn serve: default options (`--threads` all CPUs, `--workers auto`: one executor per thread, "
             f"all threads on one batch when an executor is alone with a short queue; dynamic batching up to 8192 "
             f"tokens), once per precision: " + ", ".join(f"`--precision {p}`" for p in precisions) + "."
             + (" Left out: " + "; ".join(refused) + "." if refused else "")
             + " fp32 is the default and bit-exact; bf16x3 computes each fp32 product as three bfloat16 ones on "
             f"AMX (a_hi w_hi + a_hi w_lo + a_lo w_hi, summed in fp32): its vectors are within a cosine of 1 - 1e-9 "
             f"of fp32's (`tests/model/test_precision.c`), inside the project's exactness bar (0.99999 to "
             f"sentence-transformers), where bf16 (0.99993) is not. Anchor: {anchor_name}"
             + (" (`infinity_emb v2 --engine torch --device cpu --batch-size 32 --log-level warning`, torch " + torch_version() + ", fp32)"
                if a.infinity else " (`bench/server_st_anchor.py`)") + "."]
    met_all = {}
    for mk in mkeys:
        lines += ["", f"### {mk}", "",
                  "| inputs/request | clients | modattn req/s | anchor req/s | throughput ratio | modattn p50 ms | "
                  "anchor p50 ms | modattn p99 ms | anchor p99 ms | p99 ratio (modattn/anchor) |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        ratios = []
        for cfg in configs:
            m_rps, a_rps = med(mk, cfg, "rps"), med("anchor", cfg, "rps")
            m_p99, a_p99 = med(mk, cfg, "p99"), med("anchor", cfg, "p99")
            ratios.append((cfg, m_rps / a_rps, m_p99 / a_p99))
            lines.append(f"| {cfg[0]} | {cfg[1]} | {m_rps:.1f} | {a_rps:.1f} | {m_rps / a_rps:.2f}x | "
                         f"{med(mk, cfg, 'p50'):.1f} | {med('anchor', cfg, 'p50'):.1f} | {m_p99:.1f} | "
                         f"{a_p99:.1f} | {m_p99 / a_p99:.2f} |")
        met = sum(1 for _, t, p in ratios if t >= 2 and p <= 1)
        met_all[mk] = met
        lines += ["", f"Target (issue 14): at least 2x the anchor's throughput at equal or lower p99: met in {met} of "
                  f"{len(ratios)} rows (throughput ratio {min(t for _, t, _ in ratios):.2f}x to "
                  f"{max(t for _, t, _ in ratios):.2f}x; p99 ratio {min(p for _, _, p in ratios):.2f} to "
                  f"{max(p for _, _, p in ratios):.2f})."]
    lines += ["", "Resident memory after each round's runs: " + "; ".join(
                  f"{k if k != 'anchor' else 'anchor'} {', '.join(f'{x / 1024:.0f}' for x in rss[k])} MB" for k in rss)
              + ". Time to ready: " + "; ".join(f"{k} {', '.join(f'{x:.1f}' for x in ready[k])} s" for k in ready) + ".",
              "", "![requests/s and p99 by clients](server.png)", ""]
    rows = [(cfg[0], cfg[1], med(mkeys[0], cfg, "rps"), med("anchor", cfg, "rps")) for cfg in configs]
    lines.append(ceiling(a, start_modattn, sentences, rows))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    open(a.out, "w").write("\n".join(lines))
    raw = {f"{k}|{cfg[0]}|{cfg[1]}": v for k in results for cfg, v in results[k].items()}
    json.dump({"anchor": anchor_name, "runs": raw, "rss_kb": rss}, open(a.out.replace(".md", ".json"), "w"), indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
        for key, label, style in [(k, k, st) for k, st in zip(mkeys, ("-o", "-^", "-v"))] + [("anchor", anchor_name, "--s")]:
            for inputs, color in ((1, "tab:blue"), (32, "tab:orange")):
                xs = [c for i, c in configs if i == inputs]
                ax[0].plot(xs, [med(key, (inputs, c), "rps") * inputs for c in xs], style, color=color,
                           label=f"{label}, {inputs} input{'s' if inputs > 1 else ''}/request")
                ax[1].plot(xs, [med(key, (inputs, c), "p99") for c in xs], style, color=color,
                           label=f"{label}, {inputs} input{'s' if inputs > 1 else ''}/request")
        for x, t in ((ax[0], "texts embedded per second"), (ax[1], "p99 latency (ms)")):
            x.set_xscale("log", base=2)
            x.set_yscale("log")
            x.set_xlabel("concurrent clients")
            x.set_title(t)
            x.grid(True, which="both", alpha=0.3)
        ax[0].legend(fontsize=7)
        fig.suptitle(f"modattn serve vs {anchor_name}, {ncpu} CPUs, all-MiniLM-L6-v2")
        fig.tight_layout()
        fig.savefig(a.out.replace(".md", ".png"), dpi=110)
    except ImportError:
        print("server_bench: no matplotlib here: no plot", file=sys.stderr)
    print("\n".join(lines))


def metric(url, name):
    text = urllib.request.urlopen(url, timeout=30).read().decode()
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def ceiling(a, start_modattn, sentences, rows=()):
    """The machine's fp32 FMA peak (bench/peak_flops, measured now) and what modattn serve sustains
    under load (tokens/s from its own /metrics over 60 s of 32-sentence requests from 8 clients),
    as GFLOP/s of the encoder's GEMMs (2 x 6 layers x (4 H^2 + 2 H I) per token, H 384, I 1536:
    21.2 MFLOP) and as a share of the peak; then, for each row of `rows` ((inputs, clients,
    modattn req/s, anchor req/s)) below 2x, the tokens/s that 2x would take against two ceilings
    of this session: `modattn embed` alone (no server, no load generator; its model load taken
    off) and the GEMMs alone."""
    peak_bin = os.path.join(os.path.dirname(a.bin), "bench/peak_flops")
    def peak():
        out = subprocess.run([peak_bin], capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    p0 = peak()
    srv = start_modattn()
    murl = srv.path.replace("/v1/embeddings", "/metrics")
    run_wrk(srv.path, 32, 8, 5, sentences, "all-MiniLM-L6-v2")
    t0, k0 = time.time(), metric(murl, "modattn_tokens_total")
    run_wrk(srv.path, 32, 8, 60, sentences, "all-MiniLM-L6-v2")
    t1, k1 = time.time(), metric(murl, "modattn_tokens_total")
    srv.stop()
    # the CLI on the same sentences (all of them; model load included)
    lines = open(sentences).read().splitlines()
    t2 = time.time()
    out = subprocess.run([a.bin, "embed", "--model", os.path.abspath(a.model), "-"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True).stdout
    t3 = time.time()
    cli_tokens = sum(json.loads(l)["tokens"] for l in out.splitlines())
    loads = []  # the model load and one text: taken off the CLI's time below
    for _ in range(3):
        t4 = time.time()
        subprocess.run([a.bin, "embed", "--model", os.path.abspath(a.model), "-"], input=lines[0] + "\n",
                       capture_output=True, text=True)
        loads.append(time.time() - t4)
    load_s = statistics.median(loads)
    cli_tps = cli_tokens / max(t3 - t2 - load_s, 1e-9)
    gemm = gemm_alone(a)
    p1 = peak()
    tps = (k1 - k0) / (t1 - t0)
    gflops = tps * 21.2e6 / 1e9
    pk = statistics.median([p0["gflops_all"], p1["gflops_all"]])
    g_txt = (f" The encoder's GEMMs alone (`build/bench/gemm_plan`: the same oneDNN plans, no post-ops, one copy "
             f"per CPU at once) reach {gemm:.0f} GFLOP/s, {100 * gemm / pk:.0f}% of the peak: the server runs them at "
             f"{100 * gflops / gemm:.0f}% of that, sharing the CPUs with wrk." if gemm else "")
    return (f"\n## The ceiling, measured in the same session ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n"
            f"fp32 FMA peak of this machine (`bench/peak_flops`, {p0['isa']}, {p0['threads']} threads), before and "
            f"after: {p0['gflops_all']:.0f} and {p1['gflops_all']:.0f} GFLOP/s. modattn serve under 60 s of "
            f"32-sentence requests from 8 clients: {tps:.0f} tokens/s (its /metrics), {gflops:.0f} GFLOP/s in the "
            f"encoder's GEMMs, {100 * gflops / pk:.0f}% of the peak; `modattn embed` of the {len(lines)} sentences: "
            f"{cli_tokens} tokens in {t3 - t2:.2f} s, model load included: {cli_tokens / (t3 - t2):.0f} tokens/s."
            f"{g_txt} What is left between the rows above and 2x the anchor is the encoder's own speed "
            f"(issue 15), not the server's.\n" + short_rows(rows, cli_tokens / len(lines), cli_tps, load_s, gemm))


def short_rows(rows, tok_per_text, cli_tps, load_s, gemm):
    """The rows below 2x against the ceilings (see ceiling())."""
    out = []
    for inputs, clients, m_rps, a_rps in rows:
        if a_rps <= 0 or m_rps / a_rps >= 2:
            continue
        need = 2 * a_rps * inputs * tok_per_text
        gemm_tps = gemm * 1e9 / 21.2e6 if gemm else 0
        out.append(f"- {inputs} inputs x {clients} clients ({m_rps / a_rps:.2f}x): 2x the anchor's {a_rps:.1f} "
                   f"req/s is {2 * a_rps:.1f} req/s, {need:.0f} tokens/s at this corpus' {tok_per_text:.1f} tokens "
                   f"a text. modattn serve did {m_rps * inputs * tok_per_text:.0f} there; `modattn embed` alone does "
                   f"{cli_tps:.0f} (its {load_s:.2f} s model load taken off): 2x would need the server "
                   f"{need / cli_tps:.2f}x faster than the encoder with no server and no wrk on the CPUs"
                   + (f", and {100 * need / gemm_tps:.0f}% of the {gemm_tps:.0f} tokens/s that the GEMMs alone "
                      f"would give if the encoder did nothing but them" if gemm_tps else "") + ".")
    if not out:
        return ""
    return ("\nRows below 2x, against the ceilings measured above:\n\n" + "\n".join(out) + "\n")


def gemm_alone(a):
    """GFLOP/s of the encoder's four GEMM shapes alone through modattn's oneDNN plans
    (build/bench/gemm_plan, 8192 rows, median of 5), one copy per CPU at once, each copy's rate
    weighted by the shapes' FLOPs; the copies' rates added. None where the probe is not built."""
    exe = os.path.join(os.path.dirname(a.bin), "bench/gemm_plan")
    if not os.path.exists(exe):
        return None
    n = os.cpu_count() or 1
    procs = [subprocess.Popen([exe, "8192", "5"], stdout=subprocess.PIPE, text=True) for _ in range(n)]
    total = 0.0
    outs = [(pr, pr.communicate()[0]) for pr in procs]  # every copy reaped
    for pr, out in outs:
        flops = secs = 0.0
        for ln in out.splitlines():
            f = ln.split()
            if len(f) >= 5 and f[0] in ("qkv", "attn_out", "ffn_up", "ffn_down"):
                flops += int(f[1]) * int(f[2])
                secs += int(f[1]) * int(f[2]) / float(f[4])
        if pr.returncode != 0 or not secs:
            return None
        total += flops / secs
    return total


if __name__ == "__main__":
    main()
