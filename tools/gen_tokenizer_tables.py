#!/usr/bin/env python3
"""Generate model/tokenizer_unicode.h: the character classes that Hugging Face `tokenizers`
uses in BertNormalizer / BertPreTokenizer, measured from the real package code point by code point.

Why tables and not utf8proc's categories: `tokenizers` takes "is other", "is non-spacing mark" and
"is punctuation" from a Rust crate frozen at an old Unicode version, while utf8proc follows the
current one; using utf8proc's categories would differ on several hundred code points (new Cf
characters that HF keeps, new Mn marks that HF does not strip, new punctuation that HF does not
split). NFD and case mapping still come from utf8proc at run time; this script checks that they
agree with HF for every code point and records the few lowercase mappings where they do not.

Usage: python3 tools/gen_tokenizer_tables.py > model/tokenizer_unicode.h
Needs: pip install tokenizers; libutf8proc (Debian libutf8proc2) for the cross-check.
"""
import ctypes
import sys
import unicodedata

import tokenizers
from tokenizers import normalizers, pre_tokenizers

u8 = ctypes.CDLL("libutf8proc.so.2")
u8.utf8proc_tolower.restype = ctypes.c_int32
u8.utf8proc_tolower.argtypes = [ctypes.c_int32]
u8.utf8proc_decompose_char.restype = ctypes.c_ssize_t
u8.utf8proc_decompose_char.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), ctypes.c_ssize_t,
                                       ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
u8.utf8proc_unicode_version.restype = ctypes.c_char_p
UTF8PROC_DECOMPOSE = 1 << 4  # utf8proc.h
u8buf = (ctypes.c_int32 * 32)()
u8last = ctypes.c_int(0)


def u8_nfd_char(cp):
    n = u8.utf8proc_decompose_char(cp, u8buf, 32, UTF8PROC_DECOMPOSE, ctypes.byref(u8last))
    assert 0 < n <= 32
    return [u8buf[i] for i in range(n)]


CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
       (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]

clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
lower = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=True)
chin = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)
pre = pre_tokenizers.BertPreTokenizer()

drop, space, ws, punct, mn, lower_over = [], [], [], [], [], []
problems = []
for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    c = chr(cp)
    a = clean.normalize_str(c)
    if a == "":
        drop.append(cp)
    elif a == " " and c != " ":
        space.append(cp)
    elif a != c:
        problems.append("clean_text maps U+%04X to %r" % (cp, a))
    pieces = [p for p, _ in pre.pre_tokenize_str("a" + c + "a")]
    if pieces == ["a", "a"]:
        ws.append(cp)
    elif pieces == ["a", c, "a"]:
        punct.append(cp)
    elif pieces != ["a" + c + "a"]:
        problems.append("pre-tokenizer splits a U+%04X a as %r" % (cp, pieces))
    b = strip.normalize_str(c)
    if b == "":
        mn.append(cp)
    l = lower.normalize_str(c)
    if cp != 0x130 and [ord(x) for x in l] != [u8.utf8proc_tolower(cp)]:
        if len(l) != 1:
            problems.append("lowercase of U+%04X is %d characters" % (cp, len(l)))
        lower_over.append((cp, ord(l[0])))
    d = chin.normalize_str(c)
    is_cjk = any(lo <= cp <= hi for lo, hi in CJK)
    if (d == " " + c + " ") != is_cjk:
        problems.append("CJK range mismatch at U+%04X" % cp)

if lower.normalize_str("\u0130") != "i\u0307":
    problems.append("U+0130 does not lowercase to i + U+0307")
# The C code hard-codes the space map and the CJK ranges; check what it assumes.
if sorted(space) != sorted({9, 10, 13} | (set(ws) - set(drop) - {0x20})):
    problems.append("clean_text space map is not {tab, LF, CR} + (whitespace - dropped)")

# NFD from utf8proc, less HF's Mn, must give what HF's strip_accents gives.
mnset = set(mn)
nfd_keep = []
for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    want = strip.normalize_str(chr(cp))
    got = "".join(chr(x) for x in u8_nfd_char(cp) if x not in mnset)
    if cp == 0:
        continue
    if want != got and want == chr(cp):
        nfd_keep.append(cp)  # decomposed by utf8proc's newer Unicode, not by HF
    elif want != got:
        problems.append("NFD+strip of U+%04X: HF %r, utf8proc %r" % (cp, want, got))

if problems:
    sys.stderr.write("\n".join(problems[:50]) + "\n%d problems\n" % len(problems))
    sys.exit(1)


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def emit(name, cps, comment):
    r = ranges(cps)
    print("/* %s (%d code points) */" % (comment, len(cps)))
    print("static const modattn__cp_range %s[%d] = {" % (name, len(r)))
    line = "   "
    for lo, hi in r:
        item = " {0x%X, 0x%X}," % (lo, hi)
        if len(line) + len(item) > 100:
            print(line)
            line = "   "
        line += item
    print(line)
    print("};\n")


print("/* model/tokenizer_unicode.h — GENERATED by tools/gen_tokenizer_tables.py; do not edit.")
print(" * Character classes of Hugging Face tokenizers %s (BertNormalizer, BertPreTokenizer)," % tokenizers.__version__)
print(" * measured code point by code point; NFD and lowercase cross-checked against utf8proc (Unicode %s). */"
      % u8.utf8proc_unicode_version().decode())
print("#ifndef MODATTN_TOKENIZER_UNICODE_H\n#define MODATTN_TOKENIZER_UNICODE_H\n")
print("#include <stdint.h>\n")
print("typedef struct modattn__cp_range { uint32_t lo, hi; } modattn__cp_range;")
print("typedef struct modattn__cp_map { uint32_t from, to; } modattn__cp_map;\n")
emit("modattn__tok_drop", drop, "clean_text removes these (NUL, U+FFFD, and what HF calls Cc/Cf/Co/Cs)")
emit("modattn__tok_space", space, "clean_text turns these into U+0020")
emit("modattn__tok_white", ws, "whitespace for the pre-tokenizer (Rust char::is_whitespace)")
emit("modattn__tok_punct", punct, "punctuation for the pre-tokenizer (ASCII punctuation + HF's P* categories)")
emit("modattn__tok_mn", mn, "non-spacing marks removed by strip_accents after NFD (HF's Mn)")
emit("modattn__tok_nfd_keep", nfd_keep, "decomposed by utf8proc but not by HF's older NFD tables")
print("/* simple lowercase mappings where HF differs from utf8proc_tolower (U+0130 is handled in code) */")
print("static const modattn__cp_map modattn__tok_lower[%d] = {" % max(1, len(lower_over)))
for f, t in lower_over:
    print("    {0x%X, 0x%X}," % (f, t))
if not lower_over:
    print("    {0, 0},")
print("};")
print("#define MODATTN__TOK_LOWER_COUNT %d\n" % len(lower_over))
print("#endif")
