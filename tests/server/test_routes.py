"""tests/server/test_routes.py BIN MODEL — the routes of issue 41: GET /info, POST /tokenize and
POST /detokenize (text-embeddings-inference's bodies), GET /v1/models/{id} (the openai client's
models.retrieve), GET /docs, GET / and its assets: each route's shape, its errors (OpenAI's
error object), the API key, Content-Type, the limits (--max-body, --max-inputs), the model still
loading, and the metrics counting each route."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, error_shape, finish  # noqa: E402

BIN, MODEL = sys.argv[1], sys.argv[2]
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
tmp = tempfile.mkdtemp(prefix="modattn-routes-")
db = os.path.join(tmp, "s.db")
subprocess.run([BIN, "index", "--quiet", "--model", MODEL, "--db", db, os.path.join(REPO, "demo", "corpus")],
               check=True, stdout=subprocess.DEVNULL)
ndocs = len([f for f in os.listdir(os.path.join(REPO, "demo", "corpus")) if not f.startswith(".")])


def err(st, j, status, param=None, code=None, what=""):
    ok = bool(check(st == status, f"{what}: status {st}, expected {status}: {j}"))
    ok &= bool(check(error_shape(j), f"{what}: not OpenAI's error shape: {j}"))
    if param is not None and error_shape(j):
        ok &= bool(check(j["error"]["param"] == param, f"{what}: param {j['error']['param']!r}, expected {param!r}"))
    if code is not None and error_shape(j):
        ok &= bool(check(j["error"]["code"] == code, f"{what}: code {j['error']['code']!r}, expected {code!r}"))
    return ok


def get(s, path, headers=None):
    st, h, data = s.request("GET", path, None, headers)
    try:
        j = json.loads(data)
    except ValueError:
        j = None
    return st, h, j, data


s = Server(BIN, MODEL, "--db", db, "--max-inputs", "8", "--max-body", "65536", "--max-batch-tokens", "4096",
           "--max-concurrent-requests", "77")

# ---- GET /info
st, h, j, _ = get(s, "/info")
check(st == 200 and h.get("content-type", "").startswith("application/json"), f"/info: {st} {h}")
if check(isinstance(j, dict), f"/info is an object: {j}"):
    check(j.get("model_id") == "all-MiniLM-L6-v2", f"/info model_id: {j.get('model_id')}")
    check(j.get("max_input_length") == 256, f"/info max_input_length: {j.get('max_input_length')}")
    check(j.get("max_client_batch_size") == 8, f"/info max_client_batch_size follows --max-inputs: {j}")
    check(j.get("max_batch_tokens") == 4096, f"/info max_batch_tokens follows --max-batch-tokens: {j}")
    check(j.get("max_concurrent_requests") == 77, f"/info max_concurrent_requests: {j}")
    check(j.get("max_body") == 65536, f"/info max_body: {j}")
    check(j.get("dimension") == 384 and j.get("pooling") == "mean", f"/info dimension, pooling: {j}")
    check(j.get("model_type") == {"embedding": {"pooling": "mean"}}, f"/info model_type (TEI's shape): {j}")
    check(isinstance(j.get("version"), str) and re.match(r"^\d+\.\d+", j["version"]), f"/info version: {j}")
    check(j.get("device") == "cpu" and isinstance(j.get("precision"), str), f"/info device, precision: {j}")
    st_ = j.get("store") or {}
    check(st_.get("available") is True and st_.get("documents", 0) >= ndocs - 2 and st_.get("chunks", 0) > st_.get("documents", 0),
          f"/info store size (about {ndocs} documents): {st_}")
    check(st_.get("sparse_rows") == 0 and st_.get("sparse_chunks") == 0 and "sparse_model" in st_
          and st_["sparse_model"] is None, f"/info store without sparse vectors: 0, 0, null: {st_}")
    mod = st_.get("modified") or ""
    ok = re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", mod)
    check(ok and abs(time.mktime(time.strptime(mod, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone - time.time()) < 3600,
          f"/info store modified, ISO 8601 UTC, within the hour: {mod!r}")
err(*s.post("/info", {})[::2], 405, what="POST /info")

# ---- POST /tokenize
text = "Hello, wörld! Don't panic."
st, h, j = s.post("/tokenize", {"inputs": text})
raw = text.encode()
if check(st == 200 and isinstance(j, list) and len(j) == 1 and isinstance(j[0], list), f"/tokenize one text: {st} {j}"):
    toks = j[0]
    check(all(set(t) == {"id", "text", "special", "start", "stop"} for t in toks), f"/tokenize token keys: {toks[:2]}")
    check(toks[0]["special"] and toks[0]["text"] == "[CLS]" and toks[0]["start"] is None, f"/tokenize [CLS] first: {toks[0]}")
    check(toks[-1]["special"] and toks[-1]["text"] == "[SEP]", f"/tokenize [SEP] last: {toks[-1]}")
    mid = toks[1:-1]
    check(all(not t["special"] and raw[t["start"]:t["stop"]].decode() == t["text"] for t in mid),
          f"/tokenize: each token's text is the text's bytes [start, stop): {mid}")
    check([t["text"] for t in mid][:4] == ["Hello", ",", "wörld", "!"], f"/tokenize pieces: {[t['text'] for t in mid]}")
    words = [t["id"] for t in mid]
st, h, j2 = s.post("/tokenize", {"inputs": [text, "honey"], "add_special_tokens": False})
check(st == 200 and len(j2) == 2 and all(not t["special"] for l in j2 for t in l), f"/tokenize two, no specials: {j2}")
check(st == 200 and [t["id"] for t in j2[0]] == words, "/tokenize: the same ids without the specials")
check(st == 200 and [t["text"] for t in j2[1]] == ["honey"], f"/tokenize 'honey': {j2}")
# the ids /tokenize gives embed as the text does (they are the tokenizer the embeddings use)
st, _, ea = s.post("/v1/embeddings", {"input": text})
st2, _, eb = s.post("/v1/embeddings", {"input": words})
check(st == 200 and st2 == 200 and ea["data"][0]["embedding"] == eb["data"][0]["embedding"],
      "/tokenize's ids embed exactly as the text")
st, _, j = s.post("/tokenize", {"inputs": ""})
check(st == 200 and [t["special"] for t in j[0]] == [True, True], f"/tokenize of '': [CLS] [SEP]: {j}")
st, _, j = s.post("/tokenize", {"inputs": "a\u0000b"})
check(st == 200 and len(j[0]) >= 3, f"/tokenize of a text holding U+0000: {st} {j}")
err(*s.post("/tokenize", {})[::2], 400, "inputs", "missing_field", "/tokenize without inputs")
err(*s.post("/tokenize", {"inputs": 5})[::2], 400, "inputs", "invalid_type", "/tokenize inputs 5")
err(*s.post("/tokenize", {"inputs": []})[::2], 400, "inputs", "invalid_value", "/tokenize inputs []")
err(*s.post("/tokenize", {"inputs": ["a", 1]})[::2], 400, "inputs", "invalid_type", "/tokenize inputs ['a', 1]")
err(*s.post("/tokenize", {"inputs": "a", "add_special_tokens": "yes"})[::2], 400, "add_special_tokens", "invalid_type",
    "/tokenize add_special_tokens 'yes'")
err(*s.post("/tokenize", {"inputs": ["a"] * 9})[::2], 413, "inputs", "too_many_inputs", "/tokenize 9 inputs past --max-inputs 8")
err(*s.post("/tokenize", "{\"inputs\": ")[::2], 400, None, "invalid_json", "/tokenize bad JSON")
err(*s.post("/tokenize", "[1]")[::2], 400, None, "invalid_json", "/tokenize a JSON array")
err(*s.post("/tokenize", {"inputs": "x" * 70000})[::2], 413, None, "payload_too_large", "/tokenize past --max-body")
err(*s.post("/tokenize", {"inputs": "a"}, {"Content-Type": "text/plain"})[::2], 415, None, "unsupported_media_type",
    "/tokenize text/plain")
st, h, _, _ = get(s, "/tokenize")
check(st == 405 and "POST" in h.get("allow", ""), f"GET /tokenize: {st} {h.get('allow')}")
# a long text: every token, not cut to the model's length
st, _, j = s.post("/tokenize", {"inputs": "honey " * 600})
check(st == 200 and len(j[0]) == 602, f"/tokenize of 600 words is not cut: {len(j[0]) if st == 200 else st}")

# ---- POST /detokenize
st, _, j = s.post("/detokenize", {"ids": [101] + words + [102]})
check(st == 200 and j == ["hello, world! don't panic."], f"/detokenize (specials skipped, pieces glued): {st} {j}")
st, _, j = s.post("/detokenize", {"ids": [[101, 7592, 102], [2088]], "skip_special_tokens": False})
check(st == 200 and j == ["[CLS] hello [SEP]", "world"], f"/detokenize two, specials kept: {st} {j}")
st, _, j = s.post("/detokenize", {"ids": [1.0 * 7592]})
check(st == 200 and j == ["hello"], f"/detokenize an integral number: {st} {j}")
err(*s.post("/detokenize", {})[::2], 400, "ids", "missing_field", "/detokenize without ids")
err(*s.post("/detokenize", {"ids": []})[::2], 400, "ids", "invalid_value", "/detokenize ids []")
err(*s.post("/detokenize", {"ids": [-1]})[::2], 400, "ids", "invalid_value", "/detokenize id -1")
err(*s.post("/detokenize", {"ids": [30522]})[::2], 400, "ids", "invalid_value", "/detokenize id past the vocabulary")
err(*s.post("/detokenize", {"ids": ["a"]})[::2], 400, "ids", "invalid_type", "/detokenize id 'a'")
err(*s.post("/detokenize", {"ids": [1.5]})[::2], 400, "ids", "invalid_type", "/detokenize id 1.5")
err(*s.post("/detokenize", {"ids": [[1], []]})[::2], 400, "ids", "invalid_type", "/detokenize an empty inner list")
err(*s.post("/detokenize", {"ids": [[1], 2]})[::2], 400, "ids", "invalid_type", "/detokenize [[1], 2]")
err(*s.post("/detokenize", {"ids": "1"})[::2], 400, "ids", "invalid_type", "/detokenize ids '1'")
err(*s.post("/detokenize", {"ids": [1], "skip_special_tokens": 1})[::2], 400, "skip_special_tokens", "invalid_type",
    "/detokenize skip_special_tokens 1")
err(*s.post("/detokenize", {"ids": [[1]] * 9})[::2], 413, "ids", "too_many_inputs", "/detokenize 9 lists past --max-inputs")
err(*s.post("/detokenize", {"ids": [1]}, {"Content-Type": "application/x-www-form-urlencoded"})[::2], 415, None,
    "unsupported_media_type", "/detokenize a form")

# ---- GET /v1/models/{id}
st, _, j, _ = get(s, "/v1/models/all-MiniLM-L6-v2")
check(st == 200 and j.get("id") == "all-MiniLM-L6-v2" and j.get("object") == "model" and j.get("dimensions") == 384,
      f"/v1/models/all-MiniLM-L6-v2: {st} {j}")
st, _, j, _ = get(s, "/models/all-MiniLM-L6-v2")
check(st == 200 and j.get("id") == "all-MiniLM-L6-v2", f"/models/all-MiniLM-L6-v2: {st} {j}")
st, _, j, _ = get(s, "/v1/models/text-embedding-3-small")
err(st, j, 404, "model", "model_not_found", "/v1/models/another")
st, _, j, _ = get(s, "/v1/models/all-MiniLM-L6-v2x")
err(st, j, 404, "model", "model_not_found", "/v1/models/ the id with more after it")
st, _, j, _ = get(s, "/v1/models/")
err(st, j, 404, "model", "model_not_found", "/v1/models/ (no id)")
err(*s.post("/v1/models/all-MiniLM-L6-v2", {})[::2], 405, what="POST /v1/models/{id}")
try:
    import openai
    cl = openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="unused", max_retries=0)
    m = cl.models.retrieve("all-MiniLM-L6-v2")
    check(m.id == "all-MiniLM-L6-v2" and m.object == "model", f"openai models.retrieve: {m}")
    try:
        cl.models.retrieve("gpt-4")
        check(False, "openai models.retrieve of another model did not raise")
    except openai.NotFoundError as e:
        check(e.status_code == 404, f"openai models.retrieve of another model: {e}")
except ImportError:
    check(False, "the openai package is missing from the venv (tests/server/setup_venv.sh)")

# ---- the pages: GET /, GET /docs, /assets/
for path, ctype in (("/", "text/html"), ("/docs", "text/html"), ("/assets/page.css", "text/css"),
                    ("/assets/page.js", "text/javascript"), ("/assets/docs.js", "text/javascript")):
    st, h, _, data = get(s, path)
    check(st == 200 and h.get("content-type", "").startswith(ctype), f"GET {path}: {st} {h.get('content-type')}")
    csp = h.get("content-security-policy", "")
    check("default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp,
          f"GET {path}: a Content-Security-Policy with no inline script: {csp!r}")
    check(h.get("x-content-type-options") == "nosniff", f"GET {path}: nosniff")
    # nothing from elsewhere: no CDN, no absolute URL to load
    text = data.decode()
    check(not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", text) and "cdn" not in text.lower()
          and not re.search(r"url\(\s*['\"]?(https?:)?//", text) and "@import" not in text,
          f"GET {path}: loads nothing from another host")
st, h, _, data = get(s, "/")
html = data.decode()
check('role="search"' in html and '<label for="q"' in html and "<main" in html and "<header" in html
      and 'aria-live="polite"' in html, "GET /: a search landmark, a label for the box, header/main, aria-live")
check("/assets/page.js" in html and "<script>" not in html, "GET /: its script is a file, not inline")
st, h, _, data = get(s, "/assets/page.js")
js = data.decode()
check("innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js and "eval(" not in js,
      "page.js never parses markup (no innerHTML, insertAdjacentHTML, document.write, eval)")
st, h, _, data = get(s, "/assets/docs.js")
check("innerHTML" not in data.decode() and "/openapi.json" in data.decode(), "docs.js: drawn from /openapi.json, no innerHTML")
st, h, _, data = get(s, "/?q=honey&mode=words")
check(st == 200 and data.decode() == html, "GET /?q=...: the same page (the script reads the query)")
st, h, j, _ = get(s, "/index.html")
err(st, j, 404, None, "not_found", "GET /index.html")
err(*s.post("/", {})[::2], 405, what="POST /")

# ---- /openapi.json names every route, with this server's limits
st, _, spec, _ = get(s, "/openapi.json")
paths = set(spec.get("paths", {})) if isinstance(spec, dict) else set()
for p in ("/info", "/tokenize", "/detokenize", "/v1/models/{model}", "/docs", "/", "/assets/page.js"):
    check(p in paths, f"/openapi.json has {p}")
try:
    tr = spec["components"]["schemas"]["TokenizeRequest"]["properties"]["inputs"]["oneOf"][1]
    dr = spec["components"]["schemas"]["DetokenizeRequest"]["properties"]["ids"]["oneOf"][1]
    check(tr["maxItems"] == 8 and dr["maxItems"] == 8, f"/openapi.json: maxItems is --max-inputs: {tr} {dr}")
except (KeyError, IndexError, TypeError) as e:
    check(False, f"/openapi.json Tokenize/Detokenize schemas: {e}")

# ---- metrics: every new route counted
st, _, _, data = get(s, "/metrics")
m = data.decode()
for route, status in (("/info", 200), ("/tokenize", 200), ("/tokenize", 413), ("/tokenize", 415), ("/detokenize", 200),
                      ("/detokenize", 400), ("/v1/models/{id}", 200), ("/v1/models/{id}", 404), ("/docs", 200), ("/", 200)):
    check(f'modattn_http_requests_total{{route="{route}",status="{status}"}}' in m, f"metrics count {route} {status}")
check(s.stop() == 0, "exit 0 after SIGTERM")

# ---- the API key: every new route needs it but the pages (no data in them) and /health
keyf = os.path.join(tmp, "key")
open(keyf, "w").write("s3cret\n")
s = Server(BIN, MODEL, "--db", db, "--api-key-file", keyf)
auth = {"Authorization": "Bearer s3cret"}
for method, path, body in (("GET", "/info", None), ("POST", "/tokenize", {"inputs": "a"}),
                           ("POST", "/detokenize", {"ids": [1037]}), ("GET", "/v1/models/all-MiniLM-L6-v2", None),
                           ("GET", "/openapi.json", None)):
    st, h, data = s.request(method, path, body)
    j = json.loads(data)
    err(st, j, 401, None, "invalid_api_key", f"{method} {path} without the key")
    check("bearer" in h.get("www-authenticate", "").lower(), f"{method} {path}: WWW-Authenticate")
    st, h, data = s.request(method, path, body, {"Authorization": "Bearer wrong"})
    check(st == 401, f"{method} {path} with a wrong key: {st}")
    st, h, data = s.request(method, path, body, auth)
    check(st == 200, f"{method} {path} with the key: {st} {data[:200]}")
for path in ("/", "/docs", "/assets/page.css", "/assets/page.js", "/assets/docs.js", "/health"):
    st, h, data = s.request("GET", path)
    check(st == 200, f"GET {path} needs no key: {st}")
check(s.stop() == 0, "exit 0 after SIGTERM (with a key)")

# ---- no store: /info says so; while loading: 503 for the model's routes, the pages answer
s = Server(BIN, MODEL)
st, _, j, _ = get(s, "/info")
check(st == 200 and j.get("store") is None, f"/info without --db: store null: {j.get('store') if j else st}")
check(s.stop() == 0, "exit 0 (no store)")
s = Server(BIN, MODEL, "--db", os.path.join(tmp, "missing.db"))
st, _, j, _ = get(s, "/info")
check(st == 200 and j["store"]["available"] is False and j["store"].get("error"), f"/info with a missing store: {j}")
check(s.stop() == 0, "exit 0 (missing store)")
s = Server(BIN, MODEL, env={"MODATTN_TEST_SERVE_LOAD_DELAY_MS": "4000"}, wait_ready=False)
st, h, j, _ = get(s, "/info")
err(st, j, 503, None, "loading", "/info while loading")
err(*s.post("/tokenize", {"inputs": "a"})[::2], 503, None, "loading", "/tokenize while loading")
st, _, j, _ = get(s, "/v1/models/all-MiniLM-L6-v2")
err(st, j, 503, None, "loading", "/v1/models/{id} while loading")
st, _, _, data = get(s, "/")
check(st == 200 and b"<main" in data, f"GET / while loading: {st}")
s.wait_ready()
check(s.stop() == 0, "exit 0 (slow load)")

# ---- /detokenize with a byte-level BPE tokenizer (ByteLevel decoder): tiny-modernbert
s = Server(BIN, os.path.join(REPO, ".models", "tiny-modernbert"))
text = "héllo wörld 日本 — ok"
st, _, j = s.post("/tokenize", {"inputs": text})
ids = [t["id"] for t in j[0]] if st == 200 else []
st, _, j = s.post("/detokenize", {"ids": ids})
check(st == 200 and j == [text], f"/detokenize ByteLevel: the text back: {st} {j}")
st, _, j = s.post("/detokenize", {"ids": ids, "skip_special_tokens": False})
check(st == 200 and j == ["[CLS]" + text + "[SEP]"], f"/detokenize ByteLevel, specials kept: {st} {j}")
# "日" is two tokens (bytes E6 97 | A5): each alone is ill-formed UTF-8, U+FFFD as tokenizers gives
st, _, j = s.post("/tokenize", {"inputs": "日", "add_special_tokens": False})
ri = [t["id"] for t in j[0]] if st == 200 else []
st, _, j = s.post("/detokenize", {"ids": [[ri[0]], [ri[1]], ri] if len(ri) == 2 else [[0]]})
check(st == 200 and j == ["\ufffd", "\ufffd", "日"], f"/detokenize ByteLevel, a character cut in two: {ri} {st} {j}")
check(s.stop() == 0, "exit 0 (tiny-modernbert)")

subprocess.run(["rm", "-rf", tmp])
finish("test_routes")
