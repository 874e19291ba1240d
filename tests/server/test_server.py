"""tests/server/test_server.py BIN MODEL_DIR OTHER_MODEL_DIR — `modattn serve` end to end, with the
official `openai` client and the standard library as clients:
  - /health 503 while the model loads, 200 when ready; requests meanwhile 503;
  - the openai client, float and base64: vectors equal to `modattn embed`'s bit for bit, and to
    sentence-transformers' (the committed goldens) within cosine 0.99999; token-id inputs equal
    to their texts'; usage counts Hugging Face's tokens;
  - dynamic batching: concurrent requests merge into batches, each gets its own vectors in order;
  - every refusal of issue 14 with its status and an OpenAI error object naming the field:
    400, 401, 404, 405, 408 (slow header, slow body), 413 (body, inputs), 422, 429 (+Retry-After);
  - /search: ranked results, path_prefix, a document indexed while serving is found without a
    restart, a missing store 503 while embeddings work, another model's store 503;
  - a request over --mem-budget gets 503 and the server goes on;
  - /metrics in Prometheus' format, /v1/models, /openapi.json, the access log (--log-json);
  - options from the environment; SIGTERM drains: an in-flight request finishes, exit 0."""
import base64
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import (Server, check, embed_cli, error_shape, finish, floats_bits)  # noqa: E402

import openai  # noqa: E402

BIN, MODEL, OTHER = sys.argv[1], sys.argv[2], sys.argv[3]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TMP = tempfile.mkdtemp(prefix="modattn-test-server-")
GOLDEN = [json.loads(l) for l in open(os.path.join(REPO, "tests/fixtures/golden_minilm.jsonl"))]


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def index(db, *paths, model=MODEL):
    r = subprocess.run([BIN, "index", "--quiet", "--model", model, "--db", db, *paths], capture_output=True)
    return r.returncode, r.stderr.decode(errors="replace")


# ---- a store of the demo corpus, and one of another model
corpus = os.path.join(TMP, "corpus")
shutil.copytree(os.path.join(REPO, "demo/corpus"), corpus)
DB = os.path.join(TMP, "s.db")
rc, err = index(DB, corpus)
assert rc == 0, err

# ---- loading: /health 503, requests 503, then ready
s = Server(BIN, MODEL, "--db", DB, "--log-json", env={"MODATTN_TEST_SERVE_LOAD_DELAY_MS": "1500"}, wait_ready=False)
st, _, body = s.request("GET", "/health")
check(st == 503 and json.loads(body) == {"status": "loading"}, f"/health while loading: {st} {body!r}")
st, h, j = s.post("/v1/embeddings", {"input": "x"})
check(st == 503 and error_shape(j) and h.get("retry-after") == "1", f"embeddings while loading: {st} {j}")
s.wait_ready()
st, _, body = s.request("GET", "/health")
check(st == 200 and json.loads(body) == {"status": "ok"}, f"/health when ready: {st} {body!r}")

# ---- the openai client: float and base64, against `modattn embed` and sentence-transformers
texts = [g["text"] for g in GOLDEN[:40]] + ["", "x" * 5000, "naïve café — 東京 🌸", "line one\nline two\ttab"]
want, want_tokens = embed_cli(BIN, MODEL, texts)
client = openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="unused", max_retries=0)
r = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts, encoding_format="float")
got = [floats_bits(d.embedding) for d in r.data]
check([d.index for d in r.data] == list(range(len(texts))), "indices in input order")
check(got == want, f"float vectors equal modattn embed's bit for bit: {sum(a != b for a, b in zip(got, want))} differ")
check(r.usage.prompt_tokens == sum(want_tokens) == r.usage.total_tokens,
      f"usage {r.usage} vs embed's token counts {sum(want_tokens)}")
check(r.model == "all-MiniLM-L6-v2" and r.object == "list", f"model/object: {r.model} {r.object}")
r = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts, encoding_format="base64")
got64 = [base64.b64decode(d.embedding) for d in r.data]
check(got64 == want, f"base64 vectors equal modattn embed's: {sum(a != b for a, b in zip(got64, want))} differ")
r = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts[:5])  # the client's default (base64, decoded)
check([floats_bits(d.embedding) for d in r.data] == want[:5], "the client's default encoding decodes to the same vectors")
worst = min(cos(r2.embedding, g["embedding"]) for r2, g in
            zip(client.embeddings.create(model="all-MiniLM-L6-v2", input=[g["text"] for g in GOLDEN],
                                         encoding_format="float").data, GOLDEN))
check(worst >= 0.99999, f"cosine against sentence-transformers: min {worst}")
print(f"server vs sentence-transformers: min cosine {worst:.9f} over {len(GOLDEN)} goldens", flush=True)
# token ids: the goldens' Hugging Face ids without [CLS]/[SEP] embed as their texts
plain = [g for g in GOLDEN if not g["truncated"]][:12]
r_ids = client.embeddings.create(model="all-MiniLM-L6-v2", input=[g["ids"][1:-1] for g in plain], encoding_format="float")
r_txt = client.embeddings.create(model="all-MiniLM-L6-v2", input=[g["text"] for g in plain], encoding_format="float")
check([floats_bits(d.embedding) for d in r_ids.data] == [floats_bits(d.embedding) for d in r_txt.data],
      "token-id inputs embed as their texts, bit for bit")
check(r_ids.usage.prompt_tokens == sum(len(g["ids"]) for g in plain), f"token-id usage {r_ids.usage}")
st, _, j = s.post("/v1/embeddings", {"input": plain[0]["ids"][1:-1]})  # one list of ids: one input
check(st == 200 and len(j["data"]) == 1 and floats_bits(j["data"][0]["embedding"]) == floats_bits(r_txt.data[0].embedding),
      f"a single list of ids is one input: {st}")
st, _, j = s.post("/v1/embeddings", {"input": "Hello world", "dimensions": 384, "user": "u", "truncate": True})
check(st == 200 and len(j["data"][0]["embedding"]) == 384, f"dimensions = the model's, user, truncate: {st} {j}")

# ---- dynamic batching: a long request keeps the executor busy while small ones queue and merge
def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else None


met0 = s.request("GET", "/metrics")[2].decode()
b0 = metric(met0, "modattn_batches_total")
small = [[f"request {i} text {k}: {texts[(i * 3 + k) % 40]}" for k in range(4)] for i in range(16)]
small_want = [embed_cli(BIN, MODEL, t)[0] for t in small]
results = [None] * 17


def send(i, inputs):
    results[i] = s.post("/v1/embeddings", {"input": inputs, "encoding_format": "base64"})


threads = [threading.Thread(target=send, args=(16, [texts[k % 40] * 3 for k in range(300)]))]
threads += [threading.Thread(target=send, args=(i, small[i])) for i in range(16)]
threads[0].start()
time.sleep(0.1)
for t in threads[1:]:
    t.start()
for t in threads:
    t.join()
ok = all(results[i][0] == 200 and [base64.b64decode(d["embedding"]) for d in results[i][2]["data"]] == small_want[i]
         for i in range(16))
check(ok, "16 concurrent requests each get their own vectors, in order, equal to embed's")
met1 = s.request("GET", "/metrics")[2].decode()
b1 = metric(met1, "modattn_batches_total")
check(b0 is not None and b1 is not None and b1 - b0 < 17, f"17 requests in {b1 - b0} batches: requests were merged")
print(f"batching: 17 concurrent requests ran in {int(b1 - b0)} batches", flush=True)

# ---- elastic executors (--workers auto, the default): one per thread; a lone request ran on all of
# them (the first requests above came one at a time), none is busy at rest, and the log says so
ncpu = os.cpu_count() or 1
wide = metric(met1, "modattn_batches_wide_total")
# an executor answers its requests, then gives its threads back: "at rest" is a moment later, so the
# gauge is read until it is 0 (2 s at most) rather than in the same instant as the last answer
busy, deadline = metric(met1, "modattn_executor_threads_busy"), time.time() + 2
while busy != 0 and time.time() < deadline:
    time.sleep(0.02)
    busy = metric(s.request("GET", "/metrics")[2].decode(), "modattn_executor_threads_busy")
check(busy == 0, f"no executor thread busy at rest: {busy}")
if ncpu > 1:
    check(wide is not None and wide >= 1, f"a lone request's batch ran on every thread: {wide} wide batches")
    s.read_log()  # (flushes)
    ready_line = [ln for ln in open(s.log_path, errors="replace") if "serve: ready" in ln]
    check(ready_line and f"{ncpu} executors of 1 thread, elastic" in ready_line[0],
          f"the ready line says the executors are elastic: {ready_line}")
else:
    print(f"elastic executors: one CPU here, so one executor and no wide batches ({wide})", flush=True)
# the same vectors from fixed executors (--workers 1: one session of every thread)
s1 = Server(BIN, MODEL, "--workers", "1", "--quiet")
st, _, j = s1.post("/v1/embeddings", {"input": small[3], "encoding_format": "base64"})
check(st == 200 and [base64.b64decode(d["embedding"]) for d in j["data"]] == small_want[3],
      f"--workers 1 gives the same bits: {st}")
check("1 executor;" in s1.read_log(), "--workers 1: one executor: " + s1.read_log()[-300:])
s1.stop()

# ---- refusals, each with OpenAI's error object
def refused(path, body, status, param=None, code=None, what="", headers=None, raw=False):
    if raw:
        st, h, data = s.request("POST", path, body, headers)
        try:
            j = json.loads(data)
        except ValueError:
            j = None
    else:
        st, h, j = s.post(path, body, headers)
    ok = st == status and error_shape(j) and (param is None or j["error"]["param"] == param) and \
        (code is None or j["error"]["code"] == code)
    check(ok, f"{what or path}: want {status} param={param} code={code}, got {st} {j}")
    return h


refused("/v1/embeddings", "{not json", 400, None, "invalid_json", "malformed JSON", raw=True)
refused("/v1/embeddings", "[1, 2]", 400, None, "invalid_json", "a body that is not an object", raw=True)
refused("/v1/embeddings", {}, 400, "input", "missing_field", "no input")
refused("/v1/embeddings", {"input": []}, 400, "input", "invalid_value", "empty input")
refused("/v1/embeddings", {"input": 5.5}, 400, "input", "invalid_type", "input a number")
refused("/v1/embeddings", {"input": ["a", 3]}, 400, "input[1]", "invalid_type", "mixed input")
refused("/v1/embeddings", {"input": [[1, 2], [3, "x"]]}, 400, "input[1]", "invalid_type", "a string among ids")
refused("/v1/embeddings", {"input": [[1, 2], [-1]]}, 400, "input[1]", "invalid_value", "a negative id")
refused("/v1/embeddings", {"input": [[30522]]}, 400, "input[0]", "invalid_value", "an id past the vocabulary")
refused("/v1/embeddings", {"input": [[]]}, 400, "input[0]", "invalid_value", "an empty id list")
refused("/v1/embeddings", {"input": "a", "encoding_format": "int8"}, 400, "encoding_format", "invalid_value", "encoding")
refused("/v1/embeddings", {"input": "a", "dimensions": 385}, 400, "dimensions", "invalid_value", "more dimensions than the model's")
refused("/v1/embeddings", {"input": "a", "dimensions": 0}, 400, "dimensions", "invalid_value", "no dimensions")
refused("/v1/embeddings", {"input": "a", "dimensions": "384"}, 400, "dimensions", "invalid_type", "dimensions a string")
refused("/v1/embeddings", {"input": "a", "truncate": "yes"}, 400, "truncate", "invalid_type", "truncate a string")
refused("/v1/embeddings", {"input": "a", "user": 7}, 400, "user", "invalid_type", "user a number")
refused("/v1/embeddings", {"input": "a", "model": "text-embedding-3-small"}, 404, "model", "model_not_found", "another model")
refused("/v1/embeddings", {"input": "x " * 600, "truncate": False}, 422, "input", "context_length_exceeded", "too long, no truncation")
refused("/v1/embeddings", {"input": [list(range(1000, 1300))], "truncate": False}, 422, "input[0]", "context_length_exceeded",
        "too many ids, no truncation")
refused("/v1/embeddings", '{"input": "a", "input": "b"}', 400, None, "invalid_json", "a duplicate key", raw=True)
refused("/search", {"k": 3}, 400, "query", "missing_field", "search without query")
refused("/search", {"query": "x", "k": 0}, 400, "k", "invalid_value", "k = 0")
refused("/search", {"query": "x", "k": 10001}, 400, "k", "invalid_value", "k too large")
refused("/search", {"query": "x", "path_prefix": 3}, 400, "path_prefix", "invalid_type", "path_prefix a number")
refused("/search", {"query": "x", "mode": "fuzzy"}, 400, "mode", "invalid_value", "an unknown mode")
refused("/search", {"query": "x", "mode": 1}, 400, "mode", "invalid_type", "mode a number")
refused("/search", {"query": "x", "keyword_weight": 0}, 400, "keyword_weight", "invalid_value", "keyword_weight 0")
refused("/search", {"query": "x", "keyword_weight": "1"}, 400, "keyword_weight", "invalid_type", "keyword_weight a string")
refused("/search", {"query": "x", "rrf_k": -1}, 400, "rrf_k", "invalid_value", "rrf_k below 0")
refused("/search", {"query": "x", "rrf_k": 1e7}, 400, "rrf_k", "invalid_value", "rrf_k too large")
st, h, j = s.post("/nowhere", {"input": "x"})
check(st == 404 and error_shape(j), f"an unknown route: {st} {j}")
st, h, data = s.request("GET", "/v1/embeddings")
check(st == 405 and "POST" in h.get("allow", "") and error_shape(json.loads(data)), f"GET embeddings: {st} {h}")
st, h, data = s.request("DELETE", "/health")
check(st == 405 and "GET" in h.get("allow", ""), f"DELETE /health: {st} {h}")
st, h, data = s.request("POST", "/v1/embeddings", '{"input": "\\u0000 nul inside"}')
check(st == 200, f"a text holding U+0000: {st} {data[:200]!r}")
st, h, data = s.request("POST", "/v1/embeddings", '{"input": "big number", "x": 123456789012345678901234567890}')
check(st == 200, f"an unread field with a 100-bit integer: {st} {data[:200]!r}")
st, h, data = s.request("POST", "/v1/embeddings", '{"input": "nul key", "a\\u0000b": 1}')
check(st == 200, f"an unread key holding U+0000: {st} {data[:200]!r}")

# ---- /search
st, _, j = s.post("/search", {"query": "a tea party with the March Hare and the Hatter", "k": 3})
check(st == 200 and len(j["results"]) == 3 and j["results"][0]["path"].endswith("alice-ch07-a-mad-tea-party.html")
      and j["results"][0]["rank"] == 1 and j["vectors"] == "vector_file", f"search: {st} {str(j)[:400]}")
cli = subprocess.run([BIN, "search", "--json", "-k", "3", "--model", MODEL, "--db", DB,
                      "a tea party with the March Hare and the Hatter"], capture_output=True)
cj = json.loads(cli.stdout)
check([(x["score"], x["start"]) for x in cj["results"]] == [(round(x["score"], 6), x["start"]) for x in j["results"]]
      or [x["start"] for x in cj["results"]] == [x["start"] for x in j["results"]],
      "the server's ranking equals `modattn search`'s")
# each mode, and the fusion's K and weight, rank as `modattn search` does with the same options
for mode, extra, opts in (("vector", {}, []), ("keyword", {}, []), ("hybrid", {"keyword_weight": 2, "rrf_k": 10},
                                                                       ["--keyword-weight", "2", "--rrf-k", "10"])):
    q = "the Hatter's riddle about a raven and a writing-desk"
    st, _, j = s.post("/search", dict({"query": q, "k": 5, "mode": mode}, **extra))
    cli = subprocess.run([BIN, "search", "--json", "-k", "5", "--mode", mode, *opts, "--model", MODEL, "--db", DB, q],
                         capture_output=True)
    cj = json.loads(cli.stdout)
    check(st == 200 and j["mode"] == mode and j["results"] and
          [(x["path"], x["start"], x["vector_rank"], x["keyword_rank"]) for x in j["results"]] ==
          [(x["path"], x["start"], x["vector_rank"], x["keyword_rank"]) for x in cj["results"]],
          f"/search mode {mode} {extra} ranks as the CLI: {st} {str(j)[:300]} / {str(cj)[:300]}")
st, _, j = s.post("/search", {"query": "Hatter", "k": 3, "mode": "keyword"})
check(st == 200 and all(x["keyword_rank"] and x["vector_rank"] is None and x["highlights"] and
                        all(x["text"].encode()[a:b].decode().lower() == "hatter" for a, b in x["highlights"])
                        for x in j["results"]), f"keyword results carry the byte spans of the word: {str(j)[:400]}")
st, _, j = s.post("/search", {"query": "tea party", "k": 5, "path_prefix": os.path.join(corpus, "sqlite")})
check(st == 200 and j["results"] and all(x["path"].startswith(os.path.join(corpus, "sqlite")) for x in j["results"]),
      f"path_prefix keeps only those documents: {str(j)[:300]}")
st, _, j = s.post("/search", {"query": "tea party", "path_prefix": "/no/such/place"})
check(st == 200 and j["results"] == [], f"a path_prefix matching nothing: {st} {j}")
new = os.path.join(corpus, "new-lighthouse.txt")
open(new, "w").write("The lighthouse keeper polished the great lens every evening before the storm.\n")
rc, err = index(DB, corpus)
check(rc == 0, f"index while serving: {rc} {err}")
st, _, j = s.post("/search", {"query": "lighthouse keeper polishing the lens", "k": 1})
check(st == 200 and j["results"] and j["results"][0]["path"] == new, f"a document indexed while serving is found: {str(j)[:300]}")
check(j.get("index") == "exact", f"no ANN index yet: the exact scan: {j.get('index')}")

# an ANN index built while serving: used from the next search on, with the exact scan's ranking
# (hnsw through FAISS; a build without FAISS uses the compact int8 kind, which needs none: the
# server's part, a new index taken up while serving and kept up to date, is the same; FAISS's own
# kinds are tested, or listed as skipped, by test_ann and cli_ann)
ANN = "hnsw" if "ann: faiss" in subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout else "int8"
if ANN != "hnsw":
    print("test_server: this build has no FAISS: the ANN index while serving is tested with --ann int8")
r = subprocess.run([BIN, "index", "--quiet", "--model", MODEL, "--db", DB, "--ann", ANN], capture_output=True)
check(r.returncode == 0, f"index --ann {ANN} while serving: {r.stderr[-300:]!r}")
q = "a tea party with the March Hare and the Hatter"
st, _, j = s.post("/search", {"query": q, "k": 5, "mode": "vector"})
cli = subprocess.run([BIN, "search", "--json", "-k", "5", "--mode", "vector", "--exact", "--model", MODEL, "--db", DB, q],
                     capture_output=True)
cj = json.loads(cli.stdout)
check(st == 200 and j.get("index") == ANN and [(x["path"], x["start"]) for x in j["results"]] ==
      [(x["path"], x["start"]) for x in cj["results"]], f"/search through the ANN index ranks as the exact scan: {str(j)[:300]}")
st, _, j = s.post("/search", {"query": "Hatter", "k": 3, "mode": "keyword"})
check(st == 200 and j.get("index") == "none", f"keyword mode: no vector ranking: {j.get('index')}")
new2 = os.path.join(corpus, "new-glacier.txt")
open(new2, "w").write("The glacier calved an iceberg the size of a cathedral into the fjord.\n")
rc, err = index(DB, corpus)  # keeps the ANN index up to date
st, _, j = s.post("/search", {"query": "an iceberg breaking off a glacier", "k": 1, "mode": "vector"})
check(rc == 0 and st == 200 and j.get("index") == ANN and j["results"][0]["path"] == new2,
      f"a document indexed while serving is found through the ANN index: {rc} {err} {str(j)[:300]}")

# searches while `index` replaces documents: every search answers 200 from one snapshot
stop_flag = threading.Event()
search_statuses = []


def searcher():
    while not stop_flag.is_set():
        st, _, j = s.post("/search", {"query": "lighthouse keeper and the storm", "k": 5})
        search_statuses.append(st)


st_threads = [threading.Thread(target=searcher) for _ in range(2)]
for t in st_threads:
    t.start()
for round_ in range(4):
    open(new, "w").write(f"Round {round_}: the lighthouse keeper polished the lens before the storm. " * (20 + round_))
    rc, err = index(DB, new)
    check(rc == 0, f"index round {round_} while searching: {err}")
stop_flag.set()
for t in st_threads:
    t.join()
check(search_statuses and set(search_statuses) == {200},
      f"{len(search_statuses)} searches during 4 index runs: statuses {sorted(set(search_statuses))}")
# a GET with a body: the body is dropped, not kept; past --max-body the connection is cut
st, _, body = s.request("GET", "/health", "x" * 100000)
check(st == 200, f"GET /health with a 100 kB body: {st}")
try:
    st, _, body = s.request("GET", "/health", "x" * 3000000)
    cut = False
except OSError:
    cut = True
check(cut or st != 200, f"GET /health with a 3 MB body is cut off: {'cut' if cut else st}")

# ---- models, openapi, metrics
st, _, data = s.request("GET", "/v1/models")
m = json.loads(data)
check(st == 200 and m["data"][0]["id"] == "all-MiniLM-L6-v2" and m["data"][0]["dimensions"] == 384, f"models: {m}")
check(client.models.list().data[0].id == "all-MiniLM-L6-v2", "models through the openai client")
st, _, data = s.request("GET", "/openapi.json")
spec = json.loads(data)
check(st == 200 and spec["openapi"].startswith("3.") and
      spec["components"]["schemas"]["EmbeddingsRequest"]["properties"]["dimensions"]["maximum"] == 384 and
      spec["components"]["schemas"]["TokenIds"]["items"]["maximum"] == 30521, "openapi.json with the model's values")
st, h, data = s.request("GET", "/metrics")
text = data.decode()
check(st == 200 and h.get("content-type", "").startswith("text/plain; version=0.0.4"), f"metrics content type {h}")
for name in ["modattn_http_requests_total", "modattn_http_request_duration_seconds", "modattn_queue_depth",
             "modattn_batch_inputs", "modattn_batch_tokens", "modattn_tokens_total", "modattn_attention_calls_total",
             "modattn_memory_bytes", "modattn_requests_in_flight"]:
    check(f"# TYPE {name} " in text and f"# HELP {name} " in text, f"metric {name} has HELP and TYPE")
check(re.search(r'^modattn_http_requests_total\{route="/v1/embeddings",status="200"\} [1-9]', text, re.M),
      "requests by route and status")
check(re.search(r'^modattn_http_requests_total\{route="/v1/embeddings",status="400"\} [1-9]', text, re.M),
      "400s counted")
check(re.search(r'^modattn_attention_calls_total\{implementation="[a-z_]+"\} [1-9]', text, re.M), "attention calls by implementation")
check(re.search(r'^modattn_memory_bytes\{device="cpu",category="weights"\} [1-9]', text, re.M), "memory by device and category")
# every histogram: cumulative buckets ending at +Inf equal to _count
for name in set(re.findall(r"^# TYPE (\S+) histogram$", text, re.M)):
    series = {}
    for labels, le, v in re.findall(r"^" + name + r"_bucket\{(.*?)le=\"([^\"]+)\"\} (\d+)$", text, re.M):
        series.setdefault(labels, []).append((le, int(v)))
    for labels, b in series.items():
        counts = [v for _, v in b]
        cnt = re.search(r"^" + name + r"_count" + (r"\{" + re.escape(labels.rstrip(",")) + r"\}" if labels else "")
                        + r" (\d+)$", text, re.M)
        check(b[-1][0] == "+Inf" and counts == sorted(counts) and cnt and int(cnt.group(1)) == counts[-1],
              f"histogram {name}{{{labels}}} cumulative, +Inf = _count")
st = s.stop()
check(st == 0, f"exit status after SIGTERM: {st}")
log_lines = [l for l in open(s.log_path) if l.startswith("{")]
entries = [json.loads(l) for l in log_lines]
check(entries and all({"time", "client", "method", "path", "status", "bytes", "ms"} <= set(e) for e in entries),
      f"--log-json: one JSON line per request ({len(entries)})")
check(any(e["path"] == "/search" and e["status"] == 200 for e in entries), "the access log has the searches")

# ---- an API key, limits from the environment, truncation off, a missing store
keyf = os.path.join(TMP, "key")
open(keyf, "w").write("s3cret-key\n")
missing = os.path.join(TMP, "later.db")
s = Server(BIN, MODEL, "--api-key-file", keyf, "--db", missing, "--no-truncate",
           env={"MODATTN_MAX_INPUTS": "3", "MODATTN_MAX_BODY": "64K", "MODATTN_TIMEOUT": "1"})
auth = {"Authorization": "Bearer s3cret-key"}
st, _, body = s.request("GET", "/health")
check(st == 200, f"/health needs no key: {st}")
h = refused("/v1/embeddings", {"input": "a"}, 401, None, "invalid_api_key", "no key")
check(h.get("www-authenticate") == "Bearer", f"401 says WWW-Authenticate: {h}")
refused("/v1/embeddings", {"input": "a"}, 401, None, "invalid_api_key", "a wrong key", headers={"Authorization": "Bearer s3cret-kez"})
refused("/v1/embeddings", {"input": "a"}, 401, None, "invalid_api_key", "a prefix of the key", headers={"Authorization": "Bearer s3cret"})
st, _, data = s.request("GET", "/metrics")
check(st == 401, f"/metrics needs the key: {st}")
st, _, j = s.post("/v1/embeddings", {"input": ["a", "b", "c"]}, auth)
check(st == 200, f"the right key: {st} {j}")
refused("/v1/embeddings", {"input": ["a", "b", "c", "d"]}, 413, "input", "too_many_inputs", "MODATTN_MAX_INPUTS=3", headers=auth)
refused("/v1/embeddings", {"input": "x" * 70000}, 413, None, "payload_too_large", "MODATTN_MAX_BODY=64K", headers=auth)
refused("/v1/embeddings", {"input": "x " * 600}, 422, "input", "context_length_exceeded", "--no-truncate", headers=auth)
st, _, j = s.post("/v1/embeddings", {"input": "x " * 600, "truncate": True}, auth)
check(st == 200, f"a request may ask for truncation: {st}")
# a body sent in chunks (no Content-Length) past --max-body: 413 when it ends; one that goes on
# past twice --max-body is cut off
def chunked(nchunks, end):
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-key\r\n"
                 b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    sent = 0
    try:
        for _ in range(nchunks):
            chunk = b"x" * 4096
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sent += len(chunk)
        if end:
            sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    sock.settimeout(10)
    try:
        resp = sock.recv(4096).decode(errors="replace")
    except OSError as e:
        resp = f"error {e}"
    sock.close()
    return resp, sent


resp, _ = chunked(24, True)  # 96 KiB
check(resp.startswith("HTTP/1.1 413"), f"a chunked body past --max-body: {resp[:120]!r}")
resp, sent = chunked(4096, False)  # 16 MiB, never ending
check(not resp.startswith("HTTP/1.1 2") and sent < 4096 * 4096, f"an endless chunked body is cut off: {resp[:80]!r} after {sent} bytes")
# slow clients: a header and a body that take longer than --timeout 1 (trickled, so never idle)
def trickle(parts, pause):
    c = socket.create_connection(("127.0.0.1", s.port))
    c.settimeout(5)
    try:
        for p in parts:
            c.sendall(p)
            time.sleep(pause)
    except OSError:
        pass  # the server may answer and close before the last piece
    try:
        return c.recv(4096).decode(errors="replace")
    except OSError as e:
        return f"error {e}"
    finally:
        c.close()


req_head = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-key\r\nContent-Type: application/json\r\n"
resp = trickle([req_head[i:i + 8] for i in range(0, len(req_head), 8)] + [b"Content-Length: 15\r\n\r\n{\"input\": \"a\"}"], 0.1)
check(resp.startswith("HTTP/1.1 408"), f"headers trickled over 1 s: {resp[:120]!r}")
body = b'{"input": "slow body"}'
resp = trickle([req_head + b"Content-Length: %d\r\n\r\n" % len(body)] + [body[i:i + 3] for i in range(0, len(body), 3)], 0.17)
check(resp.startswith("HTTP/1.1 408"), f"a body trickled over 1 s: {resp[:120]!r}")
c = socket.create_connection(("127.0.0.1", s.port))  # a stalled body: 408 and closed after the timeout
c.sendall(req_head + b"Content-Length: 100\r\n\r\n{")
c.settimeout(10)
t0 = time.time()
got, closed = b"", False
try:
    while True:
        d = c.recv(4096)
        if not d:
            closed = True
            break
        got += d
except OSError:
    closed = True
check(closed and got.startswith(b"HTTP/1.1 408 ") and b'"request_timeout"' in got and time.time() - t0 < 5,
      f"a stalled body is answered 408 and closed after --timeout ({time.time() - t0:.1f} s): {got[:80]!r}")
c.close()
# search without a store: 503, embeddings still work; then the store appears
st, _, j = s.post("/search", {"query": "tea"}, auth)
check(st == 503 and error_shape(j) and "modattn index" in j["error"]["message"], f"search without a store: {st} {j}")
check(s.post("/v1/embeddings", {"input": "still here"}, auth)[0] == 200, "embeddings work without a store")
rc, err = index(missing, os.path.join(corpus, "jargon-hacker.txt"))
st, _, j = s.post("/search", {"query": "hacker", "k": 1}, auth)
check(rc == 0 and st == 200 and j["results"], f"the store made while serving is searched: {st} {str(j)[:200]}")
check(s.stop() == 0, "exit 0")

# ---- another model's store: search 503 naming it, embeddings fine
other_db = os.path.join(TMP, "other.db")
rc, err = index(other_db, os.path.join(corpus, "jargon-hacker.txt"), model=OTHER)
check(rc == 0, f"index with the other model: {err}")
s = Server(BIN, MODEL, "--db", other_db, "--quiet")
st, _, j = s.post("/search", {"query": "hacker"})
check(st == 503 and error_shape(j) and "tiny-bert-cls" in j["error"]["message"], f"another model's store: {st} {j}")
check(s.post("/v1/embeddings", {"input": "fine"})[0] == 200, "embeddings with another model's store")

# ---- 429: past --max-concurrent-requests, at once, with Retry-After; the rest 200
check(s.stop() == 0, "exit 0")
s = Server(BIN, MODEL, "--quiet", "--max-concurrent-requests", "2", "--threads", "1")
statuses, retry = [], []
lock = threading.Lock()


def hammer(i):
    st, h, j = s.post("/v1/embeddings", {"input": [texts[(i + k) % 40] for k in range(24)]})
    with lock:
        statuses.append(st)
        if st == 429:
            retry.append(h.get("retry-after") == "1" and error_shape(j))


ts = [threading.Thread(target=hammer, args=(i,)) for i in range(12)]
for t in ts:
    t.start()
for t in ts:
    t.join()
check(set(statuses) <= {200, 429} and 429 in statuses and 200 in statuses and all(retry),
      f"12 at once with --max-concurrent-requests 2: {sorted(statuses)}")

# ---- SIGTERM while a request is in flight: it finishes; then no new connections; exit 0
holder = {}


def long_request():
    holder["r"] = s.post("/v1/embeddings", {"input": [texts[k % 40] * 4 for k in range(200)]}, timeout=300)


t = threading.Thread(target=long_request)
t.start()
# its body complete and admitted (counted in flight), not a fixed time that a loaded ASan run
# could outlast: a body still arriving at the signal is answered 503 shutting_down
t0 = time.time()
while (metric(s.request("GET", "/metrics")[2].decode(), "modattn_requests_in_flight") or 0) < 1 and time.time() - t0 < 60:
    time.sleep(0.02)
s.proc.send_signal(15)
t.join()
check(holder["r"][0] == 200 and len(holder["r"][2]["data"]) == 200, f"the in-flight request finished: {holder['r'][0]}")
try:
    s.request("GET", "/health", timeout=2)
    refusedconn = False
except OSError:
    refusedconn = True
rc = s.proc.wait(60)
check(rc == 0, f"exit 0 after the drain: {rc}")
check(refusedconn or rc == 0, "no new connection after SIGTERM")
check("SIGTERM: no new connections" in s.read_log(), "the drain is said on stderr")

# ---- a request over --mem-budget: 503, and the server goes on
s = Server(BIN, MODEL, "--quiet", "--mem-budget", "300M", "--max-batch-tokens", "65536")
long_text = "the quick brown fox jumps over the lazy dog " * 40  # past 256 tokens: cut to 256
st, _, j = s.post("/v1/embeddings", {"input": [long_text] * 300}, timeout=300)  # one 65536-token batch: ~600 MB
check(st == 503 and error_shape(j) and "budget" in j["error"]["message"], f"over the budget: {st} {str(j)[:300]}")
st, _, j = s.post("/v1/embeddings", {"input": "small"})
check(st == 200, f"the next request is served: {st} {j}")
check(s.stop() == 0, "exit 0")

# ---- the command line: --help, a bad option, a bad value
r = subprocess.run([BIN, "serve", "--help"], capture_output=True)
check(r.returncode == 0 and b"--max-concurrent-requests" in r.stdout and b"MODATTN_PORT" in r.stdout, "serve --help")
r = subprocess.run([BIN, "serve", "--bogus"], capture_output=True)
check(r.returncode == 2 and b"unknown option" in r.stderr, f"a bad option: {r.returncode}")
r = subprocess.run([BIN, "serve", "--port", "70000"], capture_output=True)
check(r.returncode == 2 and b"--port" in r.stderr, f"a bad port: {r.returncode} {r.stderr!r}")
r = subprocess.run([BIN, "serve"], capture_output=True, env=dict(os.environ, MODATTN_TIMEOUT="soon"))
check(r.returncode == 2 and b"MODATTN_TIMEOUT" in r.stderr, f"a bad value from the environment: {r.returncode} {r.stderr!r}")

shutil.rmtree(TMP, ignore_errors=True)
finish("test_server")
