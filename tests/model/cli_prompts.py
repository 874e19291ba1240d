"""tests/model/cli_prompts.py BIN — prompts and Matryoshka dimensions on the command line, against
sentence-transformers' goldens (tests/fixtures/golden_prompts.jsonl) on a model with prompts made
here (tests/fixtures/prompt_model/make.py):
  - embed --prompt-name / --prompt / --dimensions, and the model's default_prompt_name and truncate_dim;
  - the usage errors (exit 2): an unknown prompt name listing the model's prompts, dimensions out
    of range, --prompt with --prompt-name;
  - index --prompt-name passage --dimensions 64 says which prompt it uses and records both (stats
    shows them);
    search uses the store's dimensions and the model's query prompt (said), and its cosines equal
    `embed`'s vectors for the chunk and the query with those prompts; a search or an index with
    another prompt or dimensions is refused naming the fix."""
import json
import math
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests/fixtures/prompt_model"))
import make  # noqa: E402

BIN = sys.argv[1]
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


base = os.path.join(REPO, ".models/all-MiniLM-L6-v2")
if not os.path.exists(os.path.join(base, "model.safetensors")):
    print("cli_prompts: not available here: .models/all-MiniLM-L6-v2 missing (make model)")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="modattn-cli-prompts-")
P = make.make(base, "prompts", os.path.join(tmp, "p"))
D = make.make(base, "default", os.path.join(tmp, "d"))

# ---- embed: each golden case of the two configs through the options that ask for it
cases = 0
for model, rows in ((P, make.goldens("minilm", "prompts")), (D, make.goldens("minilm", "default"))):
    for r in rows:
        args = ["embed", "--model", model]
        if r["call"] == "encode_query":
            args += ["--prompt-name", "query"]
        elif r["call"] == "encode_document":
            args += ["--prompt-name", "document"]
        if r["prompt_name"] is not None:
            args += ["--prompt-name", r["prompt_name"]]
        if r["prompt"] is not None:
            args += ["--prompt", r["prompt"]]
        if r["truncate_dim"] is not None:
            args += ["--dimensions", str(r["truncate_dim"])]
        rc, out, err = run(*args, "--", r["text"])
        ok = rc == 0
        if ok:
            got = json.loads(out)
            c = cos(got["embedding"], r["embedding"])
            ok = len(got["embedding"]) == len(r["embedding"]) and c >= 0.99999 and got["tokens"] == r["tokens"]
        check(ok, f"embed {args[3:]} {r['text'][:30]!r}: rc {rc} {err.strip()[:200]} "
                  f"{'' if rc else (len(got['embedding']), got['tokens'], r['tokens'], c)}")
        cases += 1
check(cases >= 60, f"{cases} embed cases")

# ---- usage errors
rc, _, err = run("embed", "--model", P, "--prompt-name", "nope", "x")
check(rc == 2 and 'no prompt named "nope"' in err and '"instruct"' in err, f"unknown prompt name: {rc} {err}")
rc, _, err = run("embed", "--model", P, "--dimensions", "385", "x")
check(rc == 2 and "use 1 to 384" in err, f"--dimensions 385: {rc} {err}")
rc, _, err = run("embed", "--model", P, "--dimensions", "0", "x")
check(rc == 2 and "--dimensions" in err, f"--dimensions 0: {rc} {err}")
rc, _, err = run("embed", "--model", P, "--prompt", "a", "--prompt-name", "query", "x")
check(rc == 2 and "not both" in err, f"--prompt and --prompt-name: {rc} {err}")
rc, out, _ = run("embed", "--help")
check(rc == 0 and "--prompt-name NAME" in out and "--dimensions N" in out, "embed --help")

# ---- index and search
corpus = os.path.join(tmp, "corpus")
os.makedirs(corpus)
docs = {"bread.txt": "Knead the dough, let it rise overnight, and bake the sourdough loaf at 230 degrees.",
        "rust.txt": "The borrow checker enforces that references never outlive the data they point to.",
        "tides.txt": "Tides rise and fall twice a day because of the moon's gravity pulling on the oceans."}
for n, t in docs.items():
    with open(os.path.join(corpus, n), "w") as f:
        f.write(t)
db = os.path.join(tmp, "s.db")
rc, _, err = run("index", "--model", P, "--db", db, "--prompt-name", "passage", "--dimensions", "64", corpus)
check(rc == 0 and 'chunks get the model\'s "passage" prompt: "passage: "' in err, f"index says its prompt: {rc} {err}")
rc, out, err = run("stats", "--db", db, "--json")
st = json.loads(out)["store"] if rc == 0 else {}
check(st.get("document_prompt") == "passage: " and st.get("query_prompt") == "query: " and st.get("dim") == 64,
      f"stats shows the prompts and dimensions: {rc} {st} {err}")
q = "how do I bake bread"
rc, out, err = run("search", "--model", P, "--db", db, "--mode", "vector", "--json", "-k", "3", q)
check(rc == 0, f"search: {rc} {err}")
res = json.loads(out)["results"] if rc == 0 else []
check(len(res) == 3 and res[0]["path"].endswith("bread.txt"), f"search finds bread first: {res[:1]}")
rc, _, err2 = run("search", "--model", P, "--db", db, "--mode", "vector", q)
check(rc == 0 and 'the query gets the model\'s "query" prompt: "query: "' in err2, f"search says its prompt: {err2}")
# the cosines are those of embed's vectors with the same prompts and dimensions
_, qo, _ = run("embed", "--model", P, "--prompt-name", "query", "--dimensions", "64", q)
qv = json.loads(qo)["embedding"]
for r in res:
    _, co, _ = run("embed", "--model", P, "--prompt-name", "passage", "--dimensions", "64", "--", docs[os.path.basename(r["path"])])
    c = cos(qv, json.loads(co)["embedding"])
    check(abs(c - r["cosine"]) < 2e-5, f"{r['path']}: search's cosine {r['cosine']} vs embed's {c}")
# refusals, each naming the fix
rc, _, err = run("search", "--model", P, "--db", db, "--prompt", "x: ", q)
check(rc != 0 and "for queries with the prompt \"query: \"" in err and "--prompt TEXT or --prompt-name NAME" in err,
      f"search with another prompt: {rc} {err}")
rc, _, err = run("index", "--model", P, "--db", db, "--dimensions", "128", "--prompt-name", "passage", corpus)
check(rc != 0 and "Use --dimensions 64" in err, f"index with other dimensions: {rc} {err}")
rc, _, err = run("index", "--model", P, "--db", db, corpus)
check(rc != 0 and 'document prompt "passage: "' in err, f"index without the document prompt: {rc} {err}")
# again with the same prompt and no --dimensions: the store's are used, nothing to do
rc, _, err = run("index", "--model", P, "--db", db, "--prompt-name", "passage", "--json", corpus)
check(rc == 0 and json.loads(_)["files_unchanged"] == 3 if rc == 0 else False, f"index again: {rc} {err}")
# an e5-style model's "passage" prompt is not encode_document's: said, with the option that uses it
db2 = os.path.join(tmp, "s2.db")
rc, _, err = run("index", "--model", P, "--db", db2, corpus)
check(rc == 0 and "--prompt-name passage" in err, f"index notes the passage prompt: {rc} {err}")
rc, out, _ = run("search", "--help")
check(rc == 0 and "--prompt-name NAME" in out, "search --help")
rc, out, _ = run("index", "--help")
check(rc == 0 and "--prompt-name NAME" in out and "--dimensions N" in out, "index --help")

subprocess.run(["rm", "-rf", tmp])
print(f"cli_prompts: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
