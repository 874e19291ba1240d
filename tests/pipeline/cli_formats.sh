#!/usr/bin/env bash
# tests/pipeline/cli_formats.sh MODATTN MODEL_DIR — issue 40's formats end to end: a folder with
# one file of each format (made by make_format_fixtures.py; the Word 97-2003 .doc files are the
# committed tests/fixtures/doc/, written by tools/make_doc_fixtures.py) is indexed, and each file is the top
# hit for a phrase from its text; the hostile ones (zip slip, XML bomb, encrypted member, a zip
# bomb over --max-file-size, an encrypted .doc) are skipped with their reason and exit 3, the rest
# indexed, an OLE2 file that is not Word (.xls) skipped as unsupported; a ZIP
# archive is walked as a folder (its members, nested zip included, are documents: cli_archives
# tests archives in depth).
set -u
BIN=$1
MODEL=$2
. "$(dirname "$0")/harness.sh"
need_model "$MODEL" cli_formats
scratch cli-formats
python3 "$(dirname "$0")/make_format_fixtures.py" "$T/all" >/dev/null || { bad "fixtures"; finish cli_formats; exit; }
mkdir -p "$T/docs" "$T/bad"
for f in budget.docx deck.pptx sheet.xlsx memo.odt talk.odp calc.ods zebras.epub letter.rtf note.eml inbox.mbox \
         README.gz notes.txt.bz2 notes.txt.xz page.html.gz bundle.zip; do cp "$T/all/$f" "$T/docs/"; done
# the .zst fixture needs the zstd command (tools/install_deps.sh installs it): without it this fails,
# naming why, rather than leave .zst untested
if [ -f "$T/all/notes.txt.zst" ]; then cp "$T/all/notes.txt.zst" "$T/docs/"
else bad "no .zst fixture: the zstd command is not installed (tools/install_deps.sh installs it)"; fi
DOCS=$(dirname "$0")/../fixtures/doc
cp "$DOCS/word97.doc" "$DOCS/unicode.doc" "$DOCS/stories.doc" "$T/docs/"
cp "$DOCS/encrypted.doc" "$DOCS/book.xls" "$T/bad/"
for f in slip.docx bomb.docx encrypted.docx zipbomb.docx truncated.docx xxe.odt bomb.txt.gz; do cp "$T/all/$f" "$T/bad/"; done
DB=$T/s.db
"$BIN" index --json --model "$MODEL" --db "$DB" "$T/docs" > "$T/i.json" 2> "$T/i.err"
rc=$?
check "good folder: exit 0 ($rc: $(head -c 600 "$T/i.err"))" test $rc -eq 0
check "every format indexed, the zip walked as a folder: $(head -c 1500 "$T/i.json")" python3 - "$T/i.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["files_skipped"] == 0 and not j["errors"], j
assert j["files_indexed"] >= 20, j
PY
for pair in "budget.docx:docx alpha phrase" "deck.pptx:pptx omega phrase" "sheet.xlsx:xlsx alpha phrase" \
            "memo.odt:odt alpha phrase" "talk.odp:odp omega phrase" "calc.ods:ods alpha phrase" \
            "zebras.epub:epub alpha phrase" "letter.rtf:rtf omega phrase" \
            "word97.doc:doc omega phrase ends here" "unicode.doc:unicode alpha phrase" \
            "stories.doc:footnote one text" "stories.doc:header words here" \
            "note.eml:coffee shop closes at noon on Sunday" "inbox.mbox:mbox alpha phrase" \
            "README.gz:gz alpha phrase" "notes.txt.bz2:bz2 omega phrase" "notes.txt.xz:xz alpha phrase" \
            "notes.txt.zst:zst omega phrase" \
            "page.html.gz:htmlgz alpha phrase" "bundle.zip!/inner/file.txt:archive member phrase" \
            "bundle.zip!/inner/b.zip!/deep.txt:nested text" "note.eml!/report.pdf:attachment pdf phrase"; do
  f=${pair%%:*}; q=${pair#*:}
  "$BIN" search --json --model "$MODEL" --db "$DB" -k 3 --mode keyword "$q" > "$T/s.json" 2>"$T/s.err"
  check "'$q' finds $f first: $(head -c 400 "$T/s.json") $(head -c 300 "$T/s.err")" python3 - "$T/s.json" "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
hits = j["results"] if isinstance(j, dict) else j
assert hits and hits[0]["path"].endswith("/" + sys.argv[2]), [h["path"] for h in hits]
PY
done
"$BIN" index --json --model "$MODEL" --db "$DB" --max-file-size 16M "$T/bad" > "$T/b.json" 2> "$T/b.err"
rc=$?
check "hostile folder: exit 3 ($rc)" test $rc -eq 3
check "hostile files refused with their reasons: $(head -c 2000 "$T/b.json")" python3 - "$T/b.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
why = {e["path"].rsplit("/", 1)[1]: e["message"] for e in j["errors"]}
assert "zip slip" in why["slip.docx"], why
assert "XML bomb" in why["bomb.docx"], why
assert "encrypted" in why["encrypted.docx"], why
assert "--max-file-size" in why["zipbomb.docx"], why
assert "truncated" in why["truncated.docx"] or "DOCX" in why["truncated.docx"], why
assert "entities" in why["xxe.odt"], why
assert "--max-file-size" in why["bomb.txt.gz"], why
assert "encrypted" in why["encrypted.doc"], why
skipped = {s["path"].rsplit("/", 1)[1]: s["reason"] for s in j["skipped"]}
assert "no WordDocument stream" in skipped["book.xls"] and "unsupported format" in skipped["book.xls"], skipped
assert j["files_indexed"] == 0, j
PY
finish cli_formats
