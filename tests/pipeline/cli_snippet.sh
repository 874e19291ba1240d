#!/usr/bin/env bash
# tests/pipeline/cli_snippet.sh MODATTN MODEL_DIR — a result found by meaning alone shows the
# passage that answers the query, not its chunk's start (issue 40: snippets weighed by meaning,
# pipeline/snippet.c): in the text output, in --json's "snippet" (alone and in a --queries batch:
# the same window), and in the server's /search (the same window: one code path).
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_snippet
scratch cli-snippet
DB=$T/s.db
mkdir -p "$T/c"
# one chunk of seven sentences; the fourth answers the query, which shares none of its words
{ printf 'The village sits in a valley between two rivers, and most of its houses are built from grey stone quarried nearby. '
  printf 'Every spring the meadows flood, and the farmers move their sheep to the higher pastures for a few weeks. '
  printf 'The church tower was rebuilt after a storm in the last century and its bell can be heard from the next town. '
  printf 'The baker closes his shop at noon on Saturdays and Sundays, once the last loaves have been sold. '
  printf 'A narrow road climbs from the square to the old mill, where the water wheel still turns for visitors. '
  printf 'In the autumn the orchards are heavy with apples, and children are paid a few coins to gather them. '
  printf 'The school has three classrooms and a small library that opens in the evenings twice a week.\n'; } > "$T/c/village.txt"
printf 'Lava flows from the volcano after the eruption.\n' > "$T/c/volcano.txt"
"$BIN" index --quiet --model "$MODEL" --db "$DB" "$T/c" > /dev/null 2> "$T/i.err" || bad "index: $(cat "$T/i.err")"
Q="where to find fresh bread at the weekend"
"$BIN" search --model "$MODEL" --db "$DB" -k 1 "$Q" > "$T/o.txt" 2> "$T/err"
check "text: the answering sentence, not the chunk's start: $(cat "$T/o.txt")" \
  grep -q "^    …The baker closes his shop at noon on Saturdays and Sundays" "$T/o.txt"
"$BIN" search --json --model "$MODEL" --db "$DB" -k 2 "$Q" > "$T/alone.json" 2> "$T/err"
printf 'lava from a volcano\n%s\nstone houses by the rivers\n' "$Q" > "$T/q.txt"
"$BIN" search --json --model "$MODEL" --db "$DB" -k 2 --queries "$T/q.txt" > "$T/batch.jsonl" 2> "$T/err"
check "JSON: found by meaning, the snippet is the passage, the same in a batch: $(head -c 400 "$T/alone.json")" \
  python3 - "$T/alone.json" "$T/batch.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
x = r[0]
assert x["path"].endswith("village.txt") and x["found_by"] == "meaning" and x["highlights"] == [], x
t = x["text"].encode()
a, b = x["snippet"]
at = t.index(b"The baker closes")
assert a == at and b - a <= 243 and t[a:b].startswith(b"The baker closes his shop at noon"), (a, b, at)
batch = [json.loads(l) for l in open(sys.argv[2])]
assert [q["query"] for q in batch] == [1, 2, 3]
assert [(y["chunk_id"], y["snippet"]) for y in batch[1]["results"]] == [(y["chunk_id"], y["snippet"]) for y in r]
# the third query's village window: the first sentence's stone houses and rivers
v = [y for y in batch[2]["results"] if y["path"].endswith("village.txt")][0]
a, b = v["snippet"]
assert b"rivers" in t[a:b] and b"stone" in t[a:b] and a < t.index(b"Every spring"), v["snippet"]
PY
# the server's /search: the same window
"$BIN" serve --model "$MODEL" --db "$DB" --port 0 --port-file "$T/port" --workers 1 --quiet > "$T/log" 2>&1 &
spid=$!
for _ in $(seq 600); do [ -s "$T/port" ] && break; kill -0 "$spid" 2> /dev/null || break; sleep 0.1; done
if [ -s "$T/port" ]; then
  python3 - "$(cat "$T/port")" "$Q" > "$T/srv.json" 2> "$T/srv.err" <<'PY'
import http.client, json, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=120)
for _ in range(1200):  # the model loads after the port is open: GET /health says when it is ready
    c.request("GET", "/health")
    r = c.getresponse()
    r.read()
    if r.status == 200:
        break
    time.sleep(0.1)
c.request("POST", "/search", json.dumps({"query": sys.argv[2], "k": 2}), {"Content-Type": "application/json"})
print(c.getresponse().read().decode())
PY
  check "server: the same snippet as the CLI: $(head -c 300 "$T/srv.json") $(cat "$T/srv.err")" python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))['results']; c = json.load(open(sys.argv[2]))['results']
assert [(x['chunk_id'], x['snippet']) for x in s] == [(x['chunk_id'], x['snippet']) for x in c], (s, c)" "$T/srv.json" "$T/alone.json"
else
  bad "the server did not start: $(cat "$T/log")"
fi
kill -TERM "$spid" 2> /dev/null; wait "$spid" 2> /dev/null
finish cli_snippet
