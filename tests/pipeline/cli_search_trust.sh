#!/usr/bin/env bash
# tests/pipeline/cli_search_trust.sh MODATTN MODEL_DIR — issue 40's "results people trust" through
# `modattn search`: a passage that only stop words match ("on", "the", "when", "does") is not
# found by words and never outranks what meaning finds; a query of stop words alone is searched by
# meaning, with a note; "recursivly" finds "recursively" (and says what it searched for), "recurs"
# finds the words it begins; the snippet is the window with the most query words, marks on the
# words that matter, never on stop words; the text output shows the cosine and who found it.
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_search_trust
scratch cli-search-trust
DB=$T/s.db
mkdir -p "$T/c"
# the licence: stop words many times, nothing else of the query
{ for i in $(seq 1 12); do printf 'This licence applies on the day when it is granted and on every day after that, as it does on the days before when the work is used on the premises. '; done; echo; } > "$T/c/licence.txt"
printf 'Opening hours of the Main Street cafe: the coffee shop opens at seven and shuts at three in the afternoon on Sundays.\n' > "$T/c/cafe.txt"
printf 'To copy a folder with everything in it, walk the tree recursively: each directory is copied before its files.\n' > "$T/c/copy.txt"
# a long chunk: "alpha" once at its start, then far away "alpha", "beta" and "gamma" together
{ printf 'alpha appears here first. '; for i in $(seq 1 8); do printf 'Filler words about rivers and meadows go on and on. '; done
  printf 'Here they are together: alpha beta gamma, the three of them. '; for i in $(seq 1 6); do printf 'More filler about hills. '; done; echo; } > "$T/c/greek.txt"
printf 'The lighthouse keeper lit the lamp on the hill at dusk.\n' > "$T/c/light.txt"
"$BIN" index --quiet --model "$MODEL" --db "$DB" "$T/c" > /dev/null 2> "$T/i.err" || bad "index: $(cat "$T/i.err")"
js() { "$BIN" search --json --model "$MODEL" --db "$DB" "$@" 2> "$T/err"; }

# the licence is not found by words, and the café comes first
js -k 5 "when does the coffee shop close on Sunday" > "$T/o.json"
check "stop words lift nothing: $(head -c 600 "$T/o.json")" python3 - "$T/o.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
lic = [x for x in r if x["path"].endswith("licence.txt")]
assert all(x["keyword_rank"] is None for x in lic), lic
assert r[0]["path"].endswith("cafe.txt"), r[0]["path"]
for x in r:
    want = "both" if x["vector_rank"] and x["keyword_rank"] else "words" if x["keyword_rank"] else "meaning"
    assert x["found_by"] == want, x
for x in r:  # no stop word is ever marked
    t = x["text"].encode()
    words = {t[a:b].decode().lower() for a, b in x["highlights"]}
    assert not words & {"on", "the", "when", "does"}, words
PY
# stop words alone: by meaning, said in a note; keyword mode still searches them
js -k 3 "on the when" > "$T/o.json"
check "stop words alone: by meaning, with a note ($(cat "$T/err"))" grep -q "stop words" "$T/err"
check "stop words alone: no keyword ranks" python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))['results']
assert r and all(x['keyword_rank'] is None and x['highlights'] == [] for x in r), r" "$T/o.json"
js -k 3 --mode keyword "on the when" > "$T/o.json"
check "stop words alone in keyword mode: searched" python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))['results']
assert r and r[0]['path'].endswith('licence.txt'), r" "$T/o.json"

# typos and prefixes
for mode in hybrid keyword; do
  js -k 3 --mode $mode "recursivly" > "$T/o.json"
  check "$mode: recursivly finds recursively: $(head -c 400 "$T/o.json")" python3 - "$T/o.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
x = [x for x in r if x["path"].endswith("copy.txt")][0]
assert x["keyword_rank"] == 1, x
t = x["text"].encode()
assert [t[a:b].decode() for a, b in x["highlights"]] == ["recursively"], x["highlights"]
PY
done
"$BIN" search --model "$MODEL" --db "$DB" -k 1 "recursivly" > "$T/o.txt" 2> "$T/err"
check "the note says what was searched for ($(cat "$T/err"))" grep -q "recursivly → recursively" "$T/err"
js -k 3 --mode keyword "recurs" > "$T/o.json"
check "recurs finds recursively (a prefix)" python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))['results']
assert r and r[0]['path'].endswith('copy.txt'), r" "$T/o.json"

# the snippet: the window with alpha, beta and gamma together, not the first alpha
"$BIN" search --model "$MODEL" --db "$DB" -k 1 --mode keyword "alpha beta gamma" > "$T/o.txt" 2> "$T/err"
check "snippet at the best window: $(cat "$T/o.txt")" grep -q "«alpha» «beta» «gamma»" "$T/o.txt"
js -k 1 --mode keyword "alpha beta gamma" > "$T/o.json"
check "JSON: the snippet window and who found it (added fields): $(head -c 300 "$T/o.json")" python3 - "$T/o.json" <<'PY'
import json, sys
x = json.load(open(sys.argv[1]))["results"][0]
t = x["text"].encode()
a, b = x["snippet"]
assert b"alpha beta gamma" in t[a:b] and a > 0, (a, b)
assert x["found_by"] == "words" and set(x) >= {"rank", "score", "vector_rank", "keyword_rank", "cosine", "bm25", "highlights"}
PY
# marks on the words that matter, not the stop words; the score is the cosine, who found it said
"$BIN" search --model "$MODEL" --db "$DB" -k 1 "the lamp on the hill" > "$T/o.txt" 2> "$T/err"
check "marks: lamp and hill, not the or on: $(cat "$T/o.txt")" python3 - "$T/o.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
marked = set(m.lower() for m in re.findall("«([^»]*)»", t))
assert marked == {"lamp", "hill"}, marked
assert re.match(r"^ 1\. cosine 0\.\d\d  .*light\.txt  \(line 1, bytes \d+-\d+\)  found by both: meaning #1, words #1$", t.splitlines()[0]), t
PY
# by meaning too: the marks are on the words that matter, and none on a query of stop words alone
"$BIN" search --model "$MODEL" --db "$DB" -k 1 --mode vector "the lamp on the hill" > "$T/o.txt" 2> "$T/err"
check "vector mode marks lamp and hill only: $(cat "$T/o.txt")" python3 -c "
import re, sys; t = open(sys.argv[1]).read()
assert set(m.lower() for m in re.findall('«([^»]*)»', t)) == {'lamp', 'hill'}, t" "$T/o.txt"
"$BIN" search --model "$MODEL" --db "$DB" -k 3 --mode vector "on the when" > "$T/o.txt" 2> "$T/err"
check "vector mode, stop words alone: nothing marked: $(head -c 300 "$T/o.txt")" bash -c '! grep -q "«" "$1"' _ "$T/o.txt"
finish cli_search_trust
