#!/usr/bin/env bash
# tests/pipeline/cli_sparse_search.sh MODATTN — `index --sparse DIR` and `search --mode sparse` end to
# end with the real splade-tiny: results found by "sparse", hybrid fusing it, the store remembering its
# sparse model, `stats` and the server's /info counting the sparse rows, and the refusals (exit 2 with
# the fix) on a store without sparse vectors.
set -u
BIN=$1
DENSE=.models/all-MiniLM-L6-v2
SPLADE=.models/splade-tiny
[ -f "$SPLADE/model.safetensors" ] && [ -f "$DENSE/model.safetensors" ] || { echo "not available here: $SPLADE or $DENSE missing (make model)"; exit 77; }
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
T=$(mktemp -d /tmp/modattn-cli-sparse-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/docs"
echo "The lighthouse keeper climbed the spiral stairs every evening to light the great lamp." > "$T/docs/a.txt"
echo "Sourdough bread needs a starter of flour and water, fed daily, and a long slow rise." > "$T/docs/b.txt"
echo "A comet's tail always points away from the sun, pushed by the solar wind." > "$T/docs/c.txt"
DB=$T/s.db
"$BIN" index --quiet --model "$DENSE" --sparse "$SPLADE" --db "$DB" "$T/docs" > "$T/out" 2> "$T/err"
check '[ $? -eq 0 ]' "index --sparse: $(cat "$T/err")"
"$BIN" search --db "$DB" --mode sparse --json -k 3 "lighthouse lamp" > "$T/sp.json" 2> "$T/err"
check '[ $? -eq 0 ]' "search --mode sparse: $(cat "$T/err")"
python3 - "$T/sp.json" <<'PY' && ok || bad "sparse results: $(head -c 600 "$T/sp.json")"
import json, sys
j = json.load(open(sys.argv[1]))
r = j["results"] if isinstance(j, dict) else j
assert r and r[0]["path"].endswith("a.txt"), r[:1]
assert all(x["found_by"] == "sparse" and x["sparse_score"] > 0 and x["sparse_rank"] == x["rank"] for x in r), [x["found_by"] for x in r]
assert [x["sparse_score"] for x in r] == sorted([x["sparse_score"] for x in r], reverse=True)
PY
"$BIN" search --db "$DB" --json -k 3 "comet tail" > "$T/hy.json" 2> "$T/err"
check '[ $? -eq 0 ]' "hybrid: $(cat "$T/err")"
python3 - "$T/hy.json" <<'PY' && ok || bad "hybrid results: $(head -c 600 "$T/hy.json")"
import json, sys
j = json.load(open(sys.argv[1]))
r = j["results"] if isinstance(j, dict) else j
assert r[0]["path"].endswith("c.txt") and "sparse" in r[0]["found_by"], r[0]
PY
# text output names the sparse rank
"$BIN" search --db "$DB" --mode sparse -k 1 "sourdough" > "$T/txt" 2>&1
check 'grep -q "found by sparse #1" "$T/txt" && grep -q "b.txt" "$T/txt"' "text output: $(cat "$T/txt")"
# the store remembers its sparse model: a later index without --sparse keeps every chunk's vector
echo "Glaciers carve valleys into a U shape." > "$T/docs/d.txt"
"$BIN" index --quiet --model "$DENSE" --db "$DB" "$T/docs" > "$T/out" 2> "$T/err"
check '[ $? -eq 0 ]' "index without --sparse on a sparse store: $(cat "$T/err")"
"$BIN" search --db "$DB" --mode sparse -k 1 "glaciers valleys" > "$T/txt" 2>&1
check 'grep -q "d.txt" "$T/txt"' "the new document by sparse: $(cat "$T/txt")"
# a store without sparse vectors: exit 2, naming the fix
"$BIN" index --quiet --model "$DENSE" --db "$T/plain.db" "$T/docs" > /dev/null 2>&1
"$BIN" search --db "$T/plain.db" --mode sparse "lamp" > "$T/out" 2> "$T/err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "index --sparse" "$T/err"' "sparse search on a plain store: rc $rc, $(cat "$T/err")"
# ... and --sparse on a store that has chunks without sparse vectors: refused
"$BIN" index --quiet --model "$DENSE" --sparse "$SPLADE" --db "$T/plain.db" "$T/docs" > "$T/out" 2> "$T/err"
rc=$?
check '[ $rc -ne 0 ] && grep -q "without sparse vectors" "$T/err"' "index --sparse on a plain store: rc $rc, $(cat "$T/err")"
# not a SPLADE folder: refused naming what is missing
"$BIN" index --quiet --model "$DENSE" --sparse .models/tiny-bert-cls --db "$T/x.db" "$T/docs" > "$T/out" 2> "$T/err"
rc=$?
check '[ $rc -ne 0 ] && grep -qi "ForMaskedLM" "$T/err"' "--sparse with a model without an MLM head: rc $rc, $(cat "$T/err")"
# stats: the sparse rows, the chunks that have them and the model (text and --json); 0, 0, null without
"$BIN" stats --db "$DB" --json --recall-queries 0 > "$T/st.json" 2> "$T/err"
check '[ $? -eq 0 ]' "stats --json: $(cat "$T/err")"
python3 - "$T/st.json" "$DB" <<'PY' && ok || bad "stats --json sparse: $(head -c 900 "$T/st.json")"
import json, sqlite3, sys
j = json.load(open(sys.argv[1]))
sp, st = j["sparse"], j["store"]
con = sqlite3.connect(sys.argv[2])
rows, chunks = con.execute("SELECT count(*), count(DISTINCT chunk) FROM sparse").fetchone()
assert (sp["rows"], sp["chunks"]) == (rows, chunks), (sp, rows, chunks)
assert sp["chunks"] == st["chunks"] > 0 and sp["rows"] > 5 * sp["chunks"], (sp, st)
assert sp["model"] == "splade-tiny" and sp["dir"].endswith("splade-tiny") and len(sp["identity"]) == 16, sp
assert sp["top_k"] == 0 and sp["threshold"] == 0, sp
PY
"$BIN" stats --db "$DB" --recall-queries 0 > "$T/st.txt" 2> "$T/err"
rows=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sparse"]["rows"])' "$T/st.json")
check 'grep -q "^sparse     $rows rows over [1-9][0-9]* chunks .*model splade-tiny" "$T/st.txt"' "stats text: $(cat "$T/st.txt")"
"$BIN" stats --db "$T/plain.db" --json --recall-queries 0 > "$T/st0.json" 2> "$T/err"
python3 - "$T/st0.json" <<'PY' && ok || bad "stats --json on a store without sparse vectors: $(head -c 900 "$T/st0.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["sparse"] == {"rows": 0, "chunks": 0, "model": None} and j["store"]["chunks"] > 0, j["sparse"]
PY
"$BIN" stats --db "$T/plain.db" --recall-queries 0 > "$T/st.txt" 2> "$T/err"
check 'grep -q "^sparse     none: 0 rows, 0 chunks" "$T/st.txt"' "stats text without sparse: $(cat "$T/st.txt")"
check '"$BIN" stats --help | grep -q "^  sparse "' "stats --help names sparse"
# bad mode named
"$BIN" search --db "$DB" --mode sparsee x > /dev/null 2> "$T/err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "sparse" "$T/err"' "--mode sparsee: rc $rc"
# --help says it
check '"$BIN" search --help | grep -q -- "--mode M .*sparse" && "$BIN" index --help | grep -q -- "--sparse DIR"' "--help"
# the server: /search mode sparse with --sparse-model (the same results as the CLI), 400 without it
serve_search() { # DB EXTRA... -> prints "status json" of POST /search {"query": "lighthouse lamp", "mode": "sparse"}
    local db=$1; shift
    rm -f "$T/port"
    "$BIN" serve --model "$DENSE" --db "$db" --quiet --port 0 --port-file "$T/port" "$@" > /dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 1 300); do [ -s "$T/port" ] && break; sleep 0.1; done
    python3 - "$(cat "$T/port" 2>/dev/null)" <<'PY'
import http.client, json, os, sys, time
# the models load after the port is open (slowly under ASan): GET /health says when it is ready
for _ in range(1200):
    try:
        c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        if r.status == 200:
            if os.environ.get("INFO_OUT"):  # GET /info: the store's counts, sparse ones included
                c.request("GET", "/info")
                open(os.environ["INFO_OUT"], "w").write(c.getresponse().read().decode())
            break
    except (OSError, ValueError):
        pass
    time.sleep(0.1)
for _ in range(100):
    try:
        c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
        c.request("POST", "/search", json.dumps({"query": "lighthouse lamp", "mode": "sparse", "k": 3}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        print(r.status, r.read().decode())
        break
    except (OSError, ValueError):
        time.sleep(0.1)
PY
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}
"$BIN" search --db "$DB" --mode sparse --json -k 3 "lighthouse lamp" > "$T/sp.json" 2> "$T/err"
INFO_OUT=$T/info.json serve_search "$DB" --sparse-model "$SPLADE" > "$T/srv"
python3 - "$T/info.json" "$T/st.json" <<'PY' && ok || bad "server /info sparse counts: $(head -c 900 "$T/info.json")"
import json, sys
s, st = json.load(open(sys.argv[1]))["store"], json.load(open(sys.argv[2]))
assert (s["sparse_rows"], s["sparse_chunks"], s["sparse_model"]) == (st["sparse"]["rows"], st["sparse"]["chunks"], "splade-tiny"), s
PY
python3 - "$T/srv" "$T/sp.json" <<'PY' && ok || bad "server sparse search: $(head -c 600 "$T/srv")"
import json, sys
status, body = open(sys.argv[1]).read().split(" ", 1)
assert status == "200", status
r = json.loads(body)["results"]
cli = json.load(open(sys.argv[2]))
cli = cli["results"] if isinstance(cli, dict) else cli
assert [x["path"] for x in r] == [x["path"] for x in cli], ([x["path"] for x in r], [x["path"] for x in cli])
assert all(x["found_by"] == "sparse" for x in r)
assert all(abs(a["sparse_score"] - b["sparse_score"]) <= 1e-5 * b["sparse_score"] for a, b in zip(r, cli))
PY
serve_search "$DB" > "$T/srv"
check 'grep -q "^422 .*no_sparse_model" "$T/srv"' "server sparse search without --sparse-model: $(head -c 300 "$T/srv")"
echo "cli_sparse_search: $pass passed, $fail failed"
[ $fail -eq 0 ]
