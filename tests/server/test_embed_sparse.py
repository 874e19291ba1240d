"""tests/server/test_embed_sparse.py BIN — POST /embed_sparse (text-embeddings-inference's body and
response) with --sparse-model: each input's [{index: token_id, value: weight}] against
sentence-transformers' SparseEncoder goldens (tests/fixtures/sparse_golden.json: the same non-zero
ids, weights within 1e-5 relative + 5e-6 absolute, ids ascending); "inputs" as one string or a list;
the same bits alone, in one request and in concurrent requests beside concurrent embeddings (never
batched together); the limits (422 for a missing / empty / wrong-typed inputs or truncate, 413 past
--max-inputs or for a text too long with truncation off), 404 on a server without a sparse model,
/openapi.json and /metrics naming the route. Needs `make model`: "not available here" and 77 without it."""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, error_shape, finish  # noqa: E402

BIN = sys.argv[1]
EMB, SP = ".models/tiny-bert-cls", ".models/splade-tiny"
for m in (EMB, SP):
    if not os.path.isfile(os.path.join(m, "model.safetensors")):
        print(f"test_embed_sparse: not available here: {m} is missing (run `make model`)")
        sys.exit(77)
G = json.load(open("tests/fixtures/sparse_golden.json", encoding="utf-8"))
TEXTS = [r["text"] for r in G["rows"]]


def close(a, b):
    return abs(a - b) <= 1e-5 * abs(b) + 5e-6


def err(st, j, status, param, what):
    check(st == status and error_shape(j), f"{what}: status {st} (want {status}): {j}")
    if error_shape(j) and param:
        check(j["error"]["param"] == param, f"{what}: param {j['error']['param']!r} (want {param!r})")


def as_dict(row):
    return {str(e["index"]): e["value"] for e in row}


s = Server(BIN, EMB, "--sparse-model", SP, "--max-inputs", "16", "--quiet")
try:
    st, _, j = s.post("/embed_sparse", {"inputs": TEXTS})
    as_list_long = j[5] if st == 200 and len(j) == 6 else None
    check(st == 200 and isinstance(j, list) and len(j) == len(TEXTS), f"all goldens: {st} {str(j)[:200]}")
    for i, (row, g) in enumerate(zip(j, G["rows"])):
        got, want = as_dict(row), g["weights"]
        check(set(got) == set(want), f"text {i}: ids differ from sentence-transformers' ({len(got)} vs {len(want)})")
        bad = [k for k in got if k in want and not close(got[k], want[k])]
        check(not bad, f"text {i}: weights off at ids {bad[:5]}")
        idx = [e["index"] for e in row]
        check(idx == sorted(idx), f"text {i}: ids ascending")
    # one string: a list of one list; alone = in the request of six
    alone = []
    for i, t in enumerate(TEXTS[:5]):
        st, _, a = s.post("/embed_sparse", {"inputs": t})
        check(st == 200 and len(a) == 1 and a[0] == j[i], f"text {i} alone (a string) = in a list of six")
        alone.append(a[0] if st == 200 else None)

    # concurrent sparse and dense requests: the same bits (a batch never mixes the two)
    _, _, e0 = s.post("/v1/embeddings", {"input": TEXTS[:5]})
    results, errors = [], []

    def worker(k):
        try:
            if k % 2:
                order = TEXTS[k % 5:5] + TEXTS[:k % 5]
                st, _, r = s.post("/embed_sparse", {"inputs": order})
                results.append(("s", k, st, r))
            else:
                st, _, r = s.post("/v1/embeddings", {"input": TEXTS[:5]})
                results.append(("e", k, st, r))
        except Exception as ex:  # noqa: BLE001
            errors.append(repr(ex))

    th = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    check(not errors, f"concurrent requests: {errors}")
    ok_s = ok_e = 0
    for kind, k, st, r in results:
        if kind == "s":
            order = list(range(k % 5, 5)) + list(range(k % 5))
            ok_s += st == 200 and all(r[p] == alone[o] for p, o in enumerate(order))
        else:
            ok_e += st == 200 and r["data"] == e0["data"]
    check(ok_s == 8 and ok_e == 8, f"concurrent: {ok_s}/8 sparse and {ok_e}/8 embeddings as alone")

    # limits
    st, _, j = s.post("/embed_sparse", {})
    err(st, j, 422, "inputs", "no inputs")
    st, _, j = s.post("/embed_sparse", {"inputs": []})
    err(st, j, 422, "inputs", "an empty list")
    st, _, j = s.post("/embed_sparse", {"inputs": ["a", 3]})
    err(st, j, 422, "inputs", "an input that is not a string")
    st, _, j = s.post("/embed_sparse", {"inputs": 7})
    err(st, j, 422, "inputs", "inputs a number")
    st, _, j = s.post("/embed_sparse", {"inputs": "a", "truncate": "yes"})
    err(st, j, 422, "truncate", "truncate not a boolean")
    st, _, j = s.post("/embed_sparse", {"inputs": ["a"] * 17})
    err(st, j, 413, "inputs", "17 inputs past --max-inputs 16")
    st, _, j = s.post("/embed_sparse", {"inputs": TEXTS[5], "truncate": False})
    err(st, j, 413, "inputs", "a text too long with truncate false")
    st, _, j = s.post("/embed_sparse", {"inputs": TEXTS[5], "truncate": True})
    check(st == 200 and j == [as_list_long], f"a long text with truncate true: {st}")
    st, _, j = s.post("/embed_sparse", "not json")
    err(st, j, 400, None, "a body that is not JSON")
    st, _, data = s.request("GET", "/openapi.json")
    spec = json.loads(data)
    check("/embed_sparse" in spec.get("paths", {}), "/openapi.json has /embed_sparse")
    st, _, data = s.request("GET", "/metrics")
    check(b'route="/embed_sparse"' in data, "/metrics counts /embed_sparse")
finally:
    check(s.stop() == 0, "the server stops cleanly (exit 0)")

s2 = Server(BIN, EMB, "--quiet")
try:
    st, _, j = s2.post("/embed_sparse", {"inputs": "q"})
    err(st, j, 404, None, "no --sparse-model")
    check("sparse-model" in json.dumps(j), f"the 404 says how to get a sparse model: {j}")
finally:
    check(s2.stop() == 0, "the second server stops cleanly")
finish("test_embed_sparse")
