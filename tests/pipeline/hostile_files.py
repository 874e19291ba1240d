#!/usr/bin/env python3
"""tests/pipeline/hostile_files.py — files that cost an extractor more than their size says, for
cli_limits.sh (no dependency beyond the standard library):

  hostile_files.py pdf PATH TEXT...        a plain one-page PDF per TEXT (Helvetica, one line each)
  hostile_files.py bomb PATH MB            a PDF whose one FlateDecode content stream expands to MB
                                           megabytes of text-showing operators (a few hundred KB)
  hostile_files.py attrs PATH N            an HTML <div> with N attributes, then a line of text
"""
import sys
import zlib


def write_pdf(path, streams):
    """streams: one list of byte chunks per page (each page's content, compressed on the fly)."""
    objs = []  # (number, bytes)
    npages = len(streams)
    font = 3 + 2 * npages
    kids = " ".join("%d 0 R" % (3 + 2 * i) for i in range(npages))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(("<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, npages)).encode())
    for i, chunks in enumerate(streams):
        page, content = 3 + 2 * i, 4 + 2 * i
        objs.append(("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> "
                     "/Contents %d 0 R >>" % (font, content)).encode())
        z = zlib.compressobj(9)
        data = b"".join(z.compress(c) for c in chunks) + z.flush()
        objs.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for o in offsets:
        out += b"%010d 00000 n \n" % o
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    with open(path, "wb") as f:
        f.write(out)


def page_of(text):
    esc = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return [b"BT /F1 12 Tf 72 720 Td (" + esc.encode("latin-1") + b") Tj ET\n"]


def bomb(mb):
    # 180 lines 4 units apart down the page (characters under 3 units are "tiny": poppler keeps
    # 50,000 of them at most), then again from the top a little to the right: all of it on the
    # page, and poppler holds every character until the page is done
    line = b"(lorem ipsum dolor sit amet consectetur adipiscing elit sed do) Tj 0 -4 Td\n"
    lines = line * 180
    yield b"BT /F1 4 Tf\n"
    i, total = 0, 0
    while total < mb << 20:
        head = b"1 0 0 1 %.1f %.1f Tm\n" % (20 + (i % 900) * 0.5, 750 - (i // 900 % 3) * 1.0)
        yield head + lines
        total += len(head) + len(lines)
        i += 1
    yield b"ET\n"


def main():
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "pdf":
        write_pdf(path, [page_of(t) for t in sys.argv[3:]])
    elif kind == "bomb":
        write_pdf(path, [bomb(int(sys.argv[3]))])
    elif kind == "attrs":
        n = int(sys.argv[3])
        with open(path, "w") as f:
            f.write("<html><body><div ")
            f.write(" ".join('a%d="x"' % i for i in range(n)))
            f.write(">the attributes are over</div></body></html>\n")
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
