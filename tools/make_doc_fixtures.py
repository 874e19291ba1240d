#!/usr/bin/env python3
"""Write the legacy Word 97-2003 (.doc) test fixtures byte by byte: tools/make_doc_fixtures.py [DIR]
(default tests/fixtures/doc). No tool on this machine writes .doc, so this is an OLE2 compound file
writer ([MS-CFB] version 3: 512-byte sectors, a header with its DIFAT, one FAT sector, a directory
sector, every stream padded to at least 4096 bytes so that none belongs in the mini stream) and a
minimal Word binary ([MS-DOC]): a FIB (FibBase, FibRgW97, FibRgLw97 with ccpText, FibRgFcLcb97
with fcClx/lcbClx), the text, and a Clx (a Prc, then the Pcdt with its PlcPcd piece table) in the
table stream the FIB names.

  word97.doc      8-bit "compressed" pieces (Windows-1252 bytes, [MS-DOC]'s special cases among
                  them), a 0Table stream, two pieces, a field and a two-cell table
  unicode.doc     UTF-16LE pieces (non-ASCII: accents, CJK, a character past the BMP), a 1Table
                  stream, pieces stored out of order, a Prc before the Pcdt, a nested field, a table
  encrypted.doc   word97.doc with fEncrypted set (refused by name)
  stories.doc     every story after the main text (FibRgLw97's ccpFtn, ccpHdd, ccpAtn, ccpEdn,
                  ccpTxbx, ccpHdrTxbx): footnotes, endnotes, a comment, a header and a footer
                  (a PlcfHdd with the six separator stories first, one with text that is not
                  read), text boxes and a header text box (PlcftxbxTxt/PlcfHdrtxbxTxt, their last
                  range not text); a table with empty cells whose row ends are marked by
                  sprmPFTtp in a PapxFkp page (the PlcBtePapx); pieces cut across story ends
  book.xls        an OLE2 file with a Workbook stream and no WordDocument (unsupported format)

Each file is read back with olefile (the tool's check, not the tests': pip's olefile must be
importable, e.g. /work/main/bench/.venv/bin/python) and its text checked by the reader's rules.
The outputs are small and committed; the tests read them, they do not run this script. Run with
no argument, it also writes the fuzz seeds fuzz/corpus/doc/stories and streams-stories.
"""
import os
import struct
import sys

SECT = 512
FREE, END, FATSECT, NOSTREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF


def ole2(streams):
    """streams: [(name, bytes)] -> the bytes of a compound file holding them under the root."""
    streams = [(n, d + b"\0" * (max(4096, len(d)) - len(d))) for n, d in streams]  # no mini stream
    # sector 0: the FAT; sector 1: the directory; then each stream's sectors in order
    chains, nxt = [], 2
    for _, d in streams:
        n = (len(d) + SECT - 1) // SECT
        chains.append(list(range(nxt, nxt + n)))
        nxt += n
    assert nxt <= SECT // 4, "one FAT sector is enough for these fixtures"
    fat = [FREE] * (SECT // 4)
    fat[0], fat[1] = FATSECT, END
    for c in chains:
        for a, b in zip(c, c[1:] + [END]):
            fat[a] = b

    def entry(name, typ, left, right, child, start, size):
        u = name.encode("utf-16-le") + b"\0\0" if name else b""
        return (u.ljust(64, b"\0") + struct.pack("<HBBIII", len(u), typ, 1, left, right, child) + b"\0" * 16 +
                struct.pack("<IQQIII", 0, 0, 0, start, size, 0))

    # the directory's red-black tree (all black): names ordered by length, then upper-cased;
    # the root's child is the middle one, the others its left and right siblings in order
    order = sorted(range(len(streams)), key=lambda i: (len(streams[i][0]), streams[i][0].upper()))
    mid = len(order) // 2
    ids = {i: k + 1 for k, i in enumerate(order)}  # directory ids: 0 is the root
    ents = [entry("Root Entry", 5, NOSTREAM, NOSTREAM, ids[order[mid]], END, 0)]
    for k, i in enumerate(order):
        left = ids[order[k - 1]] if k == mid and k > 0 else NOSTREAM
        right = ids[order[k + 1]] if k == mid and k + 1 < len(order) else NOSTREAM
        if k != mid and abs(k - mid) > 1:
            raise ValueError("at most three streams")
        n, d = streams[i]
        ents.append(entry(n, 2, left, right, NOSTREAM, chains[i][0], len(d)))
    directory = b"".join(ents)
    directory += entry("", 0, NOSTREAM, NOSTREAM, NOSTREAM, 0, 0) * ((SECT - len(directory)) // 128)
    assert len(directory) == SECT
    header = (bytes.fromhex("D0CF11E0A1B11AE1") + b"\0" * 16 +
              struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6) + b"\0" * 6 +
              struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, END, 0, END, 0) +
              struct.pack("<I", 0) + struct.pack("<I", FREE) * 108)
    assert len(header) == SECT
    body = b"".join(d.ljust(len(c) * SECT, b"\0") for (_, d), c in zip(streams, chains))
    return header + struct.pack("<128I", *fat) + directory + body


# [MS-DOC] 2.4.1: the bytes of a compressed piece that are not their own code point
SPECIAL = {0x82: 0x201A, 0x83: 0x0192, 0x84: 0x201E, 0x85: 0x2026, 0x86: 0x2020, 0x87: 0x2021, 0x88: 0x02C6,
           0x89: 0x2030, 0x8A: 0x0160, 0x8B: 0x2039, 0x8C: 0x0152, 0x91: 0x2018, 0x92: 0x2019, 0x93: 0x201C,
           0x94: 0x201D, 0x95: 0x2022, 0x96: 0x2013, 0x97: 0x2014, 0x98: 0x02DC, 0x99: 0x2122, 0x9A: 0x0161,
           0x9B: 0x203A, 0x9C: 0x0153, 0x9F: 0x0178}
INV = {chr(v): k for k, v in SPECIAL.items()}


def compress(text):
    return bytes(INV[ch] if ch in INV else ord(ch) for ch in text)


def word(pieces, text_at=0x800, one_table=False, prc=False, encrypted=False):
    """pieces: [(text, compressed)] in CP order; stored in the stream in reverse order when
    one_table (so a piece's bytes are not where the previous one ended)."""
    ccp = sum(len(t.encode("utf-16-le")) // 2 for t, _ in pieces)
    flags = 0x1000 | (0x0200 if one_table else 0) | (0x0100 if encrypted else 0)  # fExtChar
    fib = bytearray(struct.pack("<HHHHHH", 0xA5EC, 0x00C1, 0, 0x0409, 0, flags) + b"\0" * 20)
    fib[0x0C:0x0E] = struct.pack("<H", 0x00BF)  # nFibBack
    assert len(fib) == 32
    fib += struct.pack("<H", 14) + b"\0" * 28        # csw, FibRgW97
    lw = [0] * 22
    fib += struct.pack("<H", 22)
    lw_at = len(fib)
    fib += b"\0" * 88                                 # FibRgLw97 (cbMac, ccpText filled below)
    fib += struct.pack("<H", 93)                      # cbRgFcLcb: FibRgFcLcb97
    fclcb_at = len(fib)
    fib += b"\0" * (93 * 8) + struct.pack("<H", 0)    # the pairs; cswNew 0
    assert len(fib) < text_at
    stream = bytearray(fib.ljust(text_at, b"\0"))
    order = list(reversed(range(len(pieces)))) if one_table else list(range(len(pieces)))
    fcs = {}
    for i in order:
        t, comp = pieces[i]
        at = len(stream)
        if comp:
            stream += compress(t)
            fcs[i] = (at * 2) | 0x40000000
        else:
            stream += t.encode("utf-16-le")
            fcs[i] = at
        stream += b"\0" * 16  # a gap between pieces
    cps = [0]
    for t, _ in pieces:
        cps.append(cps[-1] + len(t.encode("utf-16-le")) // 2)
    assert cps[-1] == ccp
    plc = b"".join(struct.pack("<I", c) for c in cps) + b"".join(
        struct.pack("<HIH", 0, fcs[i], 0) for i in range(len(pieces)))
    clx = b""
    if prc:
        grpprl = b"\x03\x24\x01\x00"  # a sprm and its operand: skipped by the reader
        clx += b"\x01" + struct.pack("<h", len(grpprl)) + grpprl
    clx += b"\x02" + struct.pack("<I", len(plc)) + plc
    table = bytearray(b"\0" * 0x100) + clx  # the Clx not at offset 0
    lw[0], lw[3] = len(stream), ccp
    stream[lw_at:lw_at + 88] = struct.pack("<22I", *lw)
    stream[fclcb_at + 33 * 8:fclcb_at + 34 * 8] = struct.pack("<II", 0x100, len(clx))
    return ole2([("WordDocument", bytes(stream)), ("1Table" if one_table else "0Table", bytes(table))])


ROW = "\ue000"  # in a fixture's text: a table row's end mark (0x07 with sprmPFTtp in its paragraph)


def papx_page(runs):
    """runs: [(fc_from, fc_to, kind)], ascending and contiguous; kind None (no properties), "cell"
    (sprmPFInTable) or "row" (sprmPFInTable, a sprmTDefTable, sprmPFTtp) -> one 512-byte PapxFkp."""
    merged = []
    for a, b, k in runs:  # neighbours with the same properties are one run
        if merged and merged[-1][2] == k and merged[-1][1] == a:
            merged[-1] = (merged[-1][0], b, k)
        else:
            merged.append((a, b, k))
    crun = len(merged)
    page = bytearray(512)
    struct.pack_into(f"<{crun + 1}I", page, 0, *([a for a, _, _ in merged] + [merged[-1][1]]))
    istd = b"\0\0"
    cell = istd + b"\x16\x24\x01"                                   # 5 bytes: cb 3 (2*3-1)
    # a sprmTDefTable before sprmPFTtp, as Word writes it: its operand's size is 16-bit (257: more
    # than a byte holds, as a table of a dozen columns has); 268 bytes in all: cb 0, then 134
    row = istd + b"\x16\x24\x01" + b"\x08\xd6\x01\x01" + b"\0" * 256 + b"\x17\x24\x01"
    recs = {"cell": bytes([3]) + cell, "row": b"\0" + bytes([len(row) // 2]) + row}
    at, where = 510, {}
    for k in ("cell", "row"):
        at = (at - len(recs[k])) & ~1
        page[at:at + len(recs[k])] = recs[k]
        where[k] = at // 2
    assert 4 * (crun + 1) + 13 * crun <= at, "one PapxFkp page is enough for these fixtures"
    for i, (_, _, k) in enumerate(merged):
        page[4 * (crun + 1) + 13 * i] = where[k] if k else 0
    page[511] = crun
    return bytes(page)


def word_stories(main, ftn="", hdd=None, atn="", edn="", txbx=None, hdrtxbx=None, cuts=(), one_table=False,
                 raw=False):
    """A document with every story: hdd a list of header stories (the six separators first, each
    with its guard paragraph mark), txbx/hdrtxbx lists of text box ranges (the last one is not
    text). The CP text is cut into pieces at `cuts` (CPs, not at story ends), pieces alternately
    8-bit and UTF-16; a PapxFkp page marks each row end (ROW) and cell."""
    hdd, txbx, hdrtxbx = hdd or [], txbx or [], hdrtxbx or []
    hdd_text = "".join(hdd) + ("\r" if hdd else "")  # the header document ends with one more mark
    stories = [main, ftn, hdd_text, atn, edn, "".join(txbx), "".join(hdrtxbx)]
    text = "".join(stories) + ("\r" if any(stories[1:]) else "")  # [MS-DOC] 2.3: one mark after all
    ccps = [len(t) for t in stories]  # the fixtures' stories hold no character past the BMP
    flags = 0x1000 | (0x0200 if one_table else 0)
    fib = bytearray(struct.pack("<HHHHHH", 0xA5EC, 0x00C1, 0, 0x0409, 0, flags) + b"\0" * 20)
    fib[0x0C:0x0E] = struct.pack("<H", 0x00BF)
    fib += struct.pack("<H", 14) + b"\0" * 28 + struct.pack("<H", 22)
    lw_at = len(fib)
    fib += b"\0" * 88 + struct.pack("<H", 93)
    fclcb_at = len(fib)
    fib += b"\0" * (93 * 8) + struct.pack("<H", 0)
    stream = bytearray(fib.ljust(0x800, b"\0"))
    bounds = [0] + sorted(cuts) + [len(text)]
    fcs, ends = [], []  # ends: (the byte after a paragraph's mark, its kind)
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        comp = i % 2 == 0 and all(ord(ch) < 128 or 0xA0 <= ord(ch) < 256 or ch == ROW for ch in text[a:b])
        at = len(stream)
        fcs.append(at * 2 | 0x40000000 if comp else at)
        width = 1 if comp else 2
        for j, ch in enumerate(text[a:b]):
            c = 7 if ch == ROW else ord(ch)
            stream += bytes([c]) if comp else struct.pack("<H", c)
            if ch in "\r\x07" + ROW:
                ends.append((at + (j + 1) * width, "row" if ch == ROW else "cell" if ch == "\x07" else None))
        stream += b"\0" * 16  # a gap between pieces: it belongs to the next paragraph's run
    runs = [(ends[k - 1][0] if k else 0x800, e, kind) for k, (e, kind) in enumerate(ends)]
    stream += b"\0" * (-len(stream) % 512)
    pn = len(stream) // 512
    stream += papx_page(runs)
    plc = b"".join(struct.pack("<I", c) for c in bounds) + b"".join(struct.pack("<HIH", 0, f, 0) for f in fcs)
    clx = b"\x02" + struct.pack("<I", len(plc)) + plc
    table = bytearray(b"\0" * 0x100) + clx
    pairs = {33: (0x100, len(clx))}

    def put(pair, data):
        table.extend(b"\0" * (-len(table) % 4))
        pairs[pair] = (len(table), len(data))
        table.extend(data)

    put(13, struct.pack("<III", runs[0][0], runs[-1][1], pn))  # PlcBtePapx: one page
    if hdd:
        cps = [0]
        for st in hdd:
            cps.append(cps[-1] + len(st))
        put(11, struct.pack(f"<{len(cps) + 1}I", *cps, cps[-1] + 1))  # last CP: undefined
    for pair, ranges in ((56, txbx), (58, hdrtxbx)):
        if ranges:
            cps = [0]
            for r in ranges:
                cps.append(cps[-1] + len(r))
            put(pair, struct.pack(f"<{len(cps)}I", *cps) + b"\0" * (22 * len(ranges)))
    lw = [0] * 22
    lw[0] = len(stream)
    lw[3], lw[4], lw[5], lw[7], lw[8], lw[9], lw[10] = ccps
    stream[lw_at:lw_at + 88] = struct.pack("<22I", *lw)
    for pair, (fc, lcb) in pairs.items():
        stream[fclcb_at + pair * 8:fclcb_at + pair * 8 + 8] = struct.pack("<II", fc, lcb)
    streams = [("WordDocument", bytes(stream)), ("1Table" if one_table else "0Table", bytes(table))]
    return streams if raw else ole2(streams)


def fuzz_seeds(root):
    """fuzz/corpus/doc seeds for fuzz_doc.c: first byte odd, a whole .doc; even, a cut point (two
    bytes, times 4) and the WordDocument stream then the table stream."""
    (_, wd), (_, tbl) = word_stories(**STORIES, cuts=(30, 75, 120, 170), raw=True)
    wd = wd.ljust(-(-len(wd) // 4) * 4, b"\0")
    seeds = {"stories": b"\x01" + word_stories(**STORIES, cuts=(30, 75, 120, 170)),
             "streams-stories": b"\x00" + struct.pack("<H", len(wd) // 4) + wd + tbl}
    for name, data in seeds.items():
        with open(os.path.join(root, "fuzz", "corpus", "doc", name), "wb") as f:
            f.write(data)


# stories.doc: a footnote and an endnote reference (0x02) and a comment's (0x05) in the main text,
# a table with empty cells, every other story; the separators and the text boxes' last range hold
# text that must not be read
STORIES = dict(
    main=("stories alpha phrase\x02 with notes\x02.\r"
          "a1\x07\x07c1\x07" + ROW + "\x07b2\x07\x07" + ROW +
          "stories omega phrase\x01\x05.\r"),
    ftn="\x02 footnote one text.\r\x02 footnote two \u00e9t\u00e9.\r\r",
    edn="\x02 endnote text here.\r\r",
    atn="\x05 comment text here.\r\r",
    hdd=["\x03\r", "\x04\r", "(continued notice)\r", "\x03\r", "\x04\r", "",  # separators
         "", "header words here\r\r", "", "footer \x13 PAGE \x141\x15 words\r\r", "", ""],
    txbx=["text box words.\r", "not text: the last range\r"],
    hdrtxbx=["header box words.\r", "\r"],
)


# The fixtures' text (CP order). \x13 code \x14 result \x15 is a field; \x07 ends a cell, and a
# second \x07 right after a row's last cell ends the row; \r ends a paragraph.
WORD97 = [
    ("doc alpha phrase in a Word 97 file.\r"
     "Caf\u00e9 \u201cquoted\u201d \u2013 \u0160koda \x13 HYPERLINK \"http://example.org/\" \x14example link\x15 after.\r", True),
    ("name\x07value\x07\x07cell one\x07cell two\x07\x07"
     "doc omega phrase\x01\x08 ends\u00a0here.\r", True),
]
UNICODE = [
    ("unicode alpha phrase: Gr\u00fc\u00dfe, na\u00efve caf\u00e9 \u2014 \u65e5\u672c\u8a9e \U0001F600.\r", False),
    ("\x13 PAGE \x13 NESTED \x14\x15\x14field result\x15 kept\r"
     "\u03b1\u03b2\u03b3\x07\u0436\u0437\x07\x07unicode omega phrase\x0bsecond line\r", False),
]
def main():
    root = os.path.join(os.path.dirname(__file__), "..")
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures", "doc")
    if len(sys.argv) == 1:
        fuzz_seeds(root)
    os.makedirs(out, exist_ok=True)
    files = {
        "word97.doc": word(WORD97),
        "unicode.doc": word(UNICODE, one_table=True, prc=True),
        "encrypted.doc": word(WORD97, encrypted=True),
        "stories.doc": word_stories(**STORIES, cuts=(30, 75, 120, 170)),
        "book.xls": ole2([("Workbook", b"\x09\x08\x10\x00\x00\x06\x05\x00" + b"\0" * 100)]),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    try:
        import olefile
    except ImportError:
        print("make_doc_fixtures: written, not verified (no olefile: pip install olefile)", file=sys.stderr)
        return 0
    for name, data in files.items():
        path = os.path.join(out, name)
        assert olefile.isOleFile(path), name
        with olefile.OleFileIO(path) as ole:
            listed = sorted("/".join(e) for e in ole.listdir())
            if name.endswith(".doc"):
                tbl = "1Table" if name == "unicode.doc" else "0Table"
                assert listed == sorted(["WordDocument", tbl]), (name, listed)
                wd = ole.openstream("WordDocument").read()
                assert struct.unpack_from("<H", wd, 0)[0] == 0xA5EC
                assert ole.get_size("WordDocument") >= 4096
            else:
                assert listed == ["Workbook"], listed
        print(f"{name}: {len(data)} bytes, olefile reads {listed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
