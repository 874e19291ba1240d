"""tests/server/test_rerank.py BIN — POST /rerank (text-embeddings-inference's body and response) with
--rerank-model: scores against transformers' goldens (tests/fixtures/rerank_golden.json), best first,
raw_scores, return_text, truncate; the same bits alone, in concurrent requests and beside concurrent
embeddings (never batched together); the limits (422 for an empty or missing query or list, 413 past
1000 texts or a pair too long with truncation off), 404 on a server without a reranker, and
/openapi.json describing the route. Needs `make model`: "not available here" and 77 without it."""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, error_shape, finish  # noqa: E402

BIN = sys.argv[1]
EMB, CE = ".models/tiny-bert-cls", ".models/tiny-cross-encoder"
for m in (EMB, CE):
    if not os.path.isfile(os.path.join(m, "model.safetensors")):
        print(f"test_rerank: not available here: {m} is missing (run `make model`)")
        sys.exit(77)
G = json.load(open("tests/fixtures/rerank_golden.json"))
ROWS = G["models"]["tiny-cross-encoder"]["rows"]


def close(a, b):
    return abs(a - b) <= 1e-5 * abs(b) + 1e-6


def err(st, j, status, param, what):
    check(st == status and error_shape(j), f"{what}: status {st} (want {status}): {j}")
    if error_shape(j) and param:
        check(j["error"]["param"] == param, f"{what}: param {j['error']['param']!r} (want {param!r})")


s = Server(BIN, EMB, "--rerank-model", CE, "--quiet")
try:
    # the goldens: pairs 0-2, one query with one text each
    for i, (q, p) in enumerate(G["pairs"][:3]):
        st, _, j = s.post("/rerank", {"query": q, "texts": [p]})
        check(st == 200 and isinstance(j, list) and len(j) == 1 and j[0]["index"] == 0, f"pair {i}: {st} {j}")
        if st == 200:
            check(close(j[0]["score"], ROWS[i]["score"][0]), f"pair {i}: {j[0]['score']} vs {ROWS[i]['score'][0]}")
            check("text" not in j[0], f"pair {i}: text without return_text")
        st, _, j = s.post("/rerank", {"query": q, "texts": [p], "raw_scores": True})
        check(st == 200 and close(j[0]["score"], ROWS[i]["logits"][0]), f"pair {i} raw: {j} vs {ROWS[i]['logits']}")
    # several texts: best first, return_text, each score its own alone
    q = "who makes honey"
    texts = ["Bees make honey.", "The store survives a crash.", "honey bees", "x y z", "A licence file."]
    st, _, j = s.post("/rerank", {"query": q, "texts": texts, "return_text": True})
    check(st == 200 and sorted(r["index"] for r in j) == list(range(5)), f"five texts: {st} {j}")
    scores = [r["score"] for r in j]
    check(scores == sorted(scores, reverse=True), f"best first: {scores}")
    check(all(r["text"] == texts[r["index"]] for r in j), "return_text gives each text")
    alone = {}
    for k, t in enumerate(texts):
        _, _, a = s.post("/rerank", {"query": q, "texts": [t]})
        alone[k] = a[0]["score"]
    check(all(alone[r["index"]] == r["score"] for r in j), f"alone = in a request of five: {alone} {j}")

    # concurrent reranks and embeddings: the same bits (a batch never mixes the two)
    _, _, e0 = s.post("/v1/embeddings", {"input": texts})
    results, errors = [], []

    def worker(k):
        try:
            if k % 2:
                st, _, r = s.post("/rerank", {"query": q, "texts": texts[k % 5:] + texts[:k % 5]})
                results.append(("r", k, st, r))
            else:
                st, _, r = s.post("/v1/embeddings", {"input": texts})
                results.append(("e", k, st, r))
        except Exception as ex:  # noqa: BLE001
            errors.append(repr(ex))

    th = [threading.Thread(target=worker, args=(k,)) for k in range(24)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    check(not errors, f"concurrent requests: {errors}")
    ok_r = ok_e = 0
    for kind, k, st, r in results:
        if kind == "r":
            order = texts[k % 5:] + texts[:k % 5]
            ok_r += st == 200 and all(r_["score"] == alone[texts.index(order[r_["index"]])] for r_ in r)
        else:
            ok_e += st == 200 and r["data"] == e0["data"]
    check(ok_r == 12 and ok_e == 12, f"concurrent: {ok_r}/12 reranks and {ok_e}/12 embeddings as alone")

    # limits
    st, _, j = s.post("/rerank", {"query": "", "texts": ["a"]})
    err(st, j, 422, "query", "an empty query")
    st, _, j = s.post("/rerank", {"texts": ["a"]})
    err(st, j, 422, "query", "no query")
    st, _, j = s.post("/rerank", {"query": "q", "texts": []})
    err(st, j, 422, "texts", "an empty list")
    st, _, j = s.post("/rerank", {"query": "q"})
    err(st, j, 422, "texts", "no texts")
    st, _, j = s.post("/rerank", {"query": "q", "texts": ["a", 3]})
    err(st, j, 422, "texts", "a text that is not a string")
    st, _, j = s.post("/rerank", {"query": "q", "texts": ["a"], "raw_scores": "yes"})
    err(st, j, 422, "raw_scores", "raw_scores not a boolean")
    st, _, j = s.post("/rerank", {"query": "q", "texts": ["a"] * 1001})
    err(st, j, 413, "texts", "1001 texts")
    st, _, j = s.post("/rerank", {"query": "q", "texts": ["word " * 300], "truncate": False})
    err(st, j, 413, "texts", "a pair too long with truncate false")
    st, _, j = s.post("/rerank", {"query": "q", "texts": ["word " * 300], "truncate": True})
    check(st == 200, f"a long pair with truncate true: {st} {j}")
    st, _, j = s.post("/rerank", "not json")
    err(st, j, 400, None, "a body that is not JSON")
    st, _, data = s.request("GET", "/openapi.json")
    spec = json.loads(data)
    check("/rerank" in spec.get("paths", {}), "/openapi.json has /rerank")
    st, _, data = s.request("GET", "/metrics")
    check(b'route="/rerank"' in data, "/metrics counts /rerank")
finally:
    check(s.stop() == 0, "the server stops cleanly (exit 0)")

s2 = Server(BIN, EMB, "--quiet")
try:
    st, _, j = s2.post("/rerank", {"query": "q", "texts": ["a"]})
    err(st, j, 404, None, "no --rerank-model")
    check("rerank-model" in json.dumps(j), f"the 404 says how to get a reranker: {j}")
finally:
    check(s2.stop() == 0, "the second server stops cleanly")
finish("test_rerank")
