"""tests/server/test_hostile_url.py BIN MODEL — hostile queries in the URL and in /search (issue
41, "Bad input and faults"): the search page (GET /?q=...) and /search with a 1 MB query, with
invalid UTF-8 (%FF, %C0%AF, raw bytes), control characters (%00, %0A, %1B) and markup get a clear
JSON error (OpenAI's error object, application/json, nosniff) or a bounded answer — never a crash,
never a hang, never markup in an HTML response. Raw sockets, so that what a client library would
refuse to send reaches the server as sent. The same queries in a real browser: test_page.py."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, error_shape, finish  # noqa: E402

BIN, MODEL = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="modattn-hostile-url-")
corpus = os.path.join(tmp, "c")
os.makedirs(corpus)
open(os.path.join(corpus, "bees.txt"), "w").write("Bees make honey from the nectar of flowers.\n")
open(os.path.join(corpus, "evil.txt"), "w").write("Honey notes.\n<script>alert(1)</script>\n")
db = os.path.join(tmp, "s.db")
subprocess.run([BIN, "index", "--quiet", "--model", MODEL, "--db", db, corpus], check=True, stdout=subprocess.DEVNULL)


def exchange(port, data, wait=30.0):
    """Sends one request, reads one response (or until the server closes): (status, headers, body, seconds)."""
    t0 = time.time()
    c = socket.create_connection(("127.0.0.1", port))
    c.settimeout(wait)
    out = b""
    try:
        c.sendall(data)
        while True:
            head, sep, rest = out.partition(b"\r\n\r\n")
            if sep:
                n = 0
                for l in head.decode("latin-1").split("\r\n")[1:]:
                    k, _, v = l.partition(":")
                    if k.strip().lower() == "content-length":
                        n = int(v.strip())
                if len(rest) >= n:
                    break
            d = c.recv(1 << 20)
            if not d:
                break
            out += d
    except OSError:
        pass
    c.close()
    secs = time.time() - t0
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        return None, {}, out, secs
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    try:
        st = int(lines[0].split()[1])
    except (IndexError, ValueError):
        st = None
    return st, hdrs, body, secs


def get(port, target):
    return exchange(port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")


def post(port, target, body):
    return exchange(port, b"POST " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body, wait=120)


def json_answer(r, statuses, what, code=None):
    """A JSON answer (an error in OpenAI's shape unless 200), valid UTF-8, not HTML."""
    st, h, body, secs = r
    check(st in statuses, f"{what}: status {st}, wanted one of {statuses}: {body[:200]!r}")
    check(h.get("content-type", "").startswith("application/json"), f"{what}: JSON, not {h.get('content-type')}")
    try:
        j = json.loads(body.decode("utf-8"))  # strict: ill-formed UTF-8 in the body fails here
    except (ValueError, UnicodeDecodeError):
        j = None
    if st != 200:
        check(error_shape(j), f"{what}: OpenAI's error shape: {body[:200]!r}")
        if code and error_shape(j):
            check(j["error"]["code"] == code, f"{what}: code {j['error']['code']!r}, wanted {code!r}")
    else:
        check(isinstance(j, dict), f"{what}: a JSON object: {body[:200]!r}")
    return j


s = Server(BIN, MODEL, "--db", db)
P = s.port
page = get(P, b"/")
check(page[0] == 200 and b"<main" in page[2], "GET /: the page")
MB = b"a" * (1 << 20)

# ---- 1 MB queries: in the URL, a JSON 414 at once; in /search's body, a bounded answer
r = get(P, b"/?q=" + MB + b"&mode=hybrid")
json_answer(r, {414}, "GET /?q=<1 MB>", "uri_too_long")
check(r[3] < 10, f"GET /?q=<1 MB>: answered at once: {r[3]:.2f} s")
# the same on a connection kept alive from an earlier request (the front gate frames every request
# of a connection; libmicrohttpd 0.9.75 answered this one with its own fixed HTML): a JSON 414 that
# echoes nothing, the connection closed, the server answering after
c = socket.create_connection(("127.0.0.1", P))
c.settimeout(30)
c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
first = c.recv(65536)
c.sendall(b"GET /?q=" + MB + b" HTTP/1.1\r\nHost: x\r\n\r\n")
out = b""
try:
    while True:
        d = c.recv(1 << 20)
        if not d:
            break
        out += d
except OSError:
    pass
c.close()
check(first.startswith(b"HTTP/1.1 200") and out.startswith(b"HTTP/1.1 414") and b"aaaa" not in out and len(out) < 1000,
      f"a 1 MB URL on a kept-alive connection: a short 414, nothing echoed: {out[:300]!r}")
head, _, body = out.partition(b"\r\n\r\n")
hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in head.decode("latin-1").split("\r\n")[1:])}
json_answer((414 if out.startswith(b"HTTP/1.1 414") else None, hdrs, body, 0), {414},
            "a 1 MB URL on a kept-alive connection", "uri_too_long")
r = get(P, b"/search?q=" + MB)
json_answer(r, {414}, "GET /search?q=<1 MB>", "uri_too_long")
r = get(P, b"/?q=" + b"%3Cscript%3E" * 100000)
json_answer(r, {414}, "GET /?q=<1.2 MB of %3Cscript%3E>", "uri_too_long")
check(b"<script>" not in r[2], "the 414 does not echo the query")
for mode in ("hybrid", "vector", "keyword"):
    words = b" ".join(b"honey%d" % i for i in range(120000))[: 1 << 20]
    r = post(P, b"/search", json.dumps({"query": words.decode(), "k": 3, "mode": mode}).encode())
    j = json_answer(r, {200}, f"POST /search with a 1 MB query ({mode})")
    check(r[3] < 60, f"POST /search with a 1 MB query ({mode}): bounded: {r[3]:.2f} s")
    check(isinstance(j, dict) and isinstance(j.get("results"), list), f"1 MB query ({mode}): results listed: {str(j)[:200]}")
r = post(P, b"/search", json.dumps({"query": "x" * 2100000}).encode())
json_answer(r, {413}, "POST /search past --max-body (2 MB)", "payload_too_large")

# ---- invalid UTF-8 and control characters in the URL
for q in (b"%FF", b"%FF%FE%FD", b"%C0%AF", b"%ED%A0%80", b"%F4%90%80%80", b"%E2%82", b"%00", b"%0A%0D", b"%1B%5B31m",
          b"%3Cscript%3Ealert(1)%3C%2Fscript%3E", b"%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"):
    r = get(P, b"/?q=" + q + b"&mode=" + q)
    check(r[0] == 200 and r[2] == page[2], f"GET /?q={q.decode()}: the same page, the query left to the script "
          f"(which puts it in the box as text): {r[0]}")
    check(r[1].get("content-type", "").startswith("text/html") and "script-src 'self'" in r[1].get("content-security-policy", ""),
          f"GET /?q={q.decode()}: the page under its Content-Security-Policy")
    r = get(P, b"/search?q=" + q)
    json_answer(r, {405}, f"GET /search?q={q.decode()}", "method_not_allowed")
    r = get(P, b"/" + q)
    j = json_answer(r, {404}, f"GET /{q.decode()}", "not_found")
    check(r[1].get("x-content-type-options") == "nosniff", f"GET /{q.decode()}: the JSON error is not sniffed as HTML")
    r = get(P, b"/info" + q)
    json_answer(r, {404}, f"GET /info{q.decode()} is not /info", "not_found")
    r = get(P, b"/v1/models/" + q)
    json_answer(r, {404}, f"GET /v1/models/{q.decode()}", "model_not_found")
# raw bytes (not %-encoded): refused in JSON by the front gate, or served as above
for q in (b"\xff\xfe", b"\xc0\xaf", b"<script>", b"\x1b[31m"):
    r = get(P, b"/?q=" + q)
    check(r[0] in (200, 400), f"GET /?q=<raw {q!r}>: 200 (the page) or 400: {r[0]}")
    if r[0] == 400:
        json_answer(r, {400}, f"GET /?q=<raw {q!r}>")
    else:
        check(r[2] == page[2], f"GET /?q=<raw {q!r}>: the same page")
r = exchange(P, b"GET /?q=a\x00b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
json_answer(r, {400}, "a NUL byte in the request line")

# ---- invalid UTF-8 and control characters in /search's query
r = post(P, b"/search", b'{"query": "honey \xff\xfe"}')
json_answer(r, {400}, "POST /search with raw invalid UTF-8 in the body")
r = post(P, b"/search", b'{"query": "honey \\ud800"}')
json_answer(r, {200, 400}, "POST /search with a lone surrogate escape")
r = post(P, b"/search", json.dumps({"query": "honey \u0000\u001b[31m\n\r\t<script>alert(1)</script>"}).encode())
j = json_answer(r, {200}, "POST /search with control characters and markup")
check(isinstance(j, dict) and isinstance(j.get("results"), list), f"control characters: results: {str(j)[:200]}")

# ---- still alive and answering, and a clean exit
st, _, _ = s.request("GET", "/health")
check(st == 200, f"/health after all of it: {st}")
log = s.read_log()
check("AddressSanitizer" not in log and "runtime error" not in log, "no sanitizer report in the server's log")
check(s.stop() == 0, "exit 0 after SIGTERM")
subprocess.run(["rm", "-rf", tmp])
finish("test_hostile_url")
