#!/usr/bin/env python3
"""Write the Unigram tokenizer goldens from the real Hugging Face `tokenizers` package.

    python3 tools/make_unigram_goldens.py

Reads tests/fixtures/tokenizer_unigram.json and tokenizer_unigram_bytes.json (written by
tools/make_unigram_tokenizer.py) and writes
  tests/fixtures/tokens_unigram.jsonl   the nmt_nfkc tokenizer as converted, truncation at 256 ids
                                        with <s>/</s>, and variants of it (VARIANTS below: Metaspace
                                        prepend_scheme first/never, split off, WhitespaceSplit +
                                        Lowercase sequences, RobertaProcessing, small budgets)
  tests/fixtures/tokens_unigram_bytes.jsonl  the byte_fallback tokenizer (no charsmap)
Inputs: the existing token goldens' texts (tools/make_token_goldens.py: hand-written, generated,
random Unicode, invalid UTF-8, long) plus a multilingual set. The line format is theirs; the C
test (tests/model/test_tokenizer_unigram.c) makes the same variant edits.
"""
import copy
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_token_goldens as g  # noqa: E402
import tokenizers  # noqa: E402

ROOT = g.ROOT
OUT = g.OUT
MAX = 256

MULTI = [
    "O rápido cachorro marrom pula sobre a raposa preguiçosa.", "Informação, ação, coração — São Paulo, Brasil",
    "Der schnelle braune Fuchs springt über den faulen Hund.", "Straße GROSSE Größe Mädchen Übersetzung",
    "Le renard brun rapide saute par-dessus le chien paresseux.", "Où est la bibliothèque? C'est très élégant!",
    "Быстрая коричневая лиса прыгает через ленивую собаку.", "ПРИВЕТ, мир! Ёлка ёжик",
    "الثعلب البني السريع يقفز فوق الكلب الكسول.", "مرحبا بالعالم! ٠١٢٣٤٥٦٧٨٩",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।", "नमस्ते दुनिया! हिन्दी",
    "敏捷的棕色狐狸跳过了懒狗。", "我们按照意义搜索文档，而不是词语。", "日本語のテキストです。ｶﾀｶﾅ ﾊﾟﾋﾟﾌﾟ",
    "東京は日本の首都です。全角ＡＢＣ１２３", "한국어 텍스트입니다. 안녕하세요!", "빠른 갈색 여우가 게으른 개를 뛰어넘습니다",
    "Emoji 😀😃😄 👍🏽 ❤️ 🇫🇷🇩🇪 👨‍👩‍👧‍👦 🎉🚀", "Mixed: Berlin Берлин برلين बर्लिन 柏林 ベルリン 베를린",
    "mixedScriptsБезПробелов中文English한국어", "ﬁnance ﬂow oﬃce ① ② Ⅷ ㍱ ™ ½ x² H₂O ℃ № ㈱",
    "e\u0301 a\u0300 o\u0308 n\u0303 \u1100\u1161\u11a8 \u0915\u094d\u0937", "a\u0301\u0302\u0303 Z\u0351\u0352alg\u0300o",
    "  leading and trailing spaces   ", "many     inner      spaces", "tabs\tand\nnewlines\r\nhere",
    "▁already▁has▁metaspace ▁ ▁▁", "<s>special</s> in <mask> text <pad> <unk>", "a<mask>b <mask>  c",
    "\u200b\u200c\u200d\ufeff zero width", "\x00\x01\x1f\x7f controls", "\u00a0\u2003\u3000 odd spaces",
    "Ελληνικά: Γειά σου Κόσμε!", "Tiếng Việt có dấu: Hà Nội", "שלום עולם", "สวัสดีครับ ภาษาไทย",
    "qqqqzzzzxxxx unknown-ish ξψω ჭკ ꦧꦱ", "😀" * 20, "ab" * 100,
]


def v_first(j):
    j["pre_tokenizer"]["prepend_scheme"] = "first"


def v_never(j):
    j["pre_tokenizer"]["prepend_scheme"] = "never"


def v_nosplit(j):
    j["pre_tokenizer"]["split"] = False


def v_seq(j):
    j["normalizer"]["normalizers"].append({"type": "Lowercase"})
    j["normalizer"]["normalizers"].append({"type": "Replace", "pattern": {"String": "ß"}, "content": "ss"})
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, j["pre_tokenizer"]]}


def v_roberta(j):
    j["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                           "trim_offsets": False, "add_prefix_space": True}


def v_nf(form, lower=False):
    def edit(j):
        j["normalizer"]["normalizers"][0] = {"type": form}
        if lower:
            j["normalizer"]["normalizers"].append({"type": "Lowercase"})
    return edit


VARIANTS = {"first": v_first, "never": v_never, "nosplit": v_nosplit, "seq": v_seq, "roberta": v_roberta}
# the Precompiled normalizer replaced by HF's Unicode normalizers (run on NF_TEXTS as well)
NF_VARIANTS = {"nfc": v_nf("NFC"), "nfd": v_nf("NFD"), "nfkc": v_nf("NFKC"), "nfkd_lower": v_nf("NFKD", True)}


def nf_lines(form):
    """Every code point that `form` (NFD: canonical, NFKD: compatibility only) changes, 40 to a
    line, and combining sequences in and out of canonical order."""
    import unicodedata
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
           and unicodedata.normalize(form, chr(cp)) != chr(cp)
           and (form == "NFD" or unicodedata.normalize("NFD", chr(cp)) == chr(cp))]
    lines = [" ".join(chr(cp) for cp in cps[i:i + 40]) for i in range(0, len(cps), 40)]
    lines += ["a\u0323\u0307 a\u0307\u0323 q\u0307\u0323 \u1e0b\u0323 \u1e63\u0307 e\u0301\u0301",
              "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8 \u0915\u093c \u09c7\u09be \u0b47\u0b3e",
              "\u0041\u030a\u0301 \u212b \u00c5 \u0344 \u0f73 \u0f75 \u0f81", "\u0308\u0301 leading marks",
              "\u11935\u11930 \U00011935\U00011930 \U00011938 \U000105C9 \U0001D15E"]
    return lines


def main():
    rng = random.Random(20261206)
    with open(os.path.join(OUT, "tokenizer_unigram.json"), encoding="utf-8") as f:
        base = json.load(f)
    tok = g.make_tokenizer(base)
    inputs = g.HAND + MULTI + g.generated(rng, 60) + g.random_unicode(rng, 60) + g.invalid_utf8(rng)
    recs = [g.record(tok, x, MAX) for x in inputs]
    recs += [g.record(tok, x, None) for x in g.long_texts(rng)[:2]]
    for m in (2, 3, 5, 17):
        for x in ["Informação ﬁnance 中文分词", "<mask> a <mask> b", "  spaced   out  "]:
            recs.append(g.record(tok, x, m))
    vin = MULTI + g.HAND[:60] + [b"\xff\xfe", b"a\xffb", b"caf\xe9 au lait"]
    for name, edit in VARIANTS.items():
        tj = copy.deepcopy(base)
        edit(tj)
        vt = g.make_tokenizer(tj)
        recs += [g.record(vt, x, MAX, name) for x in vin]
    # every decomposable code point: canonical ones through NFC (decompose, reorder, compose),
    # compatibility ones through NFKD + Lowercase; NFD and NFKC on the shared texts
    extra = {"nfc": nf_lines("NFD"), "nfkd_lower": nf_lines("NFKD")}
    for name, edit in NF_VARIANTS.items():
        tj = copy.deepcopy(base)
        edit(tj)
        vt = g.make_tokenizer(tj)
        recs += [g.record(vt, x, MAX, name) for x in vin + extra.get(name, [])]
    g.write(os.path.join(OUT, "tokens_unigram.jsonl"),
            {"tokenizers": tokenizers.__version__, "model": "tests/fixtures/tokenizer_unigram.json", "max": MAX}, recs)

    with open(os.path.join(OUT, "tokenizer_unigram_bytes.json"), encoding="utf-8") as f:
        btok = g.make_tokenizer(json.load(f))
    brecs = [g.record(btok, x, MAX) for x in g.HAND + MULTI + g.random_unicode(rng, 40) + g.invalid_utf8(rng)]
    g.write(os.path.join(OUT, "tokens_unigram_bytes.jsonl"),
            {"tokenizers": tokenizers.__version__, "model": "tests/fixtures/tokenizer_unigram_bytes.json",
             "max": MAX}, brecs)


if __name__ == "__main__":
    sys.exit(main())
