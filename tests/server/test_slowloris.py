"""tests/server/test_slowloris.py BIN MODEL_DIR — slow clients never block others: 400 connections
that send a request's headers a few bytes at a time (never finishing), plus 100 that send only a
body's first bytes (64 of them awaited, --max-client-bodies, the rest refused at once), while
/health must answer in under 1 s every time and embeddings still work.
A head still arriving --timeout after its connection opened gets 408 then (the front gate does not
wait for it to finish: a trickling client holds no connection past --timeout); stalled bodies are
answered 408 and closed at --timeout after their heads."""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, finish  # noqa: E402

BIN, MODEL = sys.argv[1], sys.argv[2]
s = Server(BIN, MODEL, "--quiet", "--timeout", "5")
HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris\r\nX-A: "
socks, stop = [], threading.Event()
for i in range(400):
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(HEAD[:20])
    socks.append(c)
bodies = []
for i in range(100):
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"in")
    bodies.append(c)


sent = [20]


def drip():  # one more header byte per connection every 2 s: never idle past --timeout, never done
    k = 20
    while not stop.is_set() and k < len(HEAD):
        for c in socks:
            try:
                c.sendall(HEAD[k:k + 1])
            except OSError:
                pass
        k += 1
        sent[0] = k
        stop.wait(2)
    while not stop.is_set():
        for c in socks:
            try:
                c.sendall(b"a")
            except OSError:
                pass
        stop.wait(2)


t = threading.Thread(target=drip)
t.start()
worst = 0.0
for i in range(30):
    t0 = time.time()
    st, _, _ = s.request("GET", "/health", timeout=5)
    dt = time.time() - t0
    worst = max(worst, dt)
    check(st == 200, f"/health during the slow clients: {st}")
    time.sleep(0.25)
check(worst < 1.0, f"/health answered within 1 s each time (worst {worst:.3f} s)")
print(f"slowloris: 500 slow connections; /health worst {worst * 1000:.1f} ms over 30 calls", flush=True)
st, _, j = s.post("/v1/embeddings", {"input": ["still served"]}, timeout=10)
check(st == 200, f"embeddings during the slow clients: {st}")
# the stalled bodies are closed --timeout after their heads (5 s; ~8 s ago by now), with a 408;
# those past --max-client-bodies (64 from one address) got 429 at once
closed = refused = timed_out = 0
deadline = time.time() + 15  # (a loaded ASan run may be late with them: wait for each, up to this)
for c in bodies:
    c.settimeout(max(0.5, deadline - time.time()))
    got = b""
    try:
        while True:
            d = c.recv(4096)
            if not d:
                closed += 1
                break
            got += d
    except OSError:
        pass
    refused += got.startswith(b"HTTP/1.1 429 ")
    timed_out += got.startswith(b"HTTP/1.1 408 ") and b'"request_timeout"' in got
check(closed == len(bodies), f"stalled bodies closed after --timeout: {closed} of {len(bodies)}")
check(timed_out == 64, f"... the 64 awaited ones with a JSON 408: {timed_out}")
check(refused == len(bodies) - 64, f"bodies past --max-client-bodies 64 refused at once (429): {refused}")
stop.set()
t.join()
# every trickling head was answered 408 once --timeout had passed (the test has run ~10 s)
answered = 0
deadline = time.time() + 15
for c in socks[1:]:
    c.settimeout(max(0.05, deadline - time.time()))
    try:
        answered += c.recv(200).startswith(b"HTTP/1.1 408 ")
    except OSError:
        pass
check(answered == len(socks) - 1, f"heads still trickling after --timeout got 408: {answered} of {len(socks) - 1}")
# a trickled header that completes after --timeout gets 408
c = socks[0]
c.settimeout(5)
try:
    c.sendall(HEAD[sent[0]:] + b"a\r\n\r\n")
except OSError:  # (the 408 came at the deadline and the gate has closed the connection since)
    pass
try:
    resp = c.recv(200).decode(errors="replace")
except OSError as e:
    resp = f"error {e}"
check(resp.startswith("HTTP/1.1 408"), f"a header finished after --timeout: {resp[:80]!r}")
for c in socks + bodies:
    c.close()
check(s.stop() == 0, "exit 0 after SIGTERM")
finish("test_slowloris")
