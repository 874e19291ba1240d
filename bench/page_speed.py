"""bench/page_speed.py — the speed figures of issue 41: (1) the search page's first render after its
response, in headless Chromium (Debian's chromium, driven over the DevTools protocol as
tests/server/test_page.py does): for each of N loads of GET / with the browser's cache off, the
Navigation Timing and Paint Timing entries the page itself reports — responseEnd (the last byte of
the HTML), first-contentful-paint, and the time the store line was filled from /info — and their
medians, against the target of a first render within 100 ms of the response; (2) POST /tokenize's
latency for one sentence, one keep-alive client on loopback, N requests after a warm-up, p50 /
p90 / p99 against the target of p50 under 1 ms. The server runs with a store of demo/corpus.
Writes bench/results/page_speed.md (the machine, the date, the command, the table). A benchmark,
not a test: it never fails on a figure.

  .venv-server/bin/python bench/page_speed.py --bin build/modattn --model .models/all-MiniLM-L6-v2
"""
import argparse
import http.client
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "server"))
from srvtest import Server  # noqa: E402


class Chromium:
    """Headless Chromium and one page, over the DevTools protocol (websocket-client)."""

    def __init__(self, exe, tmp):
        import websocket
        self.profile = os.path.join(tmp, "profile")
        os.makedirs(self.profile)
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync", "--disable-component-update",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--user-data-dir=" + self.profile,
             "--window-size=1200,900", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        portf = os.path.join(self.profile, "DevToolsActivePort")
        t0 = time.time()
        while not (os.path.exists(portf) and open(portf).read().count("\n") >= 1):
            if self.proc.poll() is not None or time.time() - t0 > 60:
                raise RuntimeError("chromium did not start")
            time.sleep(0.05)
        port = int(open(portf).read().split("\n")[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = [t for t in targets if t.get("type") == "page"][0]
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.id = 0
        self.send("Page.enable")
        self.send("Network.enable")
        self.send("Network.setCacheDisabled", {"cacheDisabled": True})
        self.version = self.send("Browser.getVersion").get("product", "chromium")

    def send(self, method, params=None):
        self.id += 1
        my = self.id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"CDP error: {msg['error']}")
                return msg.get("result", {})

    def js(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        return r.get("result", {}).get("value")

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            self.proc.wait(10)


# the page's own timing entries, once the first contentful paint and the store line are in
TIMING = """new Promise((done) => {
  const t0 = performance.now();
  (function poll() {
    const nav = performance.getEntriesByType('navigation')[0];
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const store = document.getElementById('store');
    const filled = store && !/Reading the store/.test(store.textContent);
    if (nav && nav.responseEnd > 0 && fcp && filled && window.__storeAt) {
      done({responseStart: nav.responseStart, responseEnd: nav.responseEnd, dcl: nav.domContentLoadedEventEnd,
            fcp: fcp.startTime, store: window.__storeAt});
    } else if (performance.now() - t0 > 10000) done(null);
    else { if (filled && !window.__storeAt) window.__storeAt = performance.now(); setTimeout(poll, 2); }
  })();
})"""


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "modattn"))
    ap.add_argument("--model", default=os.path.join(REPO, ".models", "all-MiniLM-L6-v2"))
    ap.add_argument("--loads", type=int, default=25, help="page loads (median of them)")
    ap.add_argument("--requests", type=int, default=3000, help="/tokenize requests")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "page_speed.md"))
    a = ap.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("page_speed: chromium is not installed (tools/install_deps.sh)")
    tmp = tempfile.mkdtemp(prefix="modattn-page-speed-")
    db = os.path.join(tmp, "s.db")
    subprocess.run([a.bin, "index", "--quiet", "--model", a.model, "--db", db, os.path.join(REPO, "demo", "corpus")],
                   check=True, stdout=subprocess.DEVNULL)
    s = Server(a.bin, a.model, "--db", db, "--quiet")
    base = f"http://127.0.0.1:{s.port}"

    # ---- the page's first render
    b = Chromium(exe, tmp)
    rows = []
    try:
        for i in range(a.loads + 2):  # the first two warm the browser up (not counted)
            before = b.js("performance.timeOrigin")
            b.send("Page.navigate", {"url": base + "/"})
            t0 = time.time()
            while b.js("performance.timeOrigin") == before and time.time() - t0 < 10:
                time.sleep(0.005)  # (until the new document is the one evaluated)
            t = b.js(TIMING)
            if t and i >= 2:
                rows.append(t)
    finally:
        b.close()
    after_resp = [r["fcp"] - r["responseEnd"] for r in rows]
    from_nav = [r["fcp"] for r in rows]
    dcl = [r["dcl"] - r["responseEnd"] for r in rows]
    store = [r["store"] - r["responseEnd"] for r in rows]

    # ---- POST /tokenize, one sentence, one keep-alive client
    sentence = "The quick brown fox jumps over the lazy dog near the riverbank at dawn."
    body = json.dumps({"inputs": sentence})
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    hdr = {"Content-Type": "application/json"}
    lat = []
    ntok = None
    for i in range(a.requests + 200):
        t0 = time.perf_counter()
        c.request("POST", "/tokenize", body=body, headers=hdr)
        r = c.getresponse()
        data = r.read()
        dt = (time.perf_counter() - t0) * 1000
        if r.status != 200:
            sys.exit(f"page_speed: /tokenize answered {r.status}: {data[:200]!r}")
        if i >= 200:
            lat.append(dt)
        else:
            ntok = len(json.loads(data)[0])
    c.close()
    s.stop()
    shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    fr, tk = med(after_resp), med(lat)
    ncpu = os.cpu_count()
    load = os.getloadavg()[0]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cmd = "python3 bench/page_speed.py " + " ".join(sys.argv[1:])
    md = f"""# The search page's first render and /tokenize's latency (issue 41)

Written by `bench/page_speed.py` on {when}: {cpu_name()}, {ncpu} CPUs (load average {load:.1f} when it ended: other
work was running on this machine), {b.version} headless, `modattn serve` with a store of demo/corpus, loopback.
Command: `{cmd}`

| figure | median | p90 | target | met |
|---|---:|---:|---:|---|
| first contentful paint after the HTML's last byte (responseEnd), {len(rows)} loads, cache off | {fr:.1f} ms | {pct(after_resp, 90):.1f} ms | 100 ms | {"yes" if fr <= 100 else "no"} |
| first contentful paint after navigation start | {med(from_nav):.1f} ms | {pct(from_nav, 90):.1f} ms | | |
| DOMContentLoaded after responseEnd (page.css and page.js loaded) | {med(dcl):.1f} ms | {pct(dcl, 90):.1f} ms | | |
| store line filled from GET /info, after responseEnd | {med(store):.1f} ms | {pct(store, 90):.1f} ms | | |
| POST /tokenize, one sentence ({ntok} tokens), {len(lat)} requests, one keep-alive client, p50 | {tk:.3f} ms | {pct(lat, 90):.3f} ms | 1 ms (p50) | {"yes" if tk < 1 else "no"} |

/tokenize p99: {pct(lat, 99):.3f} ms. The /tokenize figure is the client's round trip (Python's http.client: request
written, response read), so it includes the client's own time; the server's part is smaller.
The paint figures are the page's own Navigation Timing and Paint Timing entries, read over the DevTools protocol.
"""
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    open(a.out, "w").write(md)
    print(md)


if __name__ == "__main__":
    main()
