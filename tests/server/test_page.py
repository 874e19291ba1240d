"""tests/server/test_page.py BIN MODEL OUTDIR — the search page (GET /) in a real browser: headless
Chromium from Debian (package chromium), driven over its DevTools protocol on loopback
(websocket-client from tests/server/requirements.txt). Against a store of a small corpus, one of
whose documents holds <script> and <img onerror> markup: the results of /?q=honey&mode=hybrid
appear with the matched words marked, the markup shows as text and runs nothing, the URL's
state round-trips (submit, back, forward, reload, "more like this"), the keyboard alone works,
the page fits a phone's width, the dark theme follows the system's setting, a server without a
store says so, and a server with --api-key-file asks for the key once and then answers.
Screenshots (light, dark, phone) go to OUTDIR for a person to look at. Without chromium the test
FAILS with the reason (tools/install_deps.sh installs it)."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, finish  # noqa: E402

BIN, MODEL = sys.argv[1], sys.argv[2]
OUT = os.path.abspath(sys.argv[3] if len(sys.argv) > 3 else ".")
os.makedirs(OUT, exist_ok=True)
CHROME = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROME:
    print("FAIL: chromium is not installed (Debian package chromium: tools/install_deps.sh installs it); "
          "the page's browser test cannot run", file=sys.stderr)
    sys.exit(1)
try:
    import websocket  # websocket-client
except ImportError:
    print("FAIL: websocket-client is missing from the venv (tests/server/requirements.txt; "
          "tests/server/setup_venv.sh)", file=sys.stderr)
    sys.exit(1)

tmp = tempfile.mkdtemp(prefix="modattn-page-")
corpus = os.path.join(tmp, "corpus")
os.makedirs(corpus)
DOCS = {
    "bees.txt": "Bees make honey from the nectar of flowers.\nA hive stores honey in wax combs for the winter.\n",
    "kitchen.txt": "Stir a spoon of honey into warm tea with lemon.\nHoney never spoils when it is kept sealed.\n",
    "evil.txt": "Honey trap notes.\n<script>alert(1)</script>\n<img src=x onerror=alert(2)>\n"
                "<b onmouseover=alert(3)>bold</b> honey & \"quotes\" 'single'\n",
    "rust.txt": "Iron left in wet air turns to rust over the years.\n",
    "chess.txt": "The knight moves in an L shape across the board.\n",
    # two more without the word, so that "honey" is in under half the chunks: a word in more than
    # half of them carries no information and is neither searched for nor marked (issue 40)
    "tides.txt": "The moon's pull raises the tides twice a day.\n",
    "violin.txt": "A violin has four strings tuned in fifths.\n",
    # a long chunk with text in UTF-8 beyond ASCII (2-, 3- and 4-byte characters) before, inside and
    # after its best window for "saffron paella" (both words together: the second sentence block,
    # not the chunk's start): the page must show the library's byte range, not a cut of its own
    "saffron.txt": ("Notes from a cooking class in Valencia, written afterwards in the café on the corner. "
                    "Señora Pérez began with the sofrito: onions, garlic and ripe tomato grated on the coarse "
                    "side, stirred in olive oil until it turned dark and sweet. Saffron from La Mancha, she told "
                    "us, costs more by weight than silver, so nobody buys much of it.\n"
                    "The rice must be bomba or calasparra, spread thin across the wide pan and never stirred once "
                    "the broth goes in. For the paella itself she crushed a pinch of saffron in a mortar with warm "
                    "water (ten threads, not more \U0001F336 no chili either) and poured it over the rice near the "
                    "end; the socarrat, the crust at the bottom, is the cook's reward.\n"
                    "Afterwards we ate on the terrace, and Señor Núñez played the guitar while the pan cooled. "
                    "Nobody wrote down the recipe for the horchata, which was a shame, because it was the best any "
                    "of us had tasted that summer in Spain.\n"),
}
for name, text in DOCS.items():
    open(os.path.join(corpus, name), "w", encoding="utf-8").write(text)
db = os.path.join(tmp, "s.db")
subprocess.run([BIN, "index", "--quiet", "--model", MODEL, "--db", db, corpus], check=True, stdout=subprocess.DEVNULL)


class Browser:
    """Headless Chromium and one page, over the DevTools protocol."""

    def __init__(self):
        self.profile = os.path.join(tmp, "profile-%d" % time.monotonic_ns())
        os.makedirs(self.profile)
        self.proc = subprocess.Popen(
            [CHROME, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync", "--metrics-recording-only",
             "--disable-component-update", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             "--user-data-dir=" + self.profile, "--window-size=1200,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "chromium.log"), "a"))
        portf = os.path.join(self.profile, "DevToolsActivePort")
        t0 = time.time()
        while not (os.path.exists(portf) and open(portf).read().count("\n") >= 1):
            if self.proc.poll() is not None or time.time() - t0 > 60:
                raise RuntimeError("chromium did not start: " + open(os.path.join(tmp, "chromium.log")).read()[-2000:])
            time.sleep(0.05)
        port = int(open(portf).read().split("\n")[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = [t for t in targets if t.get("type") == "page"][0]
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.id = 0
        self.events = []
        self.dialogs = []
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Log.enable")

    def _pump(self, want_id=None, timeout=30):
        t0 = time.time()
        while True:
            self.ws.settimeout(max(0.05, timeout - (time.time() - t0)))
            msg = json.loads(self.ws.recv())
            if "id" in msg:
                if msg["id"] == want_id:
                    if "error" in msg:
                        raise RuntimeError(f"CDP error: {msg['error']}")
                    return msg.get("result", {})
                continue
            self.events.append(msg)
            if msg.get("method") == "Page.javascriptDialogOpening":  # alert(): recorded, then dismissed
                self.dialogs.append(msg["params"].get("message"))
                self.id += 1
                self.ws.send(json.dumps({"id": self.id, "method": "Page.handleJavaScriptDialog", "params": {"accept": True}}))

    def send(self, method, params=None):
        self.id += 1
        my = self.id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params or {}}))
        return self._pump(my)

    def js(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if r.get("exceptionDetails"):
            raise RuntimeError(f"page script failed: {expr}: {r['exceptionDetails']}")
        return r.get("result", {}).get("value")

    def wait(self, expr, limit=30):
        t0 = time.time()
        while time.time() - t0 < limit:
            v = self.js(expr)
            if v:
                return v
            time.sleep(0.05)
        return None

    def goto(self, url):
        self.send("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete'")

    def key(self, key, code=None, text=None, shift=False):
        k = {"key": key, "code": code or key, "windowsVirtualKeyCode": {"Tab": 9, "Enter": 13}.get(key, 0),
             "modifiers": 8 if shift else 0}
        self.send("Input.dispatchKeyEvent", dict(k, type="keyDown", **({"text": text} if text else {})))
        self.send("Input.dispatchKeyEvent", dict(k, type="keyUp"))

    def screenshot(self, path):
        r = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        open(path, "wb").write(base64.b64decode(r["data"]))
        return os.path.getsize(path)

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


RESULTS = "document.querySelectorAll('#list > li').length"
COUNT_SAID = "/\\d+ results? by /.test(document.getElementById('status').textContent)"

s = Server(BIN, MODEL, "--db", db)
base = f"http://127.0.0.1:{s.port}"
b = Browser()
try:
    # ---- results, marked words, the hostile document as text
    b.goto(base + "/?q=honey&mode=hybrid")
    check(b.wait(COUNT_SAID), "the result count appears: " + str(b.js("document.getElementById('status').textContent")))
    n = b.js(RESULTS)
    check(n and n >= 3, f"results listed: {n}")
    marks = b.js("[...document.querySelectorAll('#list mark')].map(m => m.textContent.toLowerCase())")
    check(marks and "honey" in marks and all(m == "honey" for m in marks), f"the matched words are marked: {marks}")
    check(b.js("document.getElementById('q').value") == "honey", "the box holds the query from the URL")
    check(b.js("document.querySelector('input[name=mode][value=hybrid]').checked"), "the mode from the URL is chosen")
    paths = b.js("[...document.querySelectorAll('#list .path')].map(e => e.textContent)")
    check(any(p.endswith("evil.txt") for p in paths or []), f"the document with markup is among the results: {paths}")
    evil = b.js("[...document.querySelectorAll('#list li')].filter(li => li.querySelector('.path').textContent.endsWith('evil.txt'))"
                ".map(li => li.querySelector('.snippet').textContent)[0] || ''")
    check("<script>alert(1)</script>" in evil and "<img src=x onerror=alert(2)>" in evil,
          f"the markup shows as text: {evil!r}")
    check(b.js("document.querySelectorAll('#list script, #list img, #list b, #list [onerror], #list [onmouseover]').length") == 0,
          "no element was made from a document's text")
    line = b.js("[...document.querySelectorAll('#list li')].filter(li => li.querySelector('.path').textContent.endsWith('bees.txt'))"
                ".map(li => li.querySelector('.meta').textContent)[0] || ''")
    check("line 1" in line and "score" in line, f"a result says its line and score: {line!r}")
    b.screenshot(os.path.join(OUT, "page-light.png"))
    # hover over everything (an onmouseover would fire) and wait a moment: nothing ran
    b.js("document.querySelectorAll('#list *').forEach(e => e.dispatchEvent(new MouseEvent('mouseover', {bubbles: true})))")
    time.sleep(0.5)
    b.js("1")
    check(not b.dialogs, f"no script of a document ran (dialogs: {b.dialogs})")
    csp = [e for e in b.events if "Content Security Policy" in json.dumps(e)]
    check(not csp, f"the page runs under its own Content-Security-Policy without violations: {csp[:2]}")
    errs = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"]
    check(not errs, f"no script errors: {errs[:2]}")

    # ---- the URL's state: submit with Enter, back, forward, reload
    b.js("document.getElementById('q').focus(); document.getElementById('q').select()")
    b.send("Input.insertText", {"text": "rust and iron"})
    b.js("document.querySelector('input[name=mode][value=words]').checked = true")
    b.js("document.getElementById('q').focus()")
    b.key("Enter", text="\r")
    check(b.wait("location.search === '?q=rust+and+iron&mode=words'"), "Enter submits; the URL holds the query and mode: "
          + str(b.js("location.search")))
    check(b.wait("/by words for/.test(document.getElementById('status').textContent)"), "searched by words")
    top = b.js("(document.querySelector('#list .path') || {}).textContent || ''")
    check(top.endswith("rust.txt"), f"the words search finds rust.txt first: {top}")
    b.js("history.back()")
    check(b.wait("location.search === '?q=honey&mode=hybrid' && document.getElementById('q').value === 'honey'"),
          "back: the URL, the box and the results return to honey")
    check(b.wait("document.querySelector('input[name=mode][value=hybrid]').checked && " + COUNT_SAID +
                 " && /honey/.test(document.getElementById('status').textContent)"), "back: hybrid again, honey's results")
    b.js("history.forward()")
    check(b.wait("document.getElementById('q').value === 'rust and iron' && "
                 "document.querySelector('input[name=mode][value=words]').checked"), "forward: rust by words again")
    b.goto(base + "/?q=knight&mode=meaning")
    check(b.wait(COUNT_SAID + " && document.querySelector('input[name=mode][value=meaning]').checked"),
          "a bookmarked URL (meaning) loads its search")
    top = b.js("(document.querySelector('#list .path') || {}).textContent || ''")
    check(top.endswith("chess.txt"), f"'knight' by meaning finds chess.txt first: {top}")

    # ---- more like this: searches again with the result's text (by meaning), in the URL
    b.js("document.querySelector('#list li button').click()")
    check(b.wait("new URLSearchParams(location.search).get('mode') === 'meaning' && "
                 "new URLSearchParams(location.search).get('q').startsWith('The knight moves')"),
          "more like this: the result's text becomes the query, in the URL: " + str(b.js("location.search")))
    check(b.wait(COUNT_SAID + " && /The knight/.test(document.getElementById('status').textContent)"),
          "more like this: its results")

    # ---- the snippet is the library's window (issue 40): for every result, the shown text is the
    # byte range "snippet" of "text" in the same /search JSON (UTF-8 bytes, not characters), an
    # ellipsis where it does not reach the chunk's start or end, the marks those inside the range
    def shown_vs_json(query, mode):
        api = {"meaning": "vector", "words": "keyword"}.get(mode, mode)
        st, _, sj = s.post("/search", {"query": query, "k": 10, "mode": api})
        check(st == 200 and sj and sj.get("results"), f"/search {query!r} ({mode}) answers: {st}")
        want, marks_want = [], []
        for r in (sj or {}).get("results", []):
            tb = r["text"].encode()
            a, z = r["snippet"]
            want.append([r["path"], ("\u2026" if a > 0 else "") + tb[a:z].decode() + ("\u2026" if z < len(tb) else "")])
            # (a marked word the range cuts is marked as far as it is shown)
            marks_want.append([tb[max(h0, a):min(h1, z)].decode() for h0, h1 in r["highlights"] if max(h0, a) < min(h1, z)])
        b.goto(base + "/?q=" + urllib.parse.quote_plus(query) + "&mode=" + mode)
        check(b.wait(COUNT_SAID), f"{query!r} ({mode}): the results appear")
        got = b.js("[...document.querySelectorAll('#list > li')].map(li => [li.querySelector('.path').textContent, "
                   "li.querySelector('.snippet').textContent])")
        check(got == want, f"{query!r} ({mode}): each shown snippet is text[snippet] of /search's JSON, in bytes:\n"
              f"  page: {got}\n  json: {want}")
        marks = b.js("[...document.querySelectorAll('#list > li')].map(li => [...li.querySelectorAll('.snippet mark')]"
                     ".map(m => m.textContent))")
        check(marks == marks_want, f"{query!r} ({mode}): the marks are the highlights inside the snippet: {marks} vs {marks_want}")
        return sj, got

    sj, got = shown_vs_json("saffron paella", "words")
    top = (sj or {}).get("results", [{}])[0]
    tb = top.get("text", "").encode()
    a, z = top.get("snippet", [0, 0])
    # the case this is here for: a window inside the chunk, after and before text beyond ASCII (so
    # that byte and character offsets differ), itself holding a 4-byte character
    check(top.get("path", "").endswith("saffron.txt") and 0 < a and z < len(tb) and
          len(tb[:a].decode()) < a and len(tb[a:z].decode()) < z - a and "\U0001F336" in tb[a:z].decode() and
          b"paella" in tb[a:z] and b"paella" not in tb[:a],
          f"'saffron paella': saffron.txt first, its snippet inside the chunk, beyond ASCII: [{a}, {z}) of {len(tb)}")
    shown = got[0][1] if got else ""
    check(shown.startswith("\u2026The rice must be") and shown.endswith("\u2026") and "Notes from" not in shown,
          f"the shown snippet begins at the window, with ellipses on both sides: {shown!r}")
    # by meaning and by both: the same, whatever window the library chose
    shown_vs_json("how much does the spice cost", "meaning")
    shown_vs_json("saffron rice crust", "hybrid")
    # more like this still takes the whole chunk (from its start), not the snippet
    b.goto(base + "/?q=saffron+paella&mode=words")
    b.wait(COUNT_SAID)
    b.js("document.querySelector('#list li button').click()")
    check(b.wait("new URLSearchParams(location.search).get('q').startsWith('Notes from a cooking class in Valencia, "
                 "written afterwards in the caf\u00e9')"),
          "more like this on a windowed snippet: the query is the chunk from its start: " + str(b.js("location.search")))
    # an older server gives no "snippet": the page falls back to its own cut around the first marked
    # word (fetch wrapped in the page to drop the field, then the same search submitted)
    b.goto(base + "/?q=saffron+paella&mode=words")
    b.wait(COUNT_SAID)
    b.js("(() => { const f = window.fetch; window.fetch = async (...a) => { const r = await f(...a); const j = await r.json();"
         " (j.results || []).forEach(x => delete x.snippet); return new Response(JSON.stringify(j), {status: r.status}); }; })()")
    b.js("document.getElementById('status').textContent = ''; document.getElementById('form').requestSubmit()")
    b.wait(COUNT_SAID)
    old = b.js("document.querySelector('#list .snippet').textContent")
    check(old and old != shown and old.startswith("\u2026") and "Saffron from La Mancha" in old and
          b.js("document.querySelector('#list .snippet mark').textContent") == "Saffron",
          f"without 'snippet' (an older server) the page cuts around the first marked word: {old!r}")
    errs = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"]
    check(not errs, f"no script errors showing snippets: {errs[:2]}")

    # ---- the keyboard alone: Tab reaches the box, the mode, the results; focus is visible
    b.goto(base + "/?q=honey&mode=hybrid")
    b.wait(COUNT_SAID)
    b.js("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
    seen = []
    for _ in range(25):
        b.key("Tab")
        seen.append(b.js("(function(e){return e.id || e.name || e.textContent.trim().slice(0, 20) || e.tagName})(document.activeElement)"))
    check("q" in seen, f"Tab reaches the search box: {seen}")
    check("mode" in seen, f"Tab reaches the mode: {seen}")
    check("More like this" in seen, f"Tab reaches the results' buttons: {seen}")
    b.js("document.getElementById('q').blur()")
    b.key("Tab", shift=True)
    b.js("document.getElementById('q').focus()")
    b.key("Tab")
    b.key("Tab", shift=True)
    outline = b.js("getComputedStyle(document.activeElement).outlineStyle + ' ' + getComputedStyle(document.activeElement).outlineWidth")
    check(b.js("document.activeElement.id") == "q" and outline and not outline.startswith("none"),
          f"the focused box shows its focus: {outline}")
    check(b.js("document.querySelector('label[for=q]') !== null && document.querySelector('[role=search]') !== null && "
               "document.querySelector('header') !== null && document.querySelector('main') !== null && "
               "document.getElementById('status').getAttribute('aria-live') === 'polite'"),
          "landmarks, the box's label and the live result count")

    # ---- a phone's width: nothing wider than the screen
    b.send("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    b.goto(base + "/?q=honey&mode=hybrid")
    b.wait(COUNT_SAID)
    sw = b.js("document.documentElement.scrollWidth")
    check(sw is not None and sw <= 390, f"the page fits 390 px: scrollWidth {sw}")
    b.screenshot(os.path.join(OUT, "page-phone.png"))
    b.send("Emulation.clearDeviceMetricsOverride")

    # ---- the dark theme
    b.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    b.goto(base + "/?q=honey&mode=hybrid")
    b.wait(COUNT_SAID)
    bg = b.js("getComputedStyle(document.body).backgroundColor")
    rgb = [int(x) for x in bg[bg.index("(") + 1:bg.index(")")].split(",")[:3]] if bg and "(" in bg else [255, 255, 255]
    check(sum(rgb) < 150, f"dark background with prefers-color-scheme: dark: {bg}")
    b.screenshot(os.path.join(OUT, "page-dark.png"))
    b.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    b.goto(base + "/")
    bg = b.js("getComputedStyle(document.body).backgroundColor")
    check(bg == "rgb(255, 255, 255)", f"light background otherwise: {bg}")
    check(b.wait(f"/29 documents|{len(DOCS)} documents/.test(document.getElementById('store').textContent)") and
          b.js("/all-MiniLM-L6-v2/.test(document.getElementById('store').textContent) && "
               "/last indexed/.test(document.getElementById('store').textContent)"),
          "the store's size, model and freshness: " + str(b.js("document.getElementById('store').textContent")))

    # ---- hostile queries in the URL (issue 41): scripts, invalid UTF-8, control characters, a long
    # one and a 1 MB one render as text, or as the server's JSON refusal; nothing runs
    b.dialogs.clear()
    own = b.js("document.querySelectorAll('script, img, iframe, object, embed').length")
    hostile = [
        ("%3Cscript%3Ealert(1)%3C%2Fscript%3E", "<script>alert(1)</script>"),
        ("%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(2)%3E", "\"><img src=x onerror=alert(2)>"),
        ("honey%FF%FE%C0%AF", "honey\ufffd\ufffd\ufffd\ufffd"),
        ("honey%00%1B%5B31m%0Abees", "honey\u0000\u001b[31m\nbees"),
    ]
    for enc, text in hostile:
        b.goto(base + "/?q=" + enc + "&mode=" + enc)
        check(b.wait("/result|No results|failed/.test(document.getElementById('status').textContent)"),
              f"/?q={enc}: the search answers: " + str(b.js("document.getElementById('status').textContent")))
        box = b.js("document.getElementById('q').value")
        # (an <input> drops line breaks from its value: the rest is the text as it was)
        check(box == text.replace("\n", ""), f"/?q={enc}: the box holds the query as text: {box!r}")
        check(b.js("document.querySelector('input[name=mode][value=hybrid]').checked"), f"/?q={enc}: an unknown mode is hybrid")
        check(b.js("document.querySelectorAll('script, img, iframe, object, embed').length") == own,
              f"/?q={enc}: no element made from the query")
    long_q = "honey " * 1200  # 7200 characters: under the server's 8 KiB URI limit
    b.goto(base + "/?q=" + long_q.replace(" ", "+") + "&mode=words")
    said = b.wait("(t => /result|No results|failed/.test(t) && t)(document.getElementById('status').textContent)")
    check(said and len(said) < 200, f"a 7200-character query: answered, the status line bounded: {len(said or '')} characters")
    b.goto(base + "/?q=" + "a" * (1 << 20) + "&mode=hybrid")
    body = b.wait("document.body && document.body.textContent")
    # on a new connection the front gate refuses it in JSON (414 uri_too_long); on one the browser
    # kept alive, libmicrohttpd 0.9.75 refuses it itself with its fixed text (no hook replaces that
    # body: README, "hostile input"): either way a short refusal that echoes nothing of the query
    check(body and ("uri_too_long" in body or "Your HTTP header was too big" in body) and "aaaa" not in body
          and len(body) < 400, f"a 1 MB query in the URL: a 414 refusal, shown as text: {str(body)[:160]!r}")
    time.sleep(0.3)
    b.js("1")
    check(not b.dialogs, f"no script ran from a hostile URL (dialogs: {b.dialogs})")
    errs = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"]
    check(not errs, f"no script errors on hostile URLs: {errs[:2]}")
    check(b.js("document.getElementById('tools') === null || document.getElementById('tools').hidden") is not False,
          "with a store the embedding-only tools stay hidden")
    b.goto(base + "/")
    check(b.wait("document.getElementById('tools') && document.getElementById('tools').hidden && "
                 "/documents/.test(document.getElementById('store').textContent)"),
          "with a store the embedding-only tools stay hidden")

    # ---- GET /docs: drawn from /openapi.json, every route listed, a route tried from its form
    b.goto(base + "/docs")
    nspec = len(json.loads(s.request("GET", "/openapi.json")[2])["paths"])
    check(b.wait(f"document.getElementById('status').textContent === '{nspec} routes.'"),
          "GET /docs lists the routes of /openapi.json: " + str(b.js("document.getElementById('status').textContent")))
    ops = b.js("[...document.querySelectorAll('article.op h2')].map(h => h.textContent)")
    check(ops and "POST /tokenize" in ops and "GET /info" in ops and "GET /v1/models/{model}" in ops, f"/docs routes: {ops}")
    check(b.js("document.querySelectorAll('#schemas pre').length") >= 10, "/docs shows the schemas")
    b.js("document.querySelector('#op-tokenize form button').click()")
    check(b.wait("/^200\\n/.test(document.querySelector('#op-tokenize pre.out').textContent) && "
                 "/\"honey\"/.test(document.querySelector('#op-tokenize pre.out').textContent)"),
          "/docs: 'try it' on POST /tokenize answers 200 with the tokens: "
          + str(b.js("document.querySelector('#op-tokenize pre.out').textContent.slice(0, 80)")))
    b.js("document.querySelector('#op-retrieveModel input').value = 'all-MiniLM-L6-v2'")
    b.js("document.querySelector('#op-retrieveModel form button').click()")
    check(b.wait("/^200\\n/.test(document.querySelector('#op-retrieveModel pre.out').textContent)"),
          "/docs: 'try it' with a path parameter")
finally:
    b.close()
check(s.stop() == 0, "exit 0 after SIGTERM")

# ---- no store: the page says so plainly, and offers the embedding-only tools (issue 41):
# tokenize (POST /tokenize) and the similarity of two texts (POST /v1/embeddings)
s = Server(BIN, MODEL)
b = Browser()
try:
    b.goto(f"http://127.0.0.1:{s.port}/?q=honey&mode=hybrid")
    said = b.wait("(t => /No store/.test(t) && t)(document.getElementById('status').textContent)")
    check(said and "--db" in said, f"without a store the page says so: {said}")
    check(b.wait("/No store/.test(document.getElementById('store').textContent)"), "the store line says there is none")
    check(b.js(RESULTS) == 0, "no results without a store")
    check(b.wait("!document.getElementById('tools').hidden"), "without a store the embedding-only tools are shown")
    why = b.js("document.getElementById('tools-why').textContent")
    check("Search is off" in why and "--db" in why, f"the tools say why search is off: {why!r}")
    check(b.js("document.querySelector('label[for=tok-text]') !== null && document.querySelector('label[for=sim-a]') !== null "
               "&& document.querySelector('label[for=sim-b]') !== null && "
               "document.getElementById('tools').getAttribute('aria-labelledby') === 'tools-h'"),
          "the tools' boxes have labels; the section is named")
    # tokenize, by the keyboard: focus the box, type, Enter
    b.js("document.getElementById('tok-text').focus()")
    b.send("Input.insertText", {"text": "Bees make honey. <img src=x onerror=alert(7)>"})
    b.key("Enter", text="\r")
    check(b.wait("/tokens/.test(document.getElementById('tok-status').textContent)"),
          "tokenize answers: " + str(b.js("document.getElementById('tok-status').textContent")))
    shown = b.js("[...document.querySelectorAll('#tok-out li')].map(li => li.textContent)")
    _, _, tj = s.post("/tokenize", {"inputs": "Bees make honey. <img src=x onerror=alert(7)>"})
    want = [t["text"] for t in tj[0]] if isinstance(tj, list) else None
    check(shown == want and shown[:5] == ["[CLS]", "Bees", "make", "honey", "."] and shown[-1] == "[SEP]",
          f"the page shows /tokenize's tokens: {shown}")
    ids = b.js("document.getElementById('tok-status').textContent")
    check(want is not None and " ".join(str(t["id"]) for t in tj[0]) in ids, f"the page shows the ids: {ids!r}")
    check(b.js("document.querySelectorAll('#tools img').length") == 0 and "<" in "".join(shown or []),
          "markup typed into the tokenizer shows as text")
    # similarity: the cosine of the two vectors of /v1/embeddings
    pairs = [("a cat sat on the mat", "a kitten rested on the rug"), ("bees make honey", "bees make honey"),
             ("a cat sat on the mat", "interest rates rose sharply in March")]
    got = []
    for a_, b_ in pairs:
        b.js("document.getElementById('sim-out').textContent = ''")
        b.js(f"document.getElementById('sim-a').value = {json.dumps(a_)}; document.getElementById('sim-b').value = {json.dumps(b_)}")
        b.js("document.getElementById('sim-b').focus()")
        b.key("Enter", text="\r")
        said = b.wait("(t => /Cosine similarity/.test(t) && t)(document.getElementById('sim-out').textContent)")
        cos = b.js("Number(document.getElementById('sim-out').dataset.cosine)")
        _, _, ej = s.post("/v1/embeddings", {"input": [a_, b_]})
        u, v = ej["data"][0]["embedding"], ej["data"][1]["embedding"]
        ref = sum(x * y for x, y in zip(u, v)) / (sum(x * x for x in u) * sum(y * y for y in v)) ** 0.5
        check(said and cos is not None and abs(cos - ref) < 1e-6, f"similarity of {a_!r} and {b_!r}: page {cos} vs {ref}: {said!r}")
        got.append(cos or 0)
    check(abs(got[1] - 1) < 1e-5 and got[0] > got[2] + 0.2, f"the same text is 1, a paraphrase above an unrelated text: {got}")
    seen = []
    b.js("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
    for _ in range(20):
        b.key("Tab")
        seen.append(b.js("document.activeElement.id || document.activeElement.textContent.trim().slice(0, 20)"))
    check("tok-text" in seen and "sim-a" in seen and "sim-b" in seen, f"Tab reaches the tools: {seen}")
    b.screenshot(os.path.join(OUT, "page-nostore.png"))
    errs = [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"]
    check(not errs, f"no script errors without a store: {errs[:2]}")
finally:
    b.close()
check(s.stop() == 0, "exit 0 (no store)")

# ---- a store that cannot be read: the same tools, and why
s = Server(BIN, MODEL, "--db", os.path.join(tmp, "missing.db"))
b = Browser()
try:
    b.goto(f"http://127.0.0.1:{s.port}/")
    check(b.wait("!document.getElementById('tools').hidden"), "a store that cannot be read: the tools are shown")
    why = b.js("document.getElementById('tools-why').textContent")
    check("cannot be read" in why, f"... and say why: {why!r}")
finally:
    b.close()
check(s.stop() == 0, "exit 0 (missing store)")

# ---- --api-key-file: asked once, kept for the tab, sent as a bearer key
keyf = os.path.join(tmp, "key")
open(keyf, "w").write("s3cret\n")
s = Server(BIN, MODEL, "--db", db, "--api-key-file", keyf)
b = Browser()
try:
    b.goto(f"http://127.0.0.1:{s.port}/?q=honey&mode=hybrid")
    check(b.wait("!document.getElementById('keyform').hidden"), "a 401 asks for the key")
    check(b.js("document.activeElement.id") == "key", "the key's box has the focus")
    b.send("Input.insertText", {"text": "wrong"})
    b.key("Enter", text="\r")
    check(b.wait("!document.getElementById('keyform').hidden && /refused/.test(document.getElementById('keywhy').textContent)"),
          "a wrong key is refused and asked again")
    b.js("document.getElementById('key').focus()")
    b.send("Input.insertText", {"text": "s3cret"})
    b.key("Enter", text="\r")
    check(b.wait(COUNT_SAID), "with the key the results appear")
    check(b.js("sessionStorage.getItem('modattn-key')") == "s3cret", "the key is kept in sessionStorage")
    b.goto(f"http://127.0.0.1:{s.port}/?q=bees&mode=words")
    check(b.wait(COUNT_SAID) and b.js("document.getElementById('keyform').hidden"), "not asked again in this tab")
    check(b.wait("/documents/.test(document.getElementById('store').textContent)"), "the store line with the key")
finally:
    b.close()
log = s.read_log()
check(s.stop() == 0, "exit 0 (with a key)")
check('"POST /search" 200' in log and '"POST /search" 401' in log, "the server saw the 401 and then the keyed search")

for name in ("page-light.png", "page-dark.png", "page-phone.png", "page-nostore.png"):
    p = os.path.join(OUT, name)
    check(os.path.exists(p) and os.path.getsize(p) > 5000, f"screenshot {p}")
    print("screenshot: " + p)
shutil.rmtree(tmp, ignore_errors=True)
finish("test_page")
