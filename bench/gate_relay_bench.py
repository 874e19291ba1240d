"""bench/gate_relay_bench.py — what the front gate's relay (server/gate.c: every connection passes
through it to libmicrohttpd over a socket pair) costs: keep-alive latency, p50 and p99, and
requests/s of `GET /health` and of a one-sentence `POST /v1/embeddings`, for a server built before
the relay (--before BIN) and this one (--bin BIN), same model, same machine, one server at a time in
rounds A B A B ... (each figure the median of the rounds), driven by wrk with 1 and 8 connections.
For scale, the same /health load with `Connection: close` on every request (what closing after each
response, the rejected alternative, costs) is measured on --bin too.

  python3 bench/gate_relay_bench.py --before /work/main/build/modattn --bin build/modattn \
      --model .models/all-MiniLM-L6-v2 [--seconds 5] [--rounds 3]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

LUA_POST = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"input": "The quick brown fox jumps over the lazy dog."}'
"""


def start(binary, model):
    pf = tempfile.mktemp(prefix="gate-bench-port-")
    p = subprocess.Popen([binary, "serve", "--model", model, "--port", "0", "--port-file", pf, "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.exists(pf):
            port = int(open(pf).read())
            try:
                out = subprocess.run(["curl", "-s", f"http://127.0.0.1:{port}/health"], capture_output=True,
                                     timeout=5).stdout
            except subprocess.TimeoutExpired:
                out = b""
            if b'"ok"' in out:
                os.unlink(pf)
                return p, port
        time.sleep(0.1)
    p.kill()
    sys.exit(f"{binary} did not become ready")


def unit_ms(v, u):
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[u]


def wrk(port, path, conns, seconds, script=None, close=False):
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency"]
    if script:
        cmd += ["-s", script]
    if close:
        cmd += ["-H", "Connection: close"]
    out = subprocess.run(cmd + [f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True).stdout
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not (p50 and p99 and rps) or bad:
        sys.exit(f"wrk: {out}")
    return unit_ms(*p50.groups()), unit_ms(*p99.groups()), float(rps.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    lua = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    lua.write(LUA_POST)
    lua.close()
    loads = [("GET /health", "/health", 1, None, False), ("GET /health", "/health", 8, None, False),
             ("POST /v1/embeddings (1 sentence)", "/v1/embeddings", 1, lua.name, False),
             ("POST /v1/embeddings (1 sentence)", "/v1/embeddings", 8, lua.name, False)]
    res = {}
    for r in range(a.rounds):
        for name, binary in (("before", a.before), ("relay", a.bin)):
            p, port = start(binary, a.model)
            for label, path, c, script, close in loads:
                wrk(port, path, c, 1, script, close)  # warm-up
                res.setdefault((name, label, c), []).append(wrk(port, path, c, a.seconds, script, close))
            if name == "relay":
                for c in (1, 8):
                    res.setdefault(("relay, Connection: close", "GET /health", c), []).append(
                        wrk(port, "/health", c, a.seconds, None, True))
            p.terminate()
            p.wait()
    print(f"| load | conns | before p50 / p99 ms | relay p50 / p99 ms | before req/s | relay req/s | relay/before req/s |")
    print("|---|---|---|---|---|---|---|")
    for label, path, c, script, close in loads:
        b = [statistics.median(x) for x in zip(*res[("before", label, c)])]
        n = [statistics.median(x) for x in zip(*res[("relay", label, c)])]
        print(f"| {label} | {c} | {b[0]:.3f} / {b[1]:.3f} | {n[0]:.3f} / {n[1]:.3f} | {b[2]:.0f} | {n[2]:.0f} | {n[2] / b[2]:.2f} |")
    for c in (1, 8):
        k = [statistics.median(x) for x in zip(*res[("relay, Connection: close", "GET /health", c)])]
        print(f"\nFor scale, `Connection: close` on every /health request (a new connection each), {c} "
              f"connection(s) at once: p50 {k[0]:.3f} ms, p99 {k[1]:.3f} ms, {k[2]:.0f} req/s")
    os.unlink(lua.name)


if __name__ == "__main__":
    main()
