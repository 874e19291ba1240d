"""tests/server/test_abandon.py BIN MODEL_DIR — work nobody waits for is not done:
  - 20 clients send 200 inputs of 200 words each and disconnect once queued; a one-word request
    sent after them is answered within seconds, not after all of that work (it is dropped before
    it runs, or between a job's batches), counted in modattn_requests_abandoned_total and logged
    as client-closed;
  - --max-queue-time: a request that waited longer than that for an executor gets 503 with
    Retry-After (and the one that was running finishes)."""
import json
import os
import random
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, error_shape, finish  # noqa: E402

BIN, MODEL = sys.argv[1], sys.argv[2]
rng = random.Random(7)
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly hex "
         "every jovial gnome near the old lighthouse by the northern sea").split()


def big_body(seed):
    r = random.Random(seed)
    inputs = [" ".join(r.choice(WORDS) for _ in range(200)) for _ in range(200)]
    return json.dumps({"input": inputs}).encode()


def metric(s, name):
    text = s.request("GET", "/metrics", timeout=10)[2].decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


# ---- abandoned requests are dropped
s = Server(BIN, MODEL, "--threads", "2", "--timeout", "120", "--max-batch-tokens", "2048")
socks = []
for i in range(20):
    body = big_body(i)
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    socks.append(c)
t0 = time.time()
while metric(s, "modattn_requests_in_flight") != 20 and time.time() - t0 < 30:
    time.sleep(0.05)
check(metric(s, "modattn_requests_in_flight") == 20, "the 20 big requests are in flight")
time.sleep(0.5)
for c in socks:
    c.close()
t0 = time.time()
try:
    st, _, j = s.post("/v1/embeddings", {"input": "hello"}, timeout=60)
except OSError as e:
    st, j = None, str(e)
dt = time.time() - t0
# what the abandoned work would have taken: its tokens at the rate the server embeds them
tok, secs = metric(s, "modattn_tokens_total"), metric(s, "modattn_batch_duration_seconds_sum")
rate = tok / secs if tok and secs else 0
todo = 20 * 200 * 256  # tokens: every input is cut to the model's 256
print(f"abandon: one-word request answered in {dt:.2f} s; the abandoned work: ~{todo} tokens, "
      f"~{todo / rate if rate else float('inf'):.0f} s of embedding at {rate:.0f} tokens/s per executor-second", flush=True)
check(st == 200, f"the one-word request after 20 abandoned big ones: {st} {str(j)[:200]}")
check(dt < 15, f"... answered within 15 s, not after the abandoned work: {dt:.2f} s")
t0 = time.time()
while (metric(s, "modattn_requests_abandoned_total") or 0) < 18 and time.time() - t0 < 30:
    time.sleep(0.1)
ab = metric(s, "modattn_requests_abandoned_total")
check(ab is not None and ab >= 18, f"modattn_requests_abandoned_total counts them: {ab}")
t0 = time.time()
while metric(s, "modattn_requests_in_flight") != 0 and time.time() - t0 < 30:
    time.sleep(0.1)
check(metric(s, "modattn_requests_in_flight") == 0, f"nothing left in flight after {time.time() - t0:.1f} s")
log = s.read_log()
closed = len(re.findall(r'"POST /v1/embeddings" 499 .* client-closed', log))
check(closed >= 18, f"logged as client-closed: {closed}")
check(s.stop() == 0, "exit 0 after SIGTERM")

# ---- --max-queue-time: a request that waited too long gets 503 with Retry-After
s = Server(BIN, MODEL, "--quiet", "--workers", "1", "--threads", "1", "--max-queue-time", "1",
           "--max-batch-tokens", "2048")
holder = {}


def long_request():
    holder["r"] = s.request("POST", "/v1/embeddings", big_body(99), timeout=300)


t = threading.Thread(target=long_request)
t.start()
# the long request running first (its body is parsed and tokenised before it queues: wait for
# the executor to be busy, not a fixed time, which a loaded ASan run could outlast)
t0 = time.time()
while (metric(s, "modattn_executor_threads_busy") or 0) < 1 and time.time() - t0 < 60:
    time.sleep(0.02)
check((metric(s, "modattn_executor_threads_busy") or 0) >= 1, "the long request is running")
t0 = time.time()
st, h, j = s.post("/v1/embeddings", {"input": "behind a long one"}, timeout=300)
dt = time.time() - t0
t.join()
check(st == 503 and error_shape(j) and j["error"]["code"] == "queue_timeout" and h.get("retry-after") == "1",
      f"waited past --max-queue-time 1: 503 with Retry-After: {st} {h.get('retry-after')} {j}")
check(holder.get("r", (None,))[0] == 200, f"the request that was running finishes: {holder.get('r', (None,))[0]}")
print(f"max-queue-time: 503 after {dt:.2f} s", flush=True)
check(dt < 10, f"... soon after the second: {dt:.2f} s")
check(metric(s, "modattn_requests_queue_timeout_total") == 1, "counted in modattn_requests_queue_timeout_total")
st, _, j = s.post("/v1/embeddings", {"input": "alone again"}, timeout=60)
check(st == 200, f"a request with no queue is served: {st}")
check(s.stop() == 0, "exit 0 after SIGTERM")
finish("test_abandon")
