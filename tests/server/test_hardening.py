"""tests/server/test_hardening.py BIN MODEL_DIR — the server against clients that break the rules,
on raw sockets where the framing matters:
  - a second server on a port in use fails ("address in use", exit 1) instead of sharing it;
  - malformed framing (two Content-Lengths, Content-Length with Transfer-Encoding, HTTP/1.2, no
    Host, a long URI, large header fields) gets exactly one response, JSON in OpenAI's shape;
  - POST routes take only application/json (415), CORS headers only with --cors (and its
    preflights);
  - stalled bodies from one address (127.0.0.1) hold neither the admission slots nor /health:
    past --max-client-bodies they get 429 at once, and a complete request from another address
    (127.0.0.2) is served."""
import http.client
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


def raw(port, data, wait=3.0, src=None):
    """Sends data, reads until the server closes (or wait passes): the bytes and whether it closed."""
    c = socket.create_connection(("127.0.0.1", port), source_address=(src, 0) if src else None)
    c.settimeout(wait)
    out, closed = b"", False
    try:
        c.sendall(data)
        while True:
            d = c.recv(65536)
            if not d:
                closed = True
                break
            out += d
    except OSError:
        pass
    c.close()
    return out, closed


def parse_one(data):
    """One HTTP response: (status, headers, body, rest): rest is whatever followed its body."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None, {}, b"", data
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return None, {}, b"", data
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    n = int(hdrs.get("content-length", "0"))
    return status, hdrs, rest[:n], rest[n:]


def json_error(data, status, what):
    """Exactly one response, of this status, JSON in OpenAI's error shape."""
    st, h, body, rest = parse_one(data)
    check(st == status, f"{what}: status {st}, wanted {status}: {data[:300]!r}")
    check(h.get("content-type", "").startswith("application/json"), f"{what}: JSON, not {h.get('content-type')}")
    try:
        j = json.loads(body)
    except ValueError:
        j = None
    check(error_shape(j), f"{what}: OpenAI's error shape: {body[:200]!r}")
    check(rest == b"", f"{what}: exactly one response, nothing after it: {rest[:200]!r}")
    return j if error_shape(j) else None


EMB = b'{"input":"hi"}'

# ---- 1: a port in use is refused, not shared (SO_REUSEPORT)
s = Server(BIN, MODEL, "--quiet")
second = subprocess.Popen([BIN, "serve", "--model", MODEL, "--quiet", "--port", str(s.port)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
try:
    _, err = second.communicate(timeout=20)
except subprocess.TimeoutExpired:  # it is serving: the kernel shares the port between the two
    second.kill()
    _, err = second.communicate()
err = err.decode(errors="replace")
check(second.returncode == 1, f"a second server on port {s.port} in use exits 1 at once: rc {second.returncode}: {err[-300:]}")
check("address in use" in err and str(s.port) in err and "127.0.0.1" in err,
      f"... saying 'address in use' with host and port: {err[-300:]!r}")
check(s.request("GET", "/health")[0] == 200, "the first server still answers")

# ---- 10: framing errors: one JSON response each
P = s.port
out, closed = raw(P, b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 14\r\nContent-Length: 30\r\n\r\n" + EMB + b" " * 16)
j = json_error(out, 400, "two differing Content-Length headers")
check(closed, "... and the connection closed")
check(j and "Content-Length" in j["error"]["message"], f"... saying why: {j}")
out, closed = raw(P, b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 14\r\nContent-Length: 14\r\n\r\n" + EMB)
check(parse_one(out)[0] == 200, f"two equal Content-Length headers are one: {out[:100]!r}")
out, closed = raw(P, b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 14\r\nTransfer-Encoding: chunked\r\n\r\ne\r\n" + EMB + b"\r\n0\r\n\r\n")
json_error(out, 400, "Content-Length with Transfer-Encoding")
check(closed, "... and the connection closed")
out, closed = raw(P, b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: gzip\r\n\r\n" + EMB)
json_error(out, 501, "Transfer-Encoding: gzip")
out, closed = raw(P, b"GET /health HTTP/1.2\r\nHost: x\r\n\r\n")
json_error(out, 505, "HTTP/1.2")
out, closed = raw(P, b"GET /health HTTP/1.1\r\n\r\n")
json_error(out, 400, "HTTP/1.1 without Host")
out, closed = raw(P, b"GET /health HTTP/1.0\r\n\r\n")
check(parse_one(out)[0] == 200, f"HTTP/1.0 without Host is fine: {out[:100]!r}")
out, closed = raw(P, b"GET /v1/" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
json_error(out, 414, "a 10 kB path")
out, closed = raw(P, b"GET /health?q=" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
json_error(out, 414, "a 10 kB query")
out, closed = raw(P, b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 100) for i in range(200)) + b"\r\n")
json_error(out, 431, "20 kB of header fields")
out, closed = raw(P, b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 20000 + b"\r\n\r\n")
json_error(out, 431, "one 20 kB header field")
check(s.request("GET", "/health")[0] == 200, "the server is fine after the malformed requests")

# ---- 11: Content-Type, CORS
for ct in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None,
           "application/jsonx", "application/json-seq"):
    hdr = b"Content-Type: " + ct.encode() + b"\r\n" if ct else b""
    for path in (b"/v1/embeddings", b"/search"):
        out, closed = raw(P, b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + hdr +
                          b"Content-Length: 14\r\n\r\n" + EMB)
        json_error(out, 415, f"POST {path.decode()} with Content-Type {ct}")
for ct in ("application/json", "Application/JSON; charset=utf-8", "application/json;charset=UTF-8"):
    st, h, j = s.post("/v1/embeddings", {"input": "hi"}, headers={"Content-Type": ct})
    check(st == 200, f"Content-Type {ct}: {st} {j}")
st, h, _ = s.post("/v1/embeddings", {"input": "hi"}, headers={"Origin": "https://evil.example"})
check(not any(k.startswith("access-control-") for k in h), f"no CORS headers without --cors: {h}")
st, h, _ = s.request("OPTIONS", "/v1/embeddings", headers={"Origin": "https://evil.example",
                                                            "Access-Control-Request-Method": "POST"})
check(st == 405 and not any(k.startswith("access-control-") for k in h), f"no preflight without --cors: {st} {h}")
check(s.stop() == 0, "exit 0 after SIGTERM")

kd = tempfile.mkdtemp(prefix="modattn-hard-")
kf = os.path.join(kd, "key")
open(kf, "w").write("k3y\n")
s = Server(BIN, MODEL, "--quiet", "--cors", "https://app.example", "--api-key-file", kf)
auth = {"Authorization": "Bearer k3y"}
st, h, data = s.request("OPTIONS", "/v1/embeddings", headers={"Origin": "https://app.example",
                                                               "Access-Control-Request-Method": "POST",
                                                               "Access-Control-Request-Headers": "content-type"})
check(st == 204 and h.get("access-control-allow-origin") == "https://app.example"
      and "POST" in h.get("access-control-allow-methods", "")
      and "content-type" in h.get("access-control-allow-headers", "").lower()
      and "authorization" in h.get("access-control-allow-headers", "").lower(),
      f"a preflight with --cors (no key needed): {st} {h}")
st, h, j = s.post("/v1/embeddings", {"input": "hi"}, headers=dict(auth, Origin="https://app.example"))
check(st == 200 and h.get("access-control-allow-origin") == "https://app.example", f"POST with --cors: {st} {h}")
st, h, j = s.post("/v1/embeddings", {"input": "hi"}, headers={"Origin": "https://app.example"})
check(st == 401 and h.get("access-control-allow-origin") == "https://app.example", f"401 with --cors: {st} {h}")
check(s.stop() == 0, "exit 0 after SIGTERM")
for bad in ("*", "https://app.example/", "ftp://x", "https://", "app.example", "https://a b", "http://x:99999"):
    r = subprocess.run([BIN, "serve", "--model", MODEL, "--port", "0", "--cors", bad], capture_output=True, timeout=30)
    check(r.returncode == 2 and b"--cors" in r.stderr, f"--cors {bad!r} refused (exit 2): {r.returncode} {r.stderr[-200:]!r}")
for opt, bad in (("--max-client-bodies", "0"), ("--max-client-bodies", "x"), ("--max-queue-time", "-1"),
                 ("--max-queue-time", "abc")):
    r = subprocess.run([BIN, "serve", "--model", MODEL, "--port", "0", opt, bad], capture_output=True, timeout=30)
    check(r.returncode == 2 and opt.encode() in r.stderr, f"{opt} {bad} refused (exit 2): {r.returncode} {r.stderr[-200:]!r}")

# ---- 4: 513 stalled bodies from 127.0.0.1: /health and 127.0.0.2 still served
s = Server(BIN, MODEL, "--quiet", "--timeout", "30")
STALL = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         b"Content-Length: 1000\r\n\r\n{\"in")
stalled = []
for i in range(513):
    c = socket.create_connection(("127.0.0.1", s.port), source_address=("127.0.0.1", 0))
    c.sendall(STALL)
    stalled.append(c)
time.sleep(1.0)
refused = 0
for c in stalled:
    c.setblocking(False)
    try:
        d = c.recv(4096)
    except BlockingIOError:
        continue
    st, h, body, _ = parse_one(d)
    try:
        j = json.loads(body)
    except ValueError:
        j = None
    refused += st == 429 and error_shape(j) is not None and h.get("retry-after") == "1"
check(refused == 513 - 64, f"past --max-client-bodies (64) one address's bodies get 429 at once: {refused} of 513")


def from_other(method, path, body=None, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=timeout, source_address=("127.0.0.2", 0))
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


t0 = time.time()
try:
    st, data = from_other("GET", "/health")
except OSError as e:
    st, data = None, str(e)
check(st == 200 and time.time() - t0 < 2, f"/health while 127.0.0.1 stalls 513 bodies: {st} in {time.time() - t0:.2f} s")
t0 = time.time()
try:
    st, data = from_other("POST", "/v1/embeddings", {"input": "from another address"})
except OSError as e:
    st, data = None, str(e)
check(st == 200 and time.time() - t0 < 5,
      f"a complete request from 127.0.0.2 while 127.0.0.1 stalls 513 bodies: {st} {data[:200]!r} in {time.time() - t0:.2f} s")
st, _, j = s.post("/v1/embeddings", {"input": "same address"}, timeout=5)
check(st == 429 and error_shape(j), f"127.0.0.1 at its limit of unfinished bodies: {st}")
for c in stalled:
    c.close()
ok = False
for _ in range(50):  # the counts go with the connections
    time.sleep(0.1)
    if s.post("/v1/embeddings", {"input": "same address again"}, timeout=5)[0] == 200:
        ok = True
        break
check(ok, "once its stalled connections closed, 127.0.0.1 is served again")
check(s.stop() == 0, "exit 0 after SIGTERM")

# a request counts against --max-concurrent-requests only once its body is in
s = Server(BIN, MODEL, "--quiet", "--timeout", "30", "--max-concurrent-requests", "1", "--max-client-bodies", "4")
stalled = []
for i in range(3):
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(STALL)
    stalled.append(c)
time.sleep(0.3)
st, _, j = s.post("/v1/embeddings", {"input": "complete"}, timeout=5)
check(st == 200, f"3 stalled bodies and --max-concurrent-requests 1: a complete request is served: {st} {j}")
for i in range(2):  # the 4th is awaited, the 5th is past --max-client-bodies 4
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(STALL)
    stalled.append(c)
stalled[-1].settimeout(5)
try:
    d = stalled[-1].recv(4096)
except OSError:
    d = b""
check(d.startswith(b"HTTP/1.1 429 ") and b"--max-client-bodies" in d, f"--max-client-bodies 4: the 5th body refused: {d[:200]!r}")
stalled[-2].settimeout(0.5)
try:
    d = stalled[-2].recv(4096)
except OSError:
    d = b"(waiting)"
check(d == b"(waiting)", f"--max-client-bodies 4: the 4th body awaited: {d[:200]!r}")
for c in stalled:
    c.close()
check(s.stop() == 0, "exit 0 after SIGTERM")
finish("test_hardening")
