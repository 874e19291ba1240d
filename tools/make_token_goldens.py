#!/usr/bin/env python3
"""Write the tokenizer golden fixtures from the real Hugging Face `tokenizers` package.

    python3 tools/make_token_goldens.py [MODEL_ROOT]      (MODEL_ROOT defaults to .models)

Writes
  tests/fixtures/tokens_minilm.jsonl    all-MiniLM-L6-v2's tokenizer.json as shipped, truncation at
                                        256 ids including [CLS]/[SEP] (sentence-transformers'
                                        max_seq_length), ids and byte offsets for every input
  tests/fixtures/tokens_variants.jsonl  the same vocabulary under other BertNormalizer flags,
                                        added tokens with single_word/lstrip/rstrip/normalized,
                                        BertProcessing, and small truncation budgets
  tests/fixtures/tokens_tiny.jsonl      tests/fixtures/tokenizer_tiny.json (tools/make_tiny_tokenizer.py),
                                        no model needed: max_input_chars_per_word 20, added tokens
  tests/fixtures/tokens_bge.jsonl       only if MODEL_ROOT/bge-small-en-v1.5/tokenizer.json exists

Each line: {"text": str} or {"b64": raw bytes (for invalid UTF-8; HF side decodes them with
errors="replace")}, "ids": [...], "offsets": [[start, end], ...] in bytes of the input (for invalid
UTF-8 too: each U+FFFD stands for the bytes Python's decoder replaced), "max": the id budget, and for variants "variant": the name of the edit made to
tokenizer.json (the C test makes the same edit, see VARIANTS below and tests/model/).

Needs: pip install tokenizers (no torch). The package version is written to the first line.
"""
import base64
import codecs
import copy
import json
import os
import random
import sys
import tempfile
import unicodedata

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".models")
OUT = os.path.join(ROOT, "tests", "fixtures")
MAX = 256

# ----------------------------------------------------------------------------- inputs

HAND = [
    "", " ", "   ", "\t\n\r ", "\u00a0\u2003\u3000", "\u200b", "\u200b\u200c\u200d\ufeff", "\x00", "\x00abc\x00",
    "Hello, world!", "hello world", "HELLO WORLD", "The quick brown fox jumps over the lazy dog.",
    "This is a test of the emergency broadcast system.", "I can't believe it's not butter!",
    "sentence-transformers maps sentences to a 384-dimensional dense vector space.",
    "What's the weather like in São Paulo today?", "naïve café résumé coöperate façade jalapeño",
    "Ångström, Øresund, Æsir, œuvre, straße, İstanbul, ǅemal", "ÀÁÂÃÄÅ àáâãäå ÈÉÊË èéêë ÌÍÎÏ ìíîï",
    "Ⅷ ⅷ ① ⑴ ㍱ ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ", "ﬁnance ﬂow oﬃce", "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ！ １２３",
    "半角ｶﾀｶﾅ and ＡＢＣ", "中文分词测试", "我爱北京天安门。", "日本語のテキストです。カタカナとひらがな。",
    "東京は日本の首都です", "한국어 텍스트입니다. 안녕하세요!", "한글과 漢字 섞어 쓰기",
    "مرحبا بالعالم", "العربية: ٠١٢٣٤٥٦٧٨٩ ،؛؟", "שלום עולם", "עִבְרִית עם ניקוד",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่าง", "नमस्ते दुनिया", "हिन्दी भाषा में परीक्षण।",
    "Привет, мир! Ёлка ёжик", "Γειά σου Κόσμε! ΆΈΉΊΌΎΏ ΐΰ ς σ Σ", "Ελληνικά: ΟΔΥΣΣΕΥΣ",
    "Tiếng Việt có dấu: Hà Nội, Thành phố Hồ Chí Minh", "ქართული ენა", "Հայերեն լեզու", "አማርኛ ቋንቋ",
    "বাংলা ভাষা", "தமிழ் மொழி", "తెలుగు", "ಕನ್ನಡ", "മലയാളം", "ગુજરાતી", "ਪੰਜਾਬੀ", "සිංහල", "ພາສາລາວ",
    "ខ្មែរ", "မြန်မာ", "བོད་ཡིག", "ᠮᠣᠩᠭᠣᠯ", "ᏣᎳᎩ", "ᐃᓄᒃᑎᑐᑦ", "ꦧꦱꦗꦮ",
    "emoji 😀😃😄 test", "👍🏽 👍🏿 👋🏻", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇫🇷🇩🇪🇯🇵", "❤️ ❤ ♥",
    "I ❤️ NY", "😀" * 30, "1️⃣ 2️⃣ #️⃣", "🧑🏽‍💻 coding", "🫠🫡🫢 new emoji",
    "e\u0301 vs \u00e9", "a\u0300\u0301\u0302\u0303\u0304\u0305 stack", "Z\u0351\u0352\u0357\u0358alg\u0300o\u0301",
    "n\u0303 \u00f1 N\u0303 \u00d1", "\u1e9b\u0323", "q\u0307\u0323 q\u0323\u0307", "\u0344 \u0340 \u0341",
    "Hangul jamo \u1100\u1161\u11a8", "\uac00\ub098\ub2e4",
    "control\x01chars\x02here\x1f and \x7f del \x80\x85\x9f c1", "tab\tseparated\tvalues", "line1\nline2\r\nline3",
    "form\x0cfeed and vertical\x0btab", "soft\u00adhyphen", "zero\u200bwidth\u200cjoiner\u200dtest",
    "bidi \u202a\u202b\u202c\u202d\u202e marks \u2066\u2067\u2068\u2069", "word\u2060joiner", "mongolian\u180evs",
    "private \ue000\uf8ff use", "replacement \ufffd char", "noncharacter \ufdd0 \uffff",
    "line\u2028separator\u2029paragraph", "ogham\u1680space", "narrow\u202fnbsp\u205fmath",
    "https://www.example.com/path/to/page?query=1&b=two#frag", "http://localhost:8080/api/v1/users/42",
    "ftp://files.example.org/pub/file.tar.gz", "mailto:someone@example.com",
    "contact: john.doe+tag@mail.example.co.uk", "user_name@sub-domain.example.io",
    "def f(x):\n    return x ** 2 + 1  # square", "int main(void) { printf(\"%d\\n\", 42); return 0; }",
    "SELECT * FROM users WHERE id = 1 AND name LIKE '%bob%';", "<html><body><p class=\"x\">Hi</p></body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "x = a[i] + b[j] * c[k] / d[l] - e[m] % f[n];",
    "git commit -m \"Fix off-by-one in tokenizer (#123)\"", "$ ls -la /usr/local/bin | grep -v '^d'",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_CASE",
    "3.14159 2.71828 1,000,000 1.000.000,00 -42 +7 1e-12 0x1F 0b1010 1/2 50% $100 €200 £300 ¥400",
    "Phone: +1 (555) 123-4567", "Date: 2024-01-15T10:30:00Z", "Version 1.2.3-beta.4+build.567",
    "!!!???...,,,;;;:::", "---___===+++***&&&^^^%%%$$$###@@@", "«quotes» „German“ “curly” ‘single’ ‹›",
    "—em dash–en dash‐hyphen‑nb hyphen", "…ellipsis… ¿Qué? ¡Hola! ‽", "§¶†‡•‰′″‴※", "©®™℠℗",
    "°C °F µm Ω ℃ ℉ K Å", "→←↑↓↔ ⇒⇐ ∀∃∅∈∉∑∏√∞≈≠≤≥", "½ ¼ ¾ ⅓ ⅔ ⅛", "x² y³ H₂O CO₂ E=mc²",
    "ǅ ǈ ǋ ǲ Titlecase", "ß ẞ ﬅ", "ŉ ǰ ΐ", "Kelvin K sign and Angstrom Å sign", "Ωhm Ω",
    "dotless ı and dotted İ i̇", "final sigma ΟΔΟΣ οδος", "ǄǅǆǇǈǉ", "ꙮ multiocular o", "ⓐⓑⓒ ⒜⒝⒞",
    "𝐀𝐁𝐂 𝒜ℬ𝒞 𝔄𝔅ℭ 𝕬𝕭𝕮 𝖠𝖡𝖢", "𝟎𝟏𝟐𝟑", "ａｂｃ　ｄｅｆ", "ｈｔｔｐｓ：／／ｅｘａｍｐｌｅ．ｃｏｍ",
    "𠀀𠀁 𪜀 𫝀 𫠠 𬺰 𮯠 𰀀 CJK extensions", "\U0002B820\U0002B91F boundary", "\U0002B81F\U0002B920",
    "\u3400\u4dbf\u4e00\u9fff\uf900\ufaff", "\U0002f800\U0002fa1f", "〇〆々〻", "ㄅㄆㄇ bopomofo", "ｱｲｳ ｧｨｩ",
    "兀 (U+5140) 豈 (U+F900) 﨎 (U+FA0E)", "⺀⺁ radicals ⼀⼁", "㐀㐁 ext-A",
    "supercalifragilisticexpialidocious", "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 99, "a" * 100, "a" * 101, "b" * 200, "é" * 100, "é" * 101, "e\u0301" * 100, "e\u0301" * 101,
    "x" * 50 + "-" + "y" * 60, "中" * 300, "ab" * 60 + " tail", "ａ" * 101, "İ" * 100,
    "word " * 300, "hello world " * 150, "a " * 260, "a " * 253, "a " * 254, "a " * 255,
    "unaffable unbelievable tokenization embeddings transformer", "The rain in Spain falls mainly on the plain.",
    "[CLS] hello [SEP]", "[MASK]", "the [MASK] sat on the mat", "[mask] lower", "[UNK] [PAD] [CLS][SEP]",
    "x[MASK]y", "[[MASK]]", "[MASK" , "MASK]", "[ MASK ]", "[MASK][MASK][MASK]", "##ing ##s", "## #",
    "[CLS]" * 300,
    "'quoted' \"double\" `backtick`", "(parens) [brackets] {braces} <angles>", "a/b\\c|d", "~tilde ^caret",
    "mixed English и русский и 中文 и العربية", "Kölner Dom und Münchner Frauenkirche", "ÉCOLE ÉLÉMENTAIRE",
    "Ça va? Ça va bien.", "Dvořák Janáček Smetana", "Łódź Gdańsk Kraków", "Þingvellir Ísland", "Ñandú pingüino",
    "İzmir Iğdır Şanlıurfa", "Cluj-Napoca Brașov Timișoara", "Zürich Genève Lugano", "Ærøskøbing",
    "Tokyo 東京 Tōkyō", "Beijing 北京 Běijīng", "Seoul 서울 Sŏul",
    "\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064e\u0647\u0650", "\u05d1\u05bc\u05b0\u05e8\u05b5\u05d0\u05e9\u05b4\u05c1\u05d9\u05ea",
    "\u0915\u094d\u0937 \u0924\u094d\u0930 \u091c\u094d\u091e", "\u0e01\u0e34\u0e19\u0e02\u0e49\u0e32\u0e27",
    "RT @user: Check this out! #NLP #AI https://t.co/abc123", "LOL!!! OMG :) :-( ;) <3 xD",
    "   leading and trailing spaces   ", "multiple     internal      spaces", "\n\n\nnewlines\n\n\n",
    "a\u3000b\u3000c", "a\u00a0b\u00a0c", "a\u2009b\u200ac",
    "A.B.C. U.S.A. e.g. i.e. etc.", "Mr. Smith went to Washington D.C. at 5 p.m.", "don't won't shan't y'all'd've",
    "rock'n'roll", "O'Neill McDonald", "twenty-one forty-two", "state-of-the-art", "e-mail vs email",
]

SCRIPTS = [
    "hello", "world", "naïve", "Straße", "中文", "日本", "한국", "مرحبا", "שלום", "สวัสดี", "नमस्ते", "Привет",
    "Γειά", "😀", "👍🏽", "123", "3.14", "!!", "...", "—", "«»", "e\u0301", "\u200b", "\t", "\u00a0", "ﬁ", "Ｗ",
    "[MASK]", "http://x.io/a?b=c", "a@b.com", "x_y", "CamelCase", "İ", "ß", "Ω", "Å", "\x07", "\ufffd",
]


def generated(rng, n):
    out = []
    for _ in range(n):
        k = rng.randint(1, 25)
        seps = [" ", "", " ", "  ", "\n", "-", ",", " "]
        out.append("".join(rng.choice(SCRIPTS) + rng.choice(seps) for _ in range(k)))
    return out


def random_unicode(rng, n):
    """Random code points from the ranges where the pipeline has something to decide."""
    pools = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0xDFF),
             (0xE00, 0xEFF), (0x1100, 0x11FF), (0x1E00, 0x1FFF), (0x2000, 0x206F), (0x2070, 0x2BFF),
             (0x2E00, 0x2E7F), (0x3000, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
             (0xF900, 0xFAFF), (0xFB00, 0xFDFF), (0xFE00, 0xFFFF), (0x10000, 0x1FFFF), (0x1F300, 0x1FAFF),
             (0x20000, 0x2FFFF), (0xE0000, 0xE01EF)]
    out = []
    for _ in range(n):
        s = []
        for _ in range(rng.randint(1, 60)):
            lo, hi = rng.choice(pools)
            cp = rng.randint(lo, hi)
            if 0xD800 <= cp <= 0xDFFF:
                continue
            s.append(chr(cp))
            if rng.random() < 0.2:
                s.append(" ")
        out.append("".join(s))
    return out


def invalid_utf8(rng):
    fixed = [b"\xff", b"\xfe\xff", b"abc\xffdef", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
             b"\xf0\x9f\x98 x", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf8\x88\x80\x80\x80",
             b"\xf4\x90\x80\x80", b"\x80\x81\x82", b"caf\xe9", b"na\xefve r\xe9sum\xe9", b"\xc3\xa9\xff\xc3\xa9",
             b"hello \xf0\x9f\x98\x80\xf0\x9f wor\xffld", b"\xe4\xb8\xad\xe6\x96", b"\xe4\xb8\xad\xe6\x96\x87",
             b"[MASK]\xff[MASK]", b"\xef\xbb\xbfBOM text", b"a\xc2\xa0b", b"a\xc2b", b"\xe1\x80", b"\xf1\x80\x80",
             b"\xf3\xbf\xbf\xbf", b"\xf4\x8f\xbf\xbf", b"\xc2\x80\xc2\x9f control"]
    out = list(fixed)
    for _ in range(25):
        out.append(bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 40))))
    for _ in range(10):
        s = "mixed naïve 中文 😀 text".encode()
        i = rng.randint(0, len(s) - 1)
        out.append(s[:i] + bytes([rng.randint(0x80, 0xFF)]) + s[i + 1:])
    return out


def long_texts(rng):
    words = ["the", "embedding", "model", "maps", "text", "into", "vectors", "naïve", "中文", "tokenization",
             "supercalifragilistic", "42", "!", "😀", "Ünïcödé", "[MASK]"]
    out = []
    for n in (300, 600, 2000, 5000):
        out.append(" ".join(rng.choice(words) for _ in range(n)))
    out.append("x" * 20000)                       # one word far over max_input_chars_per_word
    out.append(("lorem ipsum dolor sit amet " * 2000).strip())  # > 2 blocks of the C code
    out.append("\n".join("line %d: value=%d" % (i, i * i) for i in range(3000)))
    out.append("中文" * 5000)
    out.append(("a\u0301" * 40 + " ") * 500)
    return out


def sweep_lines():
    """Every code point where the normaliser or pre-tokeniser has something to decide, inside a word
    ("a{c}b": dropped / space / punctuation / mark / kept) and alone (case and decomposition)."""
    cls, alone = set(), set()
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        cat = unicodedata.category(c)
        if cat[0] in "PZM" or cat in ("Cc", "Cf") or (cp < 0x3000 and cat == "Sk"):
            cls.add(cp)
        if c.lower() != c or unicodedata.decomposition(c) and not unicodedata.decomposition(c).startswith("<"):
            alone.add(cp)
    cls.update([0x166D, 0x111C9, 0x11938, 0x1C89, 0xA7CB, 0xA7DC, 0x10D50, 0x16EA0, 0x1E900, 0xFFFD, 0x2B81F,
                0x2B820, 0x2B91F, 0x2B920, 0x2CEAF, 0x2CEB0])
    alone.update([0x1C89, 0xA7CB, 0xA7CC, 0xA7DC, 0x10D50, 0x16EA0, 0x11938, 0x130])
    lines = []
    items = ["a%sb" % chr(cp) for cp in sorted(cls)]
    for i in range(0, len(items), 40):
        lines.append(" ".join(items[i:i + 40]))
    items = [chr(cp) for cp in sorted(alone)]
    for i in range(0, len(items), 60):
        lines.append(" ".join(items[i:i + 60]))
    return lines


# ----------------------------------------------------------------------------- variants

def v_norm(**flags):
    def edit(j):
        j["normalizer"].update(flags)
    return edit


def v_added(j):
    base = max(j["model"]["vocab"].values()) + 1
    extra = [
        {"content": "<foo>", "single_word": False, "lstrip": True, "rstrip": True, "normalized": False, "special": True},
        {"content": "zqzq", "single_word": True, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
        {"content": "Ünï", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False},
        {"content": "new york", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False},
        {"content": "<foo>zqzq", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
        {"content": "龘", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
    ]
    for k, t in enumerate(extra):
        t["id"] = base + k
        j["added_tokens"].append(t)


def v_bertproc(j):
    j["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}


def v_nopost(j):
    j["post_processor"] = None


# Added token contents are not in the vocabulary (HF gives such a token the vocabulary's id).
# name -> edit of tokenizer.json. The C test (tests/model/test_tokenizer_golden.c) makes the
# same edits; keep both in step.
VARIANTS = {
    "cased": v_norm(lowercase=False, strip_accents=None),
    "lower_keep_accents": v_norm(lowercase=True, strip_accents=False),
    "strip_no_lower": v_norm(lowercase=False, strip_accents=True),
    "no_clean": v_norm(clean_text=False),
    "no_cjk": v_norm(handle_chinese_chars=False),
    "all_off": v_norm(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False),
    "added": v_added,
    "bert_processing": v_bertproc,
    "no_post": v_nopost,
}

VARIANT_TEXTS = [
    "Hello World", "naïve CAFÉ Ångström", "İstanbul İİ i̇", "ǅemal ǄǅǆǇǈǉ", "ΟΔΟΣ Σ ς", "ß ẞ",
    "中文 测试 日本語", "ﬁnance Ｆｕｌｌ", "control\x01\x02\x1f\x7f\x85 chars", "vertical\x0btab form\x0cfeed",
    "zero\u200bwidth \u200d\ufeff", "nul\x00byte", "\ufffd replacement", "a\u0300\u0301b e\u0301",
    "한국어 텍스트", "Привет Ёж", "Ελληνικά ΆΈΉ", "Tiếng Việt", "😀 👍🏽 👨‍👩‍👧", "\u00a0nbsp\u3000ideo",
    "<foo>x", "a <foo> b", "a<foo>b", "  <foo>  tail", "<foo><foo>", "<foo>zqzq", "foozqzq zqzq zqzq, (zqzq)",
    "zqzqista", "zqzq_x x_zqzq", "é zqzq", "zqzqé", "ÜNÏ ünï Uni uni", "New York new york NEW  YORK", "newyork",
    "龘国 龘", "a龘b",
    "[MASK] [mask] [CLS]", "", " ", "x" * 101, "é" * 101, "word " * 300,
]
VARIANT_BYTES = [b"\xff\xfe", b"a\xffb", b"\xc3(x", b"\xe2\x82\xac\xe2\x82", b"caf\xe9 au lait", b"\xf0\x9f\x98"]


# ----------------------------------------------------------------------------- driver

def make_tokenizer(tj):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(tj, f, ensure_ascii=False)
        name = f.name
    tok = Tokenizer.from_file(name)
    os.unlink(name)
    tok.no_padding()
    tok.no_truncation()
    return tok


def decode_with_map(raw):
    """raw.decode("utf-8", errors="replace"), plus the input byte where each character starts
    (the replacement ranges come from the decoder itself, through an error handler)."""
    spans = []

    def handler(err):
        spans.append((err.start, err.end))
        return ("\ufffd", err.end)

    codecs.register_error("modattn_record", handler)
    text = raw.decode("utf-8", errors="modattn_record")
    assert text == raw.decode("utf-8", errors="replace")
    cum, pos, k = [], 0, 0
    for ch in text:
        cum.append(pos)
        if ch == "\ufffd" and k < len(spans) and spans[k][0] == pos:
            pos = spans[k][1]
            k += 1
        else:
            pos += len(ch.encode("utf-8"))
    cum.append(pos)
    assert pos == len(raw)
    return text, cum


def byte_offsets(cum, offsets):
    return [[cum[s], cum[e]] for s, e in offsets]


def record(tok, item, max_len, variant=None):
    if isinstance(item, bytes):
        text, cum = decode_with_map(item)
        try:
            item.decode("utf-8")
            rec = {"text": text}
        except UnicodeDecodeError:
            rec = {"b64": base64.b64encode(item).decode()}
    else:
        text, cum = decode_with_map(item.encode("utf-8"))
        rec = {"text": text}
    if max_len is not None:
        tok.enable_truncation(max_length=max_len)
    else:
        tok.no_truncation()
    enc = tok.encode(text)
    rec["ids"] = enc.ids
    rec["offsets"] = byte_offsets(cum, enc.offsets)
    rec["max"] = max_len if max_len is not None else 1 << 20
    if variant:
        rec["variant"] = variant
    return rec


def write(path, header, recs):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=False) + "\n")
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print("wrote %s (%d inputs)" % (os.path.relpath(path, ROOT), len(recs)))


def main():
    rng = random.Random(20240611)
    tiny_json = os.path.join(OUT, "tokenizer_tiny.json")
    with open(tiny_json, encoding="utf-8") as f:
        tiny = make_tokenizer(json.load(f))
    trng = random.Random(99)
    tiny_inputs = HAND + generated(trng, 60) + random_unicode(trng, 40) + invalid_utf8(trng)
    tiny_inputs += ["<sp>", "a<sp>b", "a <sp> b", "  <sp>  ", "<sp><sp>", "qqq", "aqqq qqqa qqq_ (qqq) qqq!",
                    "New York", "new york", "NEW YORK", "new  york", "Néw Yörk", "newyork", "xnew yorkx",
                    "[CLS]New York<sp>qqq[SEP]", "abcdefghijklmnopqrst", "abcdefghijklmnopqrstu",
                    "ééééééééééééééééééééé", "😀😀😀", "👍🏽", "한국", "中文日本語"]
    trecs = [record(tiny, x, 64) for x in tiny_inputs] + [record(tiny, x, None) for x in long_texts(trng)[:3]]
    write(os.path.join(OUT, "tokens_tiny.jsonl"), {"tokenizers": tokenizers.__version__,
                                                   "model": "tests/fixtures/tokenizer_tiny.json", "max": 64}, trecs)

    minilm_json = os.path.join(MODEL_ROOT, "all-MiniLM-L6-v2", "tokenizer.json")
    if not os.path.exists(minilm_json):
        sys.exit("missing %s: run `make model` (tools/setup_model.sh) first" % minilm_json)
    with open(minilm_json, encoding="utf-8") as f:
        base = json.load(f)
    header = {"tokenizers": tokenizers.__version__, "model": "all-MiniLM-L6-v2", "max": MAX}

    tok = make_tokenizer(base)
    inputs = HAND + generated(rng, 120) + random_unicode(rng, 80) + long_texts(rng) + sweep_lines()
    inputs += invalid_utf8(rng)
    recs = [record(tok, x, MAX) for x in inputs]
    # small budgets: truncation inside a word, specials only
    for m in (2, 3, 5, 17):
        for x in ["unaffable supercalifragilistic words here", "中文分词测试", "[MASK] a [MASK] b"]:
            recs.append(record(tok, x, m))
    # untruncated texts longer than two of the C code's 8 KiB blocks
    words = ["Tokenization", "naïve", "ÉCOLE", "中文", "😀", "[MASK]", "e\u0301", "x" * 120, "don't", "3.14", "—",
             "\u200b", "Ｗｉｄｅ", "İ", "\n", "\t", "unaffable", "http://a.b/c?d=e", "\u00a0", "\x07"]
    big = " ".join(rng.choice(words) for _ in range(3500))
    recs.append(record(tok, big, None))
    write(os.path.join(OUT, "tokens_minilm.jsonl"), header, recs)

    vrecs = []
    for name, edit in VARIANTS.items():
        tj = copy.deepcopy(base)
        edit(tj)
        vt = make_tokenizer(tj)
        if name == "added":
            for t in tj["added_tokens"]:
                assert vt.token_to_id(t["content"]) == t["id"], t
        for x in VARIANT_TEXTS + VARIANT_BYTES:
            vrecs.append(record(vt, x, MAX if name != "no_post" else None, name))
    write(os.path.join(OUT, "tokens_variants.jsonl"), dict(header, model="all-MiniLM-L6-v2 + edits"), vrecs)

    bge_json = os.path.join(MODEL_ROOT, "bge-small-en-v1.5", "tokenizer.json")
    if os.path.exists(bge_json):
        with open(bge_json, encoding="utf-8") as f:
            bj = json.load(f)
        bt = make_tokenizer(bj)
        brecs = [record(bt, x, 512) for x in HAND[:200] + invalid_utf8(random.Random(7))[:20]]
        write(os.path.join(OUT, "tokens_bge.jsonl"), dict(header, model="bge-small-en-v1.5", max=512), brecs)
    else:
        print("no %s: tokens_bge.jsonl not written" % os.path.relpath(bge_json, ROOT))


if __name__ == "__main__":
    main()
