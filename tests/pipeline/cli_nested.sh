#!/usr/bin/env bash
# tests/pipeline/cli_nested.sh MODATTN MODEL_DIR — nested documents (e-mail attachments, archive
# members) are read in the extraction child, never in the indexer (issue 40, "Bad input and
# faults"): a hostile member can only end a child; the indexer says which member and why (exit 3),
# indexes the message's text and every sibling, before and after the hostile one, and loses
# nothing stored on a re-run.
#   mail.eml     text, notes.txt, a PDF bomb (150 MB FlateDecode), a member whose decoding crashes
#                the walking process, walrus.txt after it, and pack.zip holding another crashing
#                member beside deep.txt;
#   hang.eml     a member whose decoding hangs (stopped by --file-timeout), after-hang.txt after it;
#   archive.zip  inner/good.txt, a DOCX whose document.xml inflates past --max-file-size, a
#                crashing member, inner/after.txt after it.
# The crash and the hang are the test hook MODATTN_TEST_WALK_FAULT=1 (pipeline/fmt_archive.c,
# modattn__walk_member): a member named *modattn-test-crash* / *modattn-test-hang* crashes or hangs
# whichever process decodes it, as a bug in GMime or libarchive would (under ASan the crash is the
# sanitizer's report and exit status 1: "the archive extraction process failed").
set -u
BIN=$(realpath "$1")
MODEL=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/harness.sh"
need_model "$MODEL" cli_nested
scratch cli-nested
mkdir -p "$T/c"
python3 "$HERE/hostile_files.py" bomb "$T/bomb.pdf" 150
python3 - "$T/c" "$T/bomb.pdf" <<'PY'
import io, sys, zipfile
from email.message import EmailMessage
d, bomb = sys.argv[1], open(sys.argv[2], "rb").read()

def zbytes(members):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in members:
            z.writestr(n, data)
    return b.getvalue()

def mail(text, atts):
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "ann@example.org", "bob@example.org", "figures"
    m.set_content(text)
    for name, data, mt in atts:
        if isinstance(data, str):
            m.add_attachment(data, filename=name)
        else:
            m.add_attachment(data, maintype=mt[0], subtype=mt[1], filename=name)
    return bytes(m)

pack = zbytes([("modattn-test-crash-inner.txt", "never read"), ("deep.txt", "otter member phrase: rivers and dams")])
open(d + "/mail.eml", "wb").write(mail("harvest member phrase: the figures are attached", [
    ("notes.txt", "penguin member phrase: the colony moved north", None),
    ("bomb.pdf", bomb, ("application", "pdf")),
    ("modattn-test-crash.txt", "never read", None),
    ("walrus.txt", "walrus member phrase: tusks on the ice", None),
    ("pack.zip", pack, ("application", "zip"))]))
open(d + "/hang.eml", "wb").write(mail("lantern member phrase: the message around a hang", [
    ("modattn-test-hang.txt", "never read", None),
    ("after-hang.txt", "meadow member phrase: after the hang", None)]))
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
big = ('<?xml version="1.0"?><w:document %s><w:body><w:p><w:r><w:t>' % W) + "a" * (40 << 20) + "</w:t></w:r></w:p></w:body></w:document>"
evil = zbytes([("[Content_Types].xml", "<Types/>"), ("word/document.xml", big)])
open(d + "/archive.zip", "wb").write(zbytes([
    ("inner/good.txt", "zebra member phrase: the herd crosses the river"),
    ("evil.docx", evil),
    ("inner/modattn-test-crash.txt", "never read"),
    ("inner/after.txt", "quartz member phrase: after the crash")]))
PY
DB=$T/s.db
# j FILE EXPR: the Python expression holds for the JSON in FILE (as j)
j() { python3 -c "import json,sys
try: j=json.load(open(sys.argv[1]))
except Exception as e: print(\"no JSON in\", sys.argv[1], e); sys.exit(1)
r=($2); print(r) if r is not True else None; sys.exit(0 if r is True else 1)" "$1"; }
run() {
  MODATTN_TEST_WALK_FAULT=1 "$BIN" --mem-budget 400M index --json --file-timeout 5 --max-file-size 8M \
    --model "$MODEL" --db "$DB" "$T/c" > "$1.json" 2> "$1.err"
}
run "$T/i1"
rc=$?
check "the indexer survives and exits 3: rc $rc, $(tail -c 600 "$T/i1.err")" test $rc -eq 3
err() { # err PATH-SUFFIX PATTERN: an error for that path whose message matches
  j "$T/i1.json" "any(e['path'].endswith('/c/$1') and __import__('re').search(r'''$2''', e['message']) for e in j['errors']) or j['errors']"
}
check "the PDF bomb attachment: over the memory budget (or the time limit, under load)" err "mail.eml!/bomb.pdf" "exceeded the memory budget|took longer than --file-timeout"
check "the crashing attachment: named, the library crashed" err "mail.eml!/modattn-test-crash.txt" "e-mail (library crashed|extraction process failed)"
check "the crashing member of the attached zip: named" err "mail.eml!/pack.zip!/modattn-test-crash-inner.txt" "archive (library crashed|extraction process failed)"
check "the hanging attachment: stopped by --file-timeout" err "hang.eml!/modattn-test-hang.txt" "took longer than --file-timeout 5 s"
check "the DOCX bomb in the zip: over the cap" err "archive.zip!/evil.docx" "past|over the cap|memory budget"
check "the crashing archive member: named" err "archive.zip!/inner/modattn-test-crash.txt" "archive (library crashed|extraction process failed)"
check "6 errors and no more: $(head -c 1500 "$T/i1.json")" j "$T/i1.json" "len(j['errors']) == 6 or j['errors']"
docs() { python3 -c "import sqlite3,sys; print('\n'.join(sorted(r[0].split('/c/')[1] for r in sqlite3.connect(sys.argv[1]).execute('select path from documents'))))" "$DB"; }
want='archive.zip!/inner/after.txt
archive.zip!/inner/good.txt
hang.eml
hang.eml!/after-hang.txt
mail.eml
mail.eml!/notes.txt
mail.eml!/pack.zip!/deep.txt
mail.eml!/walrus.txt'
got=$(docs)
check "the text parts and every sibling stored, before and after the hostile members: $got" test "$got" = "$want"
for pair in "harvest:mail.eml" "penguin:mail.eml!/notes.txt" "walrus:mail.eml!/walrus.txt" "otter:mail.eml!/pack.zip!/deep.txt" \
            "lantern:hang.eml" "meadow:hang.eml!/after-hang.txt" "zebra:archive.zip!/inner/good.txt" "quartz:archive.zip!/inner/after.txt"; do
  w=${pair%%:*}; p=${pair#*:}
  "$BIN" search --json --model "$MODEL" --db "$DB" -k 3 --mode keyword "$w member phrase" > "$T/s.json" 2> /dev/null
  check "'$w member phrase' finds $p first" j "$T/s.json" "j['results'][0]['path'].endswith('/c/$p') or [h['path'] for h in j['results']]"
done
# a re-run: the messages are unchanged (not read again); the archive, not read whole, is walked
# again and meets the same two faults: nothing stored is lost, nothing pruned
run "$T/i2"
rc=$?
check "re-run: exit 3: rc $rc" test $rc -eq 3
check "re-run: nothing pruned, the archive's two errors again: $(head -c 800 "$T/i2.json")" \
  j "$T/i2.json" "j['files_pruned'] == 0 and j['files_indexed'] == 0 and sorted(e['path'].split('/c/')[1] for e in j['errors']) == ['archive.zip!/evil.docx', 'archive.zip!/inner/modattn-test-crash.txt'] or j"
got=$(docs)
check "re-run: every stored document kept: $got" test "$got" = "$want"
finish cli_nested
