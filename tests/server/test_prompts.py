"""tests/server/test_prompts.py BIN — prompts and Matryoshka dimensions through `modattn serve`, on
models with prompts made here (tests/fixtures/prompt_model/make.py), against sentence-transformers'
goldens (tests/fixtures/golden_prompts.jsonl):
  - /v1/embeddings "prompt_name", "prompt" and "dimensions" (1 to the model's), the model's
    default_prompt_name and truncate_dim when the request names none; the vectors equal
    `modattn embed`'s with the same options bit for bit;
  - refusals, 400 naming the field: an unknown prompt name (listing the model's), both prompt fields,
    a prompt with token ids, dimensions 0 / past the model's / a string;
  - /search on a store indexed with a document prompt and 64 dimensions: the query gets the
    model's query prompt and the store's dimensions (the same results as `modattn search`); a
    request naming another prompt is refused with 409 "prompt_mismatch" naming the store's."""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests/fixtures/prompt_model"))
from srvtest import Server, check, error_shape, finish, floats_bits  # noqa: E402
import make  # noqa: E402

BIN = sys.argv[1]
base = os.path.join(REPO, ".models/all-MiniLM-L6-v2")
tmp = tempfile.mkdtemp(prefix="modattn-test-prompts-")
P = make.make(base, "prompts", os.path.join(tmp, "p"))
D = make.make(base, "default", os.path.join(tmp, "d"))


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def embed_cli(model, text, *opts):
    r = subprocess.run([BIN, "embed", "--model", model, *opts, "--", text], capture_output=True, check=True)
    return json.loads(r.stdout)["embedding"]


# ---- the store: a document prompt and 64 dimensions
corpus = os.path.join(tmp, "corpus")
os.makedirs(corpus)
for n, t in {"bread.txt": "Knead the dough and bake the sourdough loaf.",
             "tides.txt": "Tides rise and fall because the moon pulls on the oceans."}.items():
    with open(os.path.join(corpus, n), "w") as f:
        f.write(t)
DB = os.path.join(tmp, "s.db")
r = subprocess.run([BIN, "index", "--quiet", "--model", P, "--db", DB, "--prompt-name", "passage", "--dimensions", "64",
                    corpus], capture_output=True)
assert r.returncode == 0, r.stderr

s = Server(BIN, P, "--db", DB)
# ---- /v1/embeddings against the goldens (the "prompts" model)
n = 0
for g in make.goldens("minilm", "prompts"):
    body = {"input": g["text"]}
    opts = []
    name = {"encode_query": "query", "encode_document": "document"}.get(g["call"])
    if g["prompt_name"] is not None:
        name = g["prompt_name"]
    if name is not None:
        body["prompt_name"] = name
        opts += ["--prompt-name", name]
    if g["prompt"] is not None:
        body["prompt"] = g["prompt"]
        opts += ["--prompt", g["prompt"]]
    if g["truncate_dim"] is not None:
        body["dimensions"] = g["truncate_dim"]
        opts += ["--dimensions", str(g["truncate_dim"])]
    st, _, j = s.post("/v1/embeddings", body)
    ok = st == 200
    if ok:
        e = j["data"][0]["embedding"]
        ok = (len(e) == len(g["embedding"]) and cos(e, g["embedding"]) >= 0.99999 and
              j["usage"]["prompt_tokens"] == g["tokens"])
        if n % 7 == 0:  # a few through the CLI too: the same bits
            ok = ok and floats_bits(e) == floats_bits(embed_cli(P, g["text"], *opts))
    check(ok, f"/v1/embeddings {body if len(str(body)) < 300 else list(body)}: {st} {j if st != 200 else ''}")
    n += 1
check(n >= 30, f"{n} golden requests")
st, _, j = s.post("/v1/embeddings", {"input": ["a", "b"], "dimensions": 7, "encoding_format": "base64"})
check(st == 200 and len(j["data"]) == 2 and len(j["data"][1]["embedding"]) > 0, f"base64, dimensions 7: {st}")


def refused(body, param, what, needle="", status=400):
    st, _, j = s.post("/v1/embeddings", body)
    check(st == status and error_shape(j) and j["error"]["param"] == param and needle in j["error"]["message"],
          f"{what}: {st} {j}")


refused({"input": "a", "prompt_name": "nope"}, "prompt_name", "unknown prompt name", '"instruct"')
refused({"input": "a", "prompt_name": "query", "prompt": "x"}, "prompt", "both prompt fields", "not both")
refused({"input": "a", "prompt": 3}, "prompt", "prompt a number")
refused({"input": [[1000, 1001]], "prompt": "query: "}, "prompt", "a prompt with token ids", "token ids", 422)
refused({"input": "a", "dimensions": 0}, "dimensions", "dimensions 0", "1 to 384")
refused({"input": "a", "dimensions": 385}, "dimensions", "dimensions 385", "1 to 384")
refused({"input": "a", "dimensions": "64"}, "dimensions", "dimensions a string")
st, _, j = s.post("/v1/embeddings", {"input": [[1000, 1001]]})
check(st == 200, f"token ids without a prompt: {st}")

# ---- /search: the query prompt and the store's dimensions
q = "why are there tides"
st, _, j = s.post("/search", {"query": q, "k": 2, "mode": "vector"})
cli = subprocess.run([BIN, "search", "--model", P, "--db", DB, "--mode", "vector", "--json", "-k", "2", q],
                     capture_output=True)
cj = json.loads(cli.stdout)["results"] if cli.returncode == 0 else []
check(st == 200 and len(j["results"]) == 2 and j["results"][0]["path"].endswith("tides.txt") and
      [r["path"] for r in j["results"]] == [r["path"] for r in cj] and
      all(abs(a["score"] - b["score"]) < 1e-6 for a, b in zip(j["results"], cj)),
      f"/search as `modattn search`: {st} {j} {cj}")
st, _, j = s.post("/search", {"query": q, "prompt_name": "query"})
check(st == 200, f"/search naming the store's prompt: {st} {j}")
st, _, j = s.post("/search", {"query": q, "prompt": "x: "})
check(st == 409 and error_shape(j) and j["error"]["param"] == "prompt" and j["error"]["code"] == "prompt_mismatch" and
      'for queries with the prompt "query: "' in j["error"]["message"], f"/search with another prompt: {st} {j}")
st, _, j = s.post("/search", {"query": q, "prompt_name": "nope"})
check(st == 400 and j["error"]["param"] == "prompt_name", f"/search unknown prompt name: {st} {j}")
check(s.stop() == 0, "server exits 0")

# ---- the "default" model: default_prompt_name "query" and truncate_dim 128 when none is named
s = Server(BIN, D)
for g in make.goldens("minilm", "default"):
    if g["call"] != "encode":
        continue
    body = {"input": g["text"]}
    if g["prompt"] is not None:
        body["prompt"] = g["prompt"]
    if g["truncate_dim"] is not None:
        body["dimensions"] = g["truncate_dim"]
    st, _, j = s.post("/v1/embeddings", body)
    check(st == 200 and len(j["data"][0]["embedding"]) == len(g["embedding"]) and
          cos(j["data"][0]["embedding"], g["embedding"]) >= 0.99999, f"default model {body}: {st}")
check(s.stop() == 0, "server exits 0")
subprocess.run(["rm", "-rf", tmp])
finish("test_prompts")
