"""tests/server/test_search_rerank.py BIN — POST /search with "rerank": true on a server started with
--rerank-model DIR: the first stage's first rerank_top candidates re-scored by the cross-encoder and
answered in its order (the k asked for), the first stage's rank and score kept beside them, as
`modattn search --rerank DIR --rerank-top N --json` does (the same results, in the same order, with
the same scores); the scores are POST /rerank's for the same texts. Limits: a "rerank" that is not a
boolean or a "rerank_top" out of range is 400, past min(--max-inputs, 1000) 413; "rerank": true on a
server without --rerank-model is 422 naming the flag, with a cross-encoder of 3 labels 422 too.
Also: k's default (10, as the CLI and Python) and "found_by" (docs/FIELDS.md). Needs `make model`:
"not available here" and 77 without it."""
import json
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import Server, check, error_shape, finish  # noqa: E402

BIN = sys.argv[1]
EMB, CE, CE3 = ".models/tiny-bert-cls", ".models/tiny-cross-encoder", ".models/tiny-cross-encoder-3"
for m in (EMB, CE, CE3):
    if not os.path.isfile(os.path.join(m, "model.safetensors")):
        print(f"test_search_rerank: not available here: {m} is missing (run `make model`)")
        sys.exit(77)

DOCS = {
    "bees": "Bees make honey from the nectar of flowers.",
    "store": "The store writes a journal before it changes a page.",
    "licence": "A licence file: permission is granted on these terms.",
    "tea": "Tea parties at the March Hare house go on forever.",
    "hive": "A hive holds a queen, workers and drones; honey is kept in the comb.",
    "crash": "After a crash the journal is replayed and the store is whole again.",
    "kettle": "The kettle boils water for tea in three minutes.",
    "garden": "Flowers in the garden open in the morning sun.",
    "wasp": "Wasps make no honey, though they visit flowers too.",
    "sugar": "Honey is mostly sugar: fructose and glucose.",
    "river": "The river floods the meadow every spring.",
    "clock": "The clock in the hall stopped at six o'clock.",
}
Q = "who makes honey"
T = tempfile.mkdtemp(prefix="modattn-search-rerank-")
os.makedirs(f"{T}/docs")
for name, text in DOCS.items():
    with open(f"{T}/docs/{name}.txt", "w") as f:
        f.write(text + "\n")
DB = f"{T}/s.db"
subprocess.run([BIN, "index", "--quiet", "--db", DB, "--model", EMB, f"{T}/docs"], check=True,
               stdout=subprocess.DEVNULL)


def err(st, j, status, param, code, what):
    check(st == status and error_shape(j), f"{what}: status {st} (want {status}): {j}")
    if error_shape(j):
        check(j["error"]["param"] == param and (code is None or j["error"]["code"] == code),
              f"{what}: param {j['error']['param']!r} code {j['error']['code']!r} (want {param!r} {code!r})")


def cli_search(*args):
    out = subprocess.run([BIN, "search", "--db", DB, "--model", EMB, "--json", *args, Q], capture_output=True,
                         text=True)
    check(out.returncode == 0, f"modattn search {args}: exit {out.returncode}: {out.stderr}")
    return json.loads(out.stdout) if out.returncode == 0 else {"results": []}


s = Server(BIN, EMB, "--db", DB, "--rerank-model", CE, "--quiet")
try:
    # k's default: 10 (12 chunks are stored), as `modattn search` and Store.search
    st, _, plain = s.post("/search", {"query": Q})
    check(st == 200 and len(plain["results"]) == 10, f"no k: 10 results: {st} {len(plain.get('results', []))}")
    check(len(cli_search()["results"]) == 10, "the CLI's default k is 10 too")
    check(all(r["found_by"] == ("both" if r["vector_rank"] and r["keyword_rank"] else
                                "words" if r["keyword_rank"] else "meaning") for r in plain["results"]),
          "found_by says which rankings brought each result")
    check("rerank" not in plain and all("first_stage_rank" not in r for r in plain["results"]),
          "no rerank fields without \"rerank\"")

    # rerank: 3 of the first 6 candidates, in the cross-encoder's order
    st, _, first = s.post("/search", {"query": Q, "k": 6})
    st, _, j = s.post("/search", {"query": Q, "k": 3, "rerank": True, "rerank_top": 6})
    check(st == 200 and j.get("rerank") == "tiny-cross-encoder", f"rerank: 200 naming the cross-encoder: {st} {j}")
    r = j.get("results", [])
    check(len(r) == 3 and [x["rank"] for x in r] == [1, 2, 3], f"k=3 results ranked 1-3: {[x['rank'] for x in r]}")
    sc = [x["score"] for x in r]
    check(sc == sorted(sc, reverse=True), f"best first by the cross-encoder: {sc}")
    # the scores: POST /rerank's for the first stage's six texts, and the best three of them
    texts = [x["text"] for x in first["results"]]
    st, _, rr = s.post("/rerank", {"query": Q, "texts": texts})
    want = sorted(((x["score"], -x["index"]) for x in rr), reverse=True)[:3]
    check([texts[-i] for _, i in want] == [x["text"] for x in r],
          f"the three best of six by /rerank: {[texts[-i] for _, i in want]} vs {[x['text'] for x in r]}")
    check([s_ for s_, _ in want] == sc, f"the same scores as /rerank, bit for bit: {want} vs {sc}")
    # the first stage kept: rank and score of the plain search
    fs = {x["chunk_id"]: (x["rank"], x["score"]) for x in first["results"]}
    check(all(fs.get(x["chunk_id"]) == (x["first_stage_rank"], x["first_stage_score"]) for x in r),
          f"first_stage_rank/score are the plain search's: {[(x['first_stage_rank'], x['first_stage_score']) for x in r]} {fs}")
    # the CLI's search --rerank: the same results in the same order, the same scores (7 digits there)
    c = cli_search("-k", "3", "--rerank", CE, "--rerank-top", "6")
    check([x["chunk_id"] for x in c["results"]] == [x["chunk_id"] for x in r],
          f"the CLI's order: {[x['chunk_id'] for x in c['results']]} vs {[x['chunk_id'] for x in r]}")
    check(all(abs(a["score"] - b["score"]) <= 1e-6 * abs(b["score"]) and a["first_stage_rank"] == b["first_stage_rank"]
              for a, b in zip(c["results"], r)), "the CLI's scores and first-stage ranks")
    # rerank_top below k: the first two re-ordered, the rest as the first stage had them
    st, _, j = s.post("/search", {"query": Q, "k": 4, "rerank": True, "rerank_top": 2})
    r = j.get("results", [])
    check(st == 200 and len(r) == 4 and ["first_stage_rank" in x for x in r] == [True, True, False, False],
          f"rerank_top 2 of k 4: the first two reranked: {r}")
    check(sorted(x["first_stage_rank"] for x in r[:2]) == [1, 2] and [x["chunk_id"] for x in r[2:]] ==
          [x["chunk_id"] for x in first["results"][2:4]], "the rest keep the first stage's order")
    # the default rerank_top (50) covers all 12 chunks: k's first of all of them by the cross-encoder
    st, _, j = s.post("/search", {"query": Q, "k": 2, "rerank": True})
    check(st == 200 and len(j["results"]) == 2 and max(x["first_stage_rank"] for x in j["results"]) <= 12,
          f"default rerank_top: {st} {j}")
    # concurrent reranked searches (several executors, beside embeddings): each as alone, bit for bit
    alone = {q: s.post("/search", {"query": q, "k": 4, "rerank": True, "rerank_top": 8})[2]["results"]
             for q in (Q, "how does the store survive a crash", "tea")}
    got, errors = [], []

    def worker(i):
        try:
            q = list(alone)[i % 3]
            if i % 4 == 3:
                s.post("/v1/embeddings", {"input": [q] * 5})
            st_, _, jj = s.post("/search", {"query": q, "k": 4, "rerank": True, "rerank_top": 8})
            got.append((q, st_, jj.get("results")))
        except Exception as ex:  # noqa: BLE001
            errors.append(repr(ex))

    th = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    check(not errors and len(got) == 12 and all(st_ == 200 and res == alone[q] for q, st_, res in got),
          f"12 concurrent reranked searches equal their answers alone: {errors} "
          f"{[(q, st_) for q, st_, res in got if res != alone[q]]}")
    st, _, j = s.post("/search", {"query": Q, "rerank": False})
    check(st == 200 and "rerank" not in j, f"rerank false: a plain search: {st}")

    # bad values
    st, _, j = s.post("/search", {"query": Q, "rerank": "yes"})
    err(st, j, 400, "rerank", "invalid_type", "rerank not a boolean")
    st, _, j = s.post("/search", {"query": Q, "rerank": True, "rerank_top": 0})
    err(st, j, 400, "rerank_top", "invalid_value", "rerank_top 0")
    st, _, j = s.post("/search", {"query": Q, "rerank": True, "rerank_top": "many"})
    err(st, j, 400, "rerank_top", "invalid_type", "rerank_top not an integer")
    st, _, j = s.post("/search", {"query": Q, "rerank": True, "rerank_top": 1001})
    err(st, j, 413, "rerank_top", "too_many_inputs", "rerank_top 1001")
    st, _, data = s.request("GET", "/openapi.json")
    spec = json.loads(data)
    props = spec["components"]["schemas"]["SearchRequest"]["properties"]
    check("rerank" in props and props.get("rerank_top", {}).get("default") == 50 and props["k"]["default"] == 10,
          "/openapi.json describes rerank, rerank_top (50) and k (10)")
    check("422" in spec["paths"]["/search"]["post"]["responses"], "/openapi.json lists /search's 422")
finally:
    check(s.stop() == 0, "the server stops cleanly (exit 0)")

# no --rerank-model: 422 naming the flag; a lower --max-inputs bounds rerank_top (413, and the schema says so)
s2 = Server(BIN, EMB, "--db", DB, "--max-inputs", "8", "--quiet")
try:
    st, _, j = s2.post("/search", {"query": Q, "rerank": True})
    err(st, j, 422, "rerank", "no_reranker", "rerank without --rerank-model")
    check("--rerank-model" in j.get("error", {}).get("message", ""), f"the 422 names --rerank-model: {j}")
    st, _, j = s2.post("/search", {"query": Q, "k": 3})
    check(st == 200 and len(j["results"]) == 3 and "rerank" not in j, f"a plain search there: {st}")
    st, _, j = s2.post("/search", {"query": Q, "rerank": True, "rerank_top": 9})
    err(st, j, 413, "rerank_top", "too_many_inputs", "rerank_top past --max-inputs 8")
    st, _, data = s2.request("GET", "/openapi.json")
    check(json.loads(data)["components"]["schemas"]["SearchRequest"]["properties"]["rerank_top"]["maximum"] == 8,
          "/openapi.json: rerank_top at most --max-inputs")
finally:
    check(s2.stop() == 0, "the second server stops cleanly")

# a cross-encoder of 3 labels gives no one relevance score to order by: 422
s3 = Server(BIN, EMB, "--db", DB, "--rerank-model", CE3, "--quiet")
try:
    st, _, j = s3.post("/search", {"query": Q, "rerank": True})
    err(st, j, 422, "rerank", "invalid_value", "rerank with a 3-label cross-encoder")
finally:
    check(s3.stop() == 0, "the third server stops cleanly")
subprocess.run(["rm", "-rf", T], check=False)
finish("test_search_rerank")
