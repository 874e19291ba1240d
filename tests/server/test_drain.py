"""tests/server/test_drain.py BIN MODEL — `serve --drain-timeout` (issue 45), the contract of
server/server.c and README's options table: on SIGTERM the server stops accepting (the listening
socket is closed: a new connection is refused), /health answers 503 {"status":"draining"}, a new
request on a connection kept alive from before gets 503 with code "shutting_down", the requests in
flight finish (200) and the server exits 0 as soon as they have, well within --drain-timeout;
when --drain-timeout passes first, what has not been run gets 503 ("its --drain-timeout passed")
and the server exits 0 shortly after the timeout, without waiting for the rest of the queue.

The in-flight work is made long on purpose (one model thread, one executor, small batches, many
long inputs) so that it is still running when the checks during the drain are made; a check says
so if it was not (the machine too fast for the test), rather than passing without meaning."""
import http.client
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, error_shape, finish  # noqa: E402

BIN, MODEL = sys.argv[1], sys.argv[2]
SLOW = ["--threads", "1", "--workers", "1", "--max-batch-tokens", "1024"]
# about 250 tokens each: cut to the model's 256, so each input is a full-length one
LONG = " ".join(f"word{i} the quick brown fox jumps over the lazy dog" for i in range(30))


def inflight(s):
    st, _, body = s.request("GET", "/metrics", timeout=10)
    m = re.search(rb"^modattn_requests_in_flight (\d+)", body, re.M)
    return int(m.group(1)) if st == 200 and m else -1


def wait_inflight(s, n, limit=60):
    t0 = time.time()
    while time.time() - t0 < limit:
        if inflight(s) >= n:
            return True
        time.sleep(0.02)
    return False


def post_on(conn, path, obj):
    conn.request("POST", path, body=json.dumps(obj), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, None


# ---- the in-flight request finishes; what arrives during the drain gets 503; exit 0 at once after
DRAIN = 60
s = Server(BIN, MODEL, "--drain-timeout", str(DRAIN), *SLOW)
kept = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)  # kept alive from before SIGTERM
kept.request("GET", "/health")
r = kept.getresponse()
check(r.status == 200 and json.loads(r.read()) == {"status": "ok"}, "/health 200 before the drain")
holder = {}


def long_request():
    holder["r"] = s.post("/v1/embeddings", {"input": [LONG] * 48}, timeout=600)
    holder["t"] = time.time()


t = threading.Thread(target=long_request)
t.start()
check(wait_inflight(s, 1), "the long request is in flight before SIGTERM")
t_term = time.time()
s.proc.send_signal(signal.SIGTERM)
health = None
for _ in range(250):  # the flag is set right after the signal is taken: poll /health on the kept connection
    kept.request("GET", "/health")
    r = kept.getresponse()
    health = (r.status, r.read())
    if health[0] == 503:
        break
    time.sleep(0.02)
check(health and health[0] == 503 and json.loads(health[1]) == {"status": "draining"},
      f"during the drain /health says 503 draining: {health}")
st, j = post_on(kept, "/v1/embeddings", {"input": "a request that arrives during the drain"})
check(st == 503 and error_shape(j) and j["error"]["code"] == "shutting_down" and "shutting down" in j["error"]["message"],
      f"a new request on a kept-alive connection during the drain: 503 shutting_down: {st} {str(j)[:200]}")
still_running = "r" not in holder
check(still_running, "the long request was still in flight when the drain's 503 was answered (else this test "
      "checked nothing during the drain: make its work longer)")
kept.close()
try:
    s.request("GET", "/health", timeout=2)
    refused = False
except OSError:
    refused = True
check(refused, "a new connection during the drain is refused (the listening socket is closed)")
t.join()
st, _, j = holder["r"]
check(st == 200 and j and len(j["data"]) == 48 and all(len(d["embedding"]) == 384 for d in j["data"]),
      f"the in-flight request finished with its 48 vectors: {st} {str(j)[:200]}")
try:
    rc = s.proc.wait(DRAIN + 30)
except Exception:
    rc = None
t_exit = time.time()
check(rc == 0, f"exit 0 after the drain: {rc}")
check(t_exit - t_term < DRAIN, f"exit within --drain-timeout {DRAIN} s: {t_exit - t_term:.1f} s")
check(t_exit - holder["t"] < 5, f"exit soon after the in-flight request finished, not at the timeout: "
      f"{t_exit - holder['t']:.1f} s later")
log = s.read_log()
s.log.close()
check("SIGTERM: no new connections; finishing 1 request in flight" in log, "the drain is said on stderr: " + log[-400:])
check("still in flight after" not in log, "nothing was cut by the timeout")

# ---- --drain-timeout passes first: what was not run gets 503 naming it; exit 0 soon after the timeout
DRAIN = 1
s = Server(BIN, MODEL, "--drain-timeout", str(DRAIN), *SLOW)
answers = []
lock = threading.Lock()


def queued_request():
    r = s.post("/v1/embeddings", {"input": [LONG] * 48}, timeout=600)
    with lock:
        answers.append(r)


ts = [threading.Thread(target=queued_request) for _ in range(4)]
for x in ts:
    x.start()
check(wait_inflight(s, 4), "four long requests in flight (one running, three queued behind one executor)")
t_term = time.time()
s.proc.send_signal(signal.SIGTERM)
try:
    rc = s.proc.wait(120)
except Exception:
    rc = None
t_exit = time.time()
for x in ts:
    x.join()
statuses = sorted(a[0] for a in answers)
check(rc == 0, f"exit 0 after the timeout: {rc}")
# four requests of 48 full inputs at one thread take far longer than 1 s + one batch of 1024 tokens
check(t_exit - t_term < DRAIN + 15, f"exit soon after --drain-timeout {DRAIN} s (not after the whole queue): "
      f"{t_exit - t_term:.1f} s")
check(len(answers) == 4 and set(statuses) <= {200, 503}, f"every request answered, 200 or 503: {statuses}")
cut = [a for a in answers if a[0] == 503]
check(len(cut) >= 3 and all(error_shape(a[2]) and "--drain-timeout" in a[2]["error"]["message"] for a in cut),
      f"what was not run gets 503 naming --drain-timeout: {[a[2] for a in cut][:2]}")
log = s.read_log()
s.log.close()
check(re.search(r"\d+ requests? still in flight after 1 s: those not yet started get 503", log) is not None,
      "the cut is said on stderr: " + log[-400:])
check("modattn: serve: stopped" in log, "the server says it stopped")

finish("test_drain")
