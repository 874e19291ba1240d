#!/usr/bin/env python3
"""tests/pipeline/make_format_fixtures.py OUTDIR — writes one small file of each format of issue 40
(and the hostile ones) by hand, with the standard library's zipfile/gzip/bz2/lzma/tarfile and the
zstd command when it is installed. Nothing comes from the network. Each good file carries two
phrases, in order, that tests/pipeline/test_formats.c looks for in the extracted text:
"<format> alpha phrase" then "<format> omega phrase" (e.g. "docx alpha phrase")."""
import bz2, gzip, io, lzma, os, shutil, subprocess, sys, tarfile, zipfile

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def path(name):
    return os.path.join(out, name)


def zwrite(name, members, first_stored=None):
    with zipfile.ZipFile(path(name), "w", zipfile.ZIP_DEFLATED) as z:
        if first_stored:
            z.writestr(zipfile.ZipInfo(first_stored[0]), first_stored[1], compress_type=zipfile.ZIP_STORED)
        for n, data in members:
            z.writestr(n, data)


W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
A = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
CT = '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'


def docx_xml(body):
    return f'<?xml version="1.0" encoding="UTF-8"?><w:document {W}><w:body>{body}</w:body></w:document>'


def para(text):
    return f'<w:p><w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>'


# ---- DOCX: two paragraphs, the first split over runs with a tab, a deleted run left out
docx_body = ('<w:p><w:r><w:t xml:space="preserve">docx alpha </w:t></w:r><w:r><w:t>phrase</w:t></w:r>'
             '<w:del><w:r><w:delText>deleted words</w:delText></w:r></w:del></w:p>'
             + para("budget for the zebra sanctuary") + para("docx omega phrase"))
zwrite("budget.docx", [("[Content_Types].xml", CT), ("_rels/.rels", "<Relationships/>"),
                       ("word/document.xml", docx_xml(docx_body))])

# ---- PPTX: two slides listed in presentation.xml in the order 2, 1 (names against order)
pres = (f'<?xml version="1.0"?><p:presentation {P} {R}><p:sldIdLst>'
        '<p:sldId id="256" r:id="rId7"/><p:sldId id="257" r:id="rId3"/></p:sldIdLst></p:presentation>')
rels = ('<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId3" Type="slide" Target="slides/slide1.xml"/>'
        '<Relationship Id="rId7" Type="slide" Target="slides/slide2.xml"/></Relationships>')


def slide(text):
    return (f'<?xml version="1.0"?><p:sld {P} {A}><p:cSld><p:spTree><p:sp><p:txBody>'
            f'<a:p><a:r><a:t>{text}</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>')


zwrite("deck.pptx", [("[Content_Types].xml", CT), ("ppt/presentation.xml", pres),
                     ("ppt/_rels/presentation.xml.rels", rels),
                     ("ppt/slides/slide1.xml", slide("pptx omega phrase")),
                     ("ppt/slides/slide2.xml", slide("pptx alpha phrase"))])

# ---- XLSX: shared strings (one rich), an inline string, a number
S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
wb = f'<?xml version="1.0"?><workbook {S} {R}><sheets><sheet name="One" sheetId="1" r:id="rId1"/></sheets></workbook>'
wbrels = ('<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
          '<Relationship Id="rId1" Type="worksheet" Target="worksheets/sheet1.xml"/></Relationships>')
sst = (f'<?xml version="1.0"?><sst {S}><si><t>xlsx alpha phrase</t></si>'
       '<si><r><t>xlsx omega </t></r><r><t>phrase</t></r></si></sst>')
sheet = (f'<?xml version="1.0"?><worksheet {S}><sheetData>'
         '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1"><v>42</v></c></row>'
         '<row r="2"><c r="A2" t="inlineStr"><is><t>inline cell text</t></is></c><c r="B2" t="s"><v>1</v></c></row>'
         '</sheetData></worksheet>')
zwrite("sheet.xlsx", [("[Content_Types].xml", CT), ("xl/workbook.xml", wb), ("xl/_rels/workbook.xml.rels", wbrels),
                      ("xl/sharedStrings.xml", sst), ("xl/worksheets/sheet1.xml", sheet)])

# ---- OpenDocument: text, presentation, spreadsheet
OD = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"')


def odf(name, mime, body):
    content = f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {OD}><office:body>{body}</office:body></office:document-content>'
    zwrite(name, [("META-INF/manifest.xml", "<manifest/>"), ("content.xml", content)],
           first_stored=("mimetype", mime))


odf("memo.odt", "application/vnd.oasis.opendocument.text",
    '<office:text><text:h>odt alpha <text:span>phrase</text:span></text:h>'
    '<text:p>the memo<text:s/>says<text:tab/>hello</text:p><text:p>odt omega phrase</text:p></office:text>')
odf("talk.odp", "application/vnd.oasis.opendocument.presentation",
    '<office:presentation><draw:page><text:p>odp alpha phrase</text:p></draw:page>'
    '<draw:page><text:p>odp omega phrase</text:p></draw:page></office:presentation>')
odf("calc.ods", "application/vnd.oasis.opendocument.spreadsheet",
    '<office:spreadsheet><table:table table:name="S"><table:table-row><table:table-cell><text:p>ods alpha phrase</text:p>'
    '</table:table-cell><table:table-cell><text:p>7</text:p></table:table-cell></table:table-row>'
    '<table:table-row><table:table-cell><text:p>ods omega phrase</text:p></table:table-cell></table:table-row>'
    '</table:table></office:spreadsheet>')

# ---- EPUB: the spine orders ch2 before ch1; a chapter in a subfolder reached with ../
container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
             '</rootfiles></container>')
opf = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata/><manifest>'
       '<item id="c1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>'
       '<item id="c2" href="ch%202.xhtml" media-type="application/xhtml+xml"/></manifest>'
       '<spine><itemref idref="c2"/><itemref idref="c1"/></spine></package>')


def xhtml(body):
    return ('<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml">'
            f'<head><title>t</title><style>p {{ color: red }}</style></head><body>{body}</body></html>')


zwrite("zebras.epub", [("META-INF/container.xml", container), ("OEBPS/content.opf", opf),
                       ("OEBPS/ch 2.xhtml", xhtml("<h1>Zebras</h1><p>epub alpha phrase</p>")),
                       ("OEBPS/text/ch1.xhtml", xhtml("<p>stripes &amp; more</p><p>epub omega phrase</p>"))],
       first_stored=("mimetype", "application/epub+zip"))

# ---- RTF: destinations skipped, \'hh, \u with \uc, escapes
rtf = (r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss Helvetica;}}{\colortbl;\red255\green0\blue0;}"
       r"{\*\generator Hand 1.0;}{\info{\title secret title words}}"
       r"\f0\pard rtf alpha phrase\par caf\'e9 na\u239\'3fve \uc2\u8364 XXeuro \{braces\}\par"
       r"{\*\unknowndest hidden destination words}rtf omega phrase\par}")
open(path("letter.rtf"), "w").write(rtf)

# ---- e-mail: multipart/alternative (plain preferred), quoted-printable, base64 ISO-8859-1, attachment
# the e-mail's attachment: a real one-page PDF (hostile_files.py's writer), a document of its own
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_files  # noqa: E402
hostile_files.write_pdf(path("report.pdf.tmp"), [hostile_files.page_of("attachment pdf phrase")])
report_pdf = __import__("base64").encodebytes(open(path("report.pdf.tmp"), "rb").read()).decode()
os.remove(path("report.pdf.tmp"))
eml = """From: =?UTF-8?Q?Zo=C3=A9?= <zoe@example.org>
To: Bob <bob@example.org>
Subject: =?ISO-8859-1?Q?email_alpha_phrase_caf=E9?=
Date: Mon, 1 Jun 2026 10:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="OUTER"

--OUTER
Content-Type: multipart/alternative; boundary="ALT"

--ALT
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

The coffee shop closes at noon on Sunday, sa=
ys the plain part.

--ALT
Content-Type: text/html; charset=utf-8

<p>html alternative words</p>
--ALT--

--OUTER
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: base64

""" + __import__("base64").b64encode("email omega phrase, d\u00e9j\u00e0 vu".encode("latin-1")).decode() + """

--OUTER
Content-Type: application/pdf; name="report.pdf"
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

""" + report_pdf + """
--OUTER--
"""
open(path("note.eml"), "w").write(eml)
mbox = ("From alice@example.org Mon Jun  1 10:00:00 2026\nFrom: alice@example.org\nSubject: first\n\n"
        "mbox alpha phrase\n>From the archives\n\n"
        "From bob@example.org Mon Jun  1 11:00:00 2026\nFrom: bob@example.org\nSubject: second\n"
        "Content-Type: text/html\n\n<html><body><p>mbox omega phrase</p></body></html>\n")
open(path("inbox.mbox"), "w").write(mbox)

# ---- compressed text
txt = "gz alpha phrase\nline two\ngz omega phrase\n"
open(path("README.gz"), "wb").write(gzip.compress(txt.encode()))
open(path("notes.txt.bz2"), "wb").write(bz2.compress(txt.replace("gz", "bz2").encode()))
open(path("notes.txt.xz"), "wb").write(lzma.compress(txt.replace("gz", "xz").encode()))
zst_made = False
if shutil.which("zstd"):
    subprocess.run(["zstd", "-q", "-f", "-o", path("notes.txt.zst")], input=txt.replace("gz", "zst").encode(),
                   check=True)
    zst_made = True
open(path("page.html.gz"), "wb").write(gzip.compress(b"<html><body><script>x()</script><p>htmlgz alpha phrase</p>"
                                                     b"<p>htmlgz omega phrase</p></body></html>"))

# ---- archives (the reader API): a zip and a tar.gz with a folder, a nested zip
inner = io.BytesIO()
with zipfile.ZipFile(inner, "w") as z:
    z.writestr("deep.txt", "nested text")
zwrite("bundle.zip", [("inner/file.txt", "archive member phrase"), ("inner/b.zip", inner.getvalue()),
                      ("top.md", "# top")])
with tarfile.open(path("bundle.tar.gz"), "w:gz") as t:
    data = b"tar member phrase"
    ti = tarfile.TarInfo("docs/file.txt")
    ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))

# ---- larger files, for throughput figures: about 2 MB of text each
filler = ["paragraph %d of the long report, with words about budgets, zebras and coffee shops" % i for i in range(24000)]
zwrite("large.docx", [("[Content_Types].xml", CT), ("word/document.xml",
        docx_xml(para("large alpha phrase") + "".join(para(t) for t in filler) + para("large omega phrase")))])
zwrite("large.epub", [("META-INF/container.xml", container), ("OEBPS/content.opf", opf),
                      ("OEBPS/ch 2.xhtml", xhtml("<p>largeepub alpha phrase</p>" + "".join("<p>%s</p>" % t for t in filler[:12000]))),
                      ("OEBPS/text/ch1.xhtml", xhtml("".join("<p>%s</p>" % t for t in filler[12000:]) + "<p>largeepub omega phrase</p>"))],
       first_stored=("mimetype", "application/epub+zip"))
open(path("large.txt.gz"), "wb").write(gzip.compress(("largegz alpha phrase\n" + "\n".join(filler) + "\nlargegz omega phrase\n").encode()))
open(path("large.rtf"), "w").write("{\\rtf1\\ansi{\\fonttbl{\\f0 Times;}}largertf alpha phrase\\par " + "\\par ".join(filler) + "\\par largertf omega phrase}")

# ---- hostile
good = open(path("budget.docx"), "rb").read()
open(path("truncated.docx"), "wb").write(good[: len(good) // 2])
zwrite("slip.docx", [("word/document.xml", docx_xml(para("x"))), ("../../evil.txt", "escape")])
zwrite("slip.zip", [("ok.txt", "fine"), ("../evil.txt", "escape")])
# an encrypted member: the "encrypted" flag (bit 0) set in its local and central headers
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
    z.writestr("[Content_Types].xml", CT)
    z.writestr("word/document.xml", docx_xml(para("secret words")))
b = bytearray(buf.getvalue())
i = 0
while True:
    j = b.find(b"PK\x03\x04", i)
    if j < 0:
        break
    b[j + 6] |= 1
    i = j + 4
i = 0
while True:
    j = b.find(b"PK\x01\x02", i)
    if j < 0:
        break
    b[j + 8] |= 1
    i = j + 4
open(path("encrypted.docx"), "wb").write(bytes(b))
open(path("encrypted.zip"), "wb").write(bytes(b))
# archives nested three deep: a.zip!/b.zip!/c.zip!/x.txt
c = io.BytesIO()
with zipfile.ZipFile(c, "w") as z:
    z.writestr("x.txt", "too deep")
bb = io.BytesIO()
with zipfile.ZipFile(bb, "w") as z:
    z.writestr("c.zip", c.getvalue())
zwrite("nested.zip", [("b.zip", bb.getvalue())])
# XML bombs: billion laughs in a DOCX, an ODT and an EPUB chapter; an external entity
lol = '<!DOCTYPE lolz [<!ENTITY lol "lol">' + "".join(
    f'<!ENTITY lol{k} "{("&lol%s;" % (k - 1 if k > 1 else "")) * 10}">' for k in range(1, 10)) + "]>"
bomb_doc = f'<?xml version="1.0"?>{lol}<w:document {W}><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>'
zwrite("bomb.docx", [("[Content_Types].xml", CT), ("word/document.xml", bomb_doc)])
xxe = (f'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
       f'<office:document-content {OD}><office:body><office:text><text:p>&x;</text:p></office:text></office:body></office:document-content>')
zwrite("xxe.odt", [("content.xml", xxe)], first_stored=("mimetype", "application/vnd.oasis.opendocument.text"))
zwrite("bomb.epub", [("META-INF/container.xml", container), ("OEBPS/content.opf", opf),
                     ("OEBPS/ch 2.xhtml", '<?xml version="1.0"?>' + lol + '<html><body><p>&lol9;</p></body></html>'),
                     ("OEBPS/text/ch1.xhtml", xhtml("<p>x</p>"))],
       first_stored=("mimetype", "application/epub+zip"))
# a zip bomb: a DOCX whose document.xml inflates to 200 MB of spaces
with zipfile.ZipFile(path("zipbomb.docx"), "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    z.writestr("[Content_Types].xml", CT)
    with z.open("word/document.xml", "w", force_zip64=True) as f:
        f.write(b'<?xml version="1.0"?><w:document ' + W.encode() + b"><w:body>")
        chunk = b" " * (1 << 20)
        for _ in range(200):
            f.write(chunk)
        f.write(b"</w:body></w:document>")
# a gzip bomb: 1 GiB of spaces as 1024 gzip members of 1 MiB each (about 1 MB on disk)
member = gzip.compress(b" " * (1 << 20), compresslevel=9)
with open(path("bomb.txt.gz"), "wb") as f:
    for _ in range(1024):
        f.write(member)
tg = gzip.compress(" ".join("word%d" % i for i in range(20000)).encode())
open(path("truncated.gz"), "wb").write(tg[: len(tg) // 2])
open(path("bad1.rtf"), "w").write("{\\rtf1 " + "{" * 5000 + "deep" + "}" * 5000 + "}")
open(path("bad2.rtf"), "w").write("}{\\rtf1 text}")
open(path("bad3.rtf"), "w").write("{\\rtf1 \\u")  # cut in a control word: text, no crash
open(path("notrtf.rtf"), "w").write("plain words, no rtf header")
print("fixtures in", out, "(zstd:", "made" if zst_made else "not installed: .zst fixture skipped", ")")
