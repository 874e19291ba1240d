#!/usr/bin/env bash
# tests/pipeline/cli_archives.sh MODATTN MODEL_DIR — ZIP and TAR archives walked as folders by
# `modattn index` (fixtures: make_archive_fixtures.py): every member a document, ARCHIVE!/MEMBER,
# found by its phrase (a nested zip, a DOCX inside a zip, .tar/.tar.gz/.tar.bz2/.tar.xz); hostile
# archives (zip slip, encrypted member, truncated, bomb, nested too deep, past the member cap)
# skipped member by member with the reason, exit 3, the rest indexed, nothing written outside;
# a re-run skips unchanged archives and does not say a file skipped for its format again
# (--verbose does); a changed archive re-indexes its changed members and drops the ones gone;
# rm, ls and --prune understand members; an archive turned into a text file loses its members.
set -u
BIN=$(realpath "$1")
MODEL=$(realpath "$2")
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_archives
scratch cli-archives
FX=$(realpath "$(dirname "$0")")/make_archive_fixtures.py
python3 "$FX" "$T/fx" >/dev/null || { bad "fixtures"; finish cli_archives; exit; }
cp -r "$T/fx/good" "$T/good"
cp -r "$T/fx/hostile" "$T/hostile"
mkdir "$T/work"
cd "$T/work" || exit 1
DB=$T/s.db
rm -f /tmp/modattn-evil-abs.txt
idx() { "$BIN" index --model "$MODEL" --db "$DB" "$@"; }
# j FILE EXPR: the Python expression holds for the JSON in FILE (as j)
j() { python3 -c "import json,sys
try: j=json.load(open(sys.argv[1]))
except Exception as e: print(\"no JSON in\", sys.argv[1], e); sys.exit(1)
r=($2); print(r) if r is not True else None; sys.exit(0 if r is True else 1)" "$1"; }
first() { # first QUERY PATH-SUFFIX: the top hit of a keyword search for QUERY ends with PATH-SUFFIX
  "$BIN" search --json --model "$MODEL" --db "$DB" -k 3 --mode keyword "$1" > "$T/s.json" 2>/dev/null
  j "$T/s.json" "(j['results'] if isinstance(j, dict) else j)[0]['path'].endswith('$2') or [h['path'] for h in (j['results'] if isinstance(j, dict) else j)]"
}

idx --json "$T/good" > "$T/i1.json" 2> "$T/i1.err"
rc=$?
check "good archives: exit 0 ($rc: $(head -c 400 "$T/i1.err"))" test $rc -eq 0
check "good archives: 13 documents, 3 PNGs skipped: $(head -c 800 "$T/i1.json")" \
  j "$T/i1.json" "j['files_indexed'] == 13 and j['files_skipped'] == 3 and not j['errors'] and sorted(s['reason'] for s in j['skipped']) == ['a PNG image (unsupported format)'] * 3 or j"
for pair in "zebra:bundle.zip!/inner/file.txt" "quantum:bundle.zip!/inner/notes.md" \
            "lighthouse:bundle.zip!/nested/b.zip!/deep.txt" "budget:bundle.zip!/office/budget.docx" \
            "volcano:docs.tar!/docs/volcano.txt" "glacier:docs.tar.gz!/docs/glacier.txt" \
            "desert:docs.tar.bz2!/docs/desert.txt" "monsoon:docs.tar.xz!/docs/monsoon.txt" "bread:plain.txt" \
            "harvest:mail.eml" "penguin:mail.eml!/notes.txt" "walrus:mail.eml!/notes (2).txt" \
            "marble:mail.eml!/.._.._bundle.zip!/inside/story.txt"; do
  w=${pair%%:*}; p=${pair#*:}
  check "'$w member phrase' finds $p first" first "$w member phrase" "/good/$p"
done

# a re-run: every archive unchanged (not opened), the PNG not said again; --verbose says it
idx --json "$T/good" > "$T/i2.json" 2> "$T/i2.err"
check "re-run: nothing indexed, the archives and plain.txt unchanged: $(head -c 600 "$T/i2.json")" \
  j "$T/i2.json" "j['files_indexed'] == 0 and j['files_unchanged'] == 7 or j"
check "re-run: pic.png (skipped before, unchanged) not listed: $(head -c 600 "$T/i2.json")" \
  j "$T/i2.json" "not any(s['path'].endswith('/pic.png') for s in j['skipped'])"
idx "$T/good" > /dev/null 2> "$T/i3.err"
check "re-run: pic.png not said: $(cat "$T/i3.err")" eval '! grep -q "pic.png" "$T/i3.err"'
idx --verbose "$T/good" > /dev/null 2> "$T/i4.err"
check "--verbose says pic.png: $(cat "$T/i4.err")" grep -q "pic.png: skipped (a PNG image (unsupported format)" "$T/i4.err"

# the same reason said once per run, the rest counted
cp "$T/good/pic.png" "$T/good/pic2.png"
idx "$T/good" > /dev/null 2> "$T/i5.err"
check "a new PNG said (its reason not said yet this run): $(cat "$T/i5.err")" grep -q "pic2.png: skipped" "$T/i5.err"

# a changed archive: a changed member re-indexed, a removed one dropped, the others unchanged
python3 - "$T/good/bundle.zip" <<'PY'
import sys, zipfile
src = zipfile.ZipFile(sys.argv[1]).read
members = [("inner/file.txt", "okapi member phrase: the forest giraffe hides"), ("nested/b.zip", src("nested/b.zip")),
           ("office/budget.docx", src("office/budget.docx")), ("inner/img.png", src("inner/img.png"))]
with zipfile.ZipFile(sys.argv[1] + ".new", "w", zipfile.ZIP_DEFLATED) as z:
    for n, d in members:
        z.writestr(n, d)
PY
mv "$T/good/bundle.zip.new" "$T/good/bundle.zip"
idx --json "$T/good" > "$T/i6.json" 2> "$T/i6.err"
check "changed archive: 1 member re-indexed, 1 dropped: $(head -c 800 "$T/i6.json") $(head -c 300 "$T/i6.err")" \
  j "$T/i6.json" "j['files_indexed'] == 1 and j['files_pruned'] == 1 or j"
check "changed member found by its new phrase" first "okapi member phrase" "/good/bundle.zip!/inner/file.txt"
"$BIN" ls --json --db "$DB" "$T/good/bundle.zip" > "$T/ls1.json"
check "ls ARCHIVE lists its 3 members: $(cat "$T/ls1.json")" \
  j "$T/ls1.json" "sorted(d['path'].split('!/', 1)[1] for d in j['documents']) == ['inner/file.txt', 'nested/b.zip!/deep.txt', 'office/budget.docx'] or j"

# a changed e-mail: the message and its attachments read again, the attachment gone dropped
python3 "$FX" "$T/fx2" --mail-changed >/dev/null && cp "$T/fx2/good/mail.eml" "$T/good/mail.eml"
idx --json "$T/good" > "$T/m1.json" 2>/dev/null
check "changed e-mail: the message re-indexed, its removed attachment dropped: $(head -c 800 "$T/m1.json")" \
  j "$T/m1.json" "j['files_indexed'] == 1 and j['files_pruned'] == 1 or j"
"$BIN" ls --json --db "$DB" "$T/good/mail.eml" > "$T/lsm.json"
check "ls MAIL: the message and its 2 attachments left: $(cat "$T/lsm.json")" \
  j "$T/lsm.json" "sorted(d['path'].rsplit('/good/', 1)[1] for d in j['documents']) == ['mail.eml', 'mail.eml!/.._.._bundle.zip!/inside/story.txt', 'mail.eml!/notes.txt'] or j"

# rm: one member, then the archive (its members); the next index brings them back
"$BIN" rm --quiet --db "$DB" "$T/good/bundle.zip!/office/budget.docx"
"$BIN" ls --json --db "$DB" "$T/good/bundle.zip" > "$T/ls2.json"
check "rm ARCHIVE!/MEMBER removes that member only: $(cat "$T/ls2.json")" j "$T/ls2.json" "j['count'] == 2 or j"
"$BIN" rm --quiet --db "$DB" "$T/good/bundle.zip"
"$BIN" ls --json --db "$DB" "$T/good/bundle.zip" > "$T/ls3.json" 2>/dev/null
check "rm ARCHIVE removes its members: $(cat "$T/ls3.json")" j "$T/ls3.json" "j['count'] == 0 or j"
idx --json "$T/good" > "$T/i7.json" 2>/dev/null
check "index after rm brings the 3 members back: $(head -c 600 "$T/i7.json")" j "$T/i7.json" "j['files_indexed'] == 3 or j"

# --prune: members stay while their archive is there, go with it
idx --json --prune "$T/good" > "$T/i8.json" 2>/dev/null
check "--prune keeps the members of an archive that is there: $(head -c 600 "$T/i8.json")" j "$T/i8.json" "j['files_pruned'] == 0 or j"
rm "$T/good/docs.tar.gz"
idx --json --prune "$T/good" > "$T/i9.json" 2>/dev/null
check "--prune drops the members of a removed archive: $(head -c 600 "$T/i9.json")" j "$T/i9.json" "j['files_pruned'] == 1 or j"
"$BIN" ls --json --db "$DB" "$T/good" > "$T/ls4.json"
check "ls: no member of docs.tar.gz left" j "$T/ls4.json" "not any('docs.tar.gz' in d['path'] for d in j['documents'])"

# an archive that becomes a text file: its members go, it is a document
echo "walrus member phrase: a text file where an archive was" > "$T/good/docs.tar"
touch -d '2001-01-01' "$T/good/docs.tar"
idx --json "$T/good" > "$T/i10.json" 2>/dev/null
"$BIN" ls --json --db "$DB" "$T/good/docs.tar" > "$T/ls5.json"
check "an archive turned text: its member gone, itself a document: $(cat "$T/ls5.json")" \
  j "$T/ls5.json" "[d['path'].rsplit('/', 1)[1] for d in j['documents']] == ['docs.tar'] or j"

# hostile archives: each bad member (or the bad rest) an error, exit 3, the good members indexed
idx --json --max-file-size 1M "$T/hostile" > "$T/h.json" 2> "$T/h.err"
rc=$?
check "hostile archives: exit 3 ($rc)" test $rc -eq 3
check "hostile archives: the reasons: $(head -c 2500 "$T/h.json")" python3 - "$T/h.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
why = {e["path"].split("/hostile/", 1)[1]: e["message"] for e in j["errors"]}
assert "zip slip" in why["slip.zip!/../evil.txt"], why
assert "zip slip" in why["slip.zip!//tmp/modattn-evil-abs.txt"], why
assert "encrypted" in why["encrypted.zip!/secret.txt"], why
assert "truncated" in why["truncated.zip"], why
assert "--max-file-size" in why["bomb.zip!/bomb.txt"], why
assert "nested deeper" in why["deep.zip!/b.zip!/c.zip"], why
assert "10000 members" in why["many.zip!/m10000.txt"], why
assert len(why) == 7, why
PY
for pair in "harbour:slip.zip!/ok.txt" "meadow:encrypted.zip!/open.txt" "orchard:truncated.zip!/first.txt" \
            "canyon:bomb.zip!/small.txt" "summit:deep.zip!/top.txt"; do
  w=${pair%%:*}; p=${pair#*:}
  check "hostile: the good member $p indexed" first "$w member phrase" "/hostile/$p"
done
check "nothing written outside: no evil.txt" test -z "$(find "$T" /tmp/modattn-evil-abs.txt -name 'evil.txt' -o -name 'modattn-evil-abs.txt' 2>/dev/null)"
check "nothing written in the working folder" test -z "$(ls -A "$T/work")"
# a hostile archive is read again (and said again) by the next run: its errors are not remembered
idx --json --max-file-size 1M "$T/hostile" > "$T/h2.json" 2>/dev/null
rc=$?
check "hostile re-run: exit 3 again, nothing indexed ($rc)" j "$T/h2.json" "j['files_indexed'] == 0 and len(j['errors']) == 7 or j"
finish cli_archives
