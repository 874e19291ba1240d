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
  book.xls        an OLE2 file with a Workbook stream and no WordDocument (unsupported format)

Each file is read back with olefile (the tool's check, not the tests': pip's olefile must be
importable, e.g. /work/main/bench/.venv/bin/python) and its text checked by the reader's rules.
The outputs are small and committed; the tests read them, they do not run this script.
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
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "doc")
    os.makedirs(out, exist_ok=True)
    files = {
        "word97.doc": word(WORD97),
        "unicode.doc": word(UNICODE, one_table=True, prc=True),
        "encrypted.doc": word(WORD97, encrypted=True),
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
