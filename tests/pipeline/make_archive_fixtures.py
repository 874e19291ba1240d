#!/usr/bin/env python3
"""tests/pipeline/make_archive_fixtures.py OUTDIR — the archives cli_archives.sh indexes, written
with the standard library's zipfile/tarfile (nothing from the network):
  OUTDIR/good:    bundle.zip (a folder, a Markdown file, a PNG, a nested zip, a DOCX), docs.tar,
                  docs.tar.gz, docs.tar.bz2, docs.tar.xz, pic.png (unsupported), plain.txt,
                  mail.eml (Python's email writer: two attachments named notes.txt, a PNG, a zip
                  named "../../bundle.zip");
  OUTDIR/hostile: slip.zip (a "../" and an absolute member beside a good one), encrypted.zip (an
                  encrypted member beside a plain one), truncated.zip (cut in its second member),
                  bomb.zip (a member inflating past --max-file-size beside a good one), deep.zip
                  (archives nested three deep), many.zip (10,005 members: past the member cap).
Each good member carries a phrase of its own ("<name> member phrase") that the test searches for."""
import io, os, sys, tarfile, zipfile
from email.message import EmailMessage

out = sys.argv[1]
good, hostile = os.path.join(out, "good"), os.path.join(out, "hostile")
os.makedirs(good, exist_ok=True)
os.makedirs(hostile, exist_ok=True)


def zbytes(members, method=zipfile.ZIP_DEFLATED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", method) as z:
        for n, data in members:
            z.writestr(n, data)
    return b.getvalue()


def docx(text):
    W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    ct = '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'
    doc = f'<?xml version="1.0"?><w:document {W}><w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body></w:document>'
    return zbytes([("[Content_Types].xml", ct), ("word/document.xml", doc)])


def tar(name, mode, members):
    with tarfile.open(name, mode) as t:
        for n, data in members:
            ti = tarfile.TarInfo(n)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))


PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
nested = zbytes([("deep.txt", "lighthouse member phrase: the keeper counts ships in the fog")])
open(os.path.join(good, "bundle.zip"), "wb").write(zbytes([
    ("inner/file.txt", "zebra member phrase: the herd crosses the river at dawn"),
    ("inner/notes.md", "# Notes\n\nquantum member phrase: entangled particles share one state"),
    ("inner/img.png", PNG),
    ("nested/b.zip", nested),
    ("office/budget.docx", docx("budget member phrase: the coffee budget doubles in March")),
]))
for ext, mode in (("tar", "w"), ("tar.gz", "w:gz"), ("tar.bz2", "w:bz2"), ("tar.xz", "w:xz")):
    word = {"tar": "volcano", "tar.gz": "glacier", "tar.bz2": "desert", "tar.xz": "monsoon"}[ext]
    tar(os.path.join(good, "docs." + ext), mode, [("docs/%s.txt" % word, ("%s member phrase: a story about the %s" % (word, word)).encode())])
open(os.path.join(good, "pic.png"), "wb").write(PNG)
open(os.path.join(good, "plain.txt"), "w").write("bread member phrase: yeast makes the dough rise")


def mail(attachments):
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "ann@example.org", "bob@example.org", "Quarterly figures"
    m.set_content("harvest member phrase: the figures are attached, see you at the harvest festival")
    for data, maintype, subtype, name in attachments:
        if maintype == "text":
            m.add_attachment(data, filename=name)
        else:
            m.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return bytes(m)


ATTACHMENTS = [("penguin member phrase: the colony moved north", "text", "plain", "notes.txt"),
               (PNG, "image", "png", "chart.png"),
               (zbytes([("inside/story.txt", "marble member phrase: the quarry under the hill")]), "application", "zip",
                "../../bundle.zip"),
               ("walrus member phrase: a second file named notes.txt", "text", "plain", "notes.txt")]
open(os.path.join(good, "mail.eml"), "wb").write(mail(ATTACHMENTS))
if len(sys.argv) > 2 and sys.argv[2] == "--mail-changed":  # the message without its last attachment
    open(os.path.join(good, "mail.eml"), "wb").write(mail(ATTACHMENTS[:3]))

# ---- hostile
open(os.path.join(hostile, "slip.zip"), "wb").write(zbytes([
    ("ok.txt", "harbour member phrase: boats rest in the harbour"), ("../evil.txt", "escape"),
    ("/tmp/modattn-evil-abs.txt", "escape")]))
b = bytearray(zbytes([("secret.txt", "secret words"), ("open.txt", "meadow member phrase: wild flowers in the meadow")],
                     zipfile.ZIP_STORED))
j = b.find(b"PK\x03\x04")           # the first member's local header ...
b[j + 6] |= 1
j = b.find(b"PK\x01\x02")           # ... and its central directory entry: "encrypted"
b[j + 8] |= 1
open(os.path.join(hostile, "encrypted.zip"), "wb").write(bytes(b))
full = zbytes([("first.txt", "orchard member phrase: apples ripen in the orchard"),
               ("second.txt", os.urandom(200000).hex())], zipfile.ZIP_STORED)
open(os.path.join(hostile, "truncated.zip"), "wb").write(full[: len(full) // 2])
open(os.path.join(hostile, "bomb.zip"), "wb").write(zbytes([
    ("small.txt", "canyon member phrase: the river carved the canyon"), ("bomb.txt", b"\0" * (8 << 20))]))
c = zbytes([("x.txt", "too deep to read")])
open(os.path.join(hostile, "deep.zip"), "wb").write(zbytes([("b.zip", zbytes([("c.zip", c)])),
                                                             ("top.txt", "summit member phrase: the climbers reach the summit")]))
open(os.path.join(hostile, "many.zip"), "wb").write(zbytes([("m%05d.txt" % i, "") for i in range(10005)], zipfile.ZIP_STORED))
