#!/usr/bin/env python3
"""Goldens for long texts that have no ASCII whitespace or punctuation for a long way: the
tokenizer cuts them into blocks at other places, or drops the unread middle of one giant word
(model/tokenizer.c, find_cut). Hugging Face `tokenizers` tokenises each text whole.

    python3 tools/make_long_token_goldens.py      (needs: pip install tokenizers; make model)

Writes tests/fixtures/tokens_long.jsonl. Each line: "tokenizer" ("minilm", "tiny", "unigram" or
"unigram_bytes"), "seed"
(a string), "reps" (the text is seed * reps, then "tail" appended), "n" (ids, [CLS]/[SEP]
included, no truncation), "head"/"tail_ids" (the first and last 16 ids), "bounded" (whether the
memory bound is promised), "fnv" (FNV-1a 64 of
every id and byte offset as little-endian int64s, in order: id, start, end), so the C test
(tests/model/test_tokenizer_long.c) rebuilds the text and compares everything without
committing megabytes."""
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK = {
    "minilm": os.path.join(ROOT, ".models", "all-MiniLM-L6-v2", "tokenizer.json"),
    "tiny": os.path.join(ROOT, "tests", "fixtures", "tokenizer_tiny.json"),
    "unigram": os.path.join(ROOT, "tests", "fixtures", "tokenizer_unigram.json"),
    "unigram_bytes": os.path.join(ROOT, "tests", "fixtures", "tokenizer_unigram_bytes.json"),
}
# about 1 MB of multilingual text with spaces, for the Unigram path's blocks (tokenizer_unigram.c,
# modattn__tk_unigram_cut): a cut is made before a space that follows a letter or digit
MULTI = ("Informação sobre o banco de dados, não é? Die Datenbank ist nach dem Absturz sicher. "
         "La base de données est sûre à 100 %. База данных в безопасности после сбоя. "
         "قاعدة البيانات آمنة بعد الانهيار. डेटाबेस क्रैश के बाद सुरक्षित है। 数据库在崩溃后是安全的。"
         "データベースはクラッシュ後も安全です。 데이터베이스는 충돌 후에도 안전합니다. "
         "e\u0301t\u00e9 ﬁnance ｶﾀｶﾅ ＡＢＣ 👍🏽 👩‍💻 x\u200by   tabs\tand\nnewlines 2024 ")
CASES = [
    ("minilm", "a", 3_000_000, ""),                       # one 3 MB word
    ("minilm", "a", 3_000_000, " and then words"),        # ... followed by words
    ("minilm", "我们的数据库在崩溃后是安全的，", 30_000, ""),   # CJK with fullwidth punctuation only
    ("minilm", "数据库", 100_000, ""),                      # CJK, no punctuation at all
    ("minilm", "]", 200_000, ""),                         # punctuation that ends an added token
    ("minilm", "[", 200_000, ""),                         # ... that begins one
    ("minilm", "[MASK]", 50_000, ""),                     # added tokens back to back
    ("minilm", "[C", 100_000, "LS]"),
    ("minilm", "e\u0301", 200_000, ""),                   # a letter and a combining mark, on and on
    ("minilm", "\u00e9\u0323\u0301", 100_000, ""),        # marks to reorder
    ("minilm", "x" * 40000 + "[MASK]", 2, "y" * 40000),   # an added token inside long words
    ("minilm", "สวัสดีครับ", 20_000, ""),                  # Thai: no spaces, letters and marks
    ("minilm", "привет—мир", 20_000, ""),                 # Cyrillic with an em dash
    ("minilm", "a\u3000", 100_000, ""),                   # ideographic space
    ("minilm", "ab\u200d", 100_000, ""),                  # zero-width joiner (format: dropped)
    ("minilm", "a\u0001", 100_000, ""),                   # a control character, dropped
    ("minilm", "Ⅻ", 50_000, ""),                          # letter numbers
    ("minilm", "\U0002f800", 50_000, ""),                 # CJK compatibility ideograph (NFD)
    ("minilm", "\u037e", 50_000, ""),                     # Greek question mark -> ';'
    ("minilm", "\u1fef", 50_000, ""),                     # Greek varia -> '`' (punctuation after NFD)
    ("tiny", "qqq", 50_000, ""),                          # single_word token, back to back (not bounded:
                                                          # no cut can be proven safe between its letters)
    ("tiny", "漢qqq字", 20_000, ""),                       # ... beside CJK (word characters)
    ("tiny", "<sp>", 50_000, ""),                         # lstrip/rstrip token
    ("tiny", "漢\u3000<sp>\u3000", 20_000, ""),            # ... with non-ASCII whitespace around
    ("tiny", "New York ", 20_000, ""),                    # a normalised token with a space
    ("tiny", "b", 1_000_000, ""),                         # one long word, short word cap
    ("tiny", "。", 100_000, ""),
    ("unigram", MULTI, 2_500, ""),                        # ~1 MB, multilingual, blocks at spaces
    ("unigram", MULTI, 2_500, " <mask> " + MULTI),        # ... an lstrip added token near the end
    ("unigram", "word <mask> next ", 60_000, "end"),       # lstrip tokens everywhere
    ("unigram", "a" * 20_000 + " ", 60, "b"),             # long pieces between the spaces
    ("unigram_bytes", MULTI, 1_000, ""),                  # byte_fallback
    ("unigram", "数据库是安全的。", 20_000, ""),             # CJK without spaces: one piece, no cut
                                                          # (not bounded: HF's Viterbi is over the piece)
]


def fnv(vals):
    h = 0xCBF29CE484222325
    for v in vals:
        for byte in (v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"):
            h ^= byte
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def main():
    toks = {k: Tokenizer.from_file(p) for k, p in TOK.items()}
    for t in toks.values():
        t.no_truncation()
        t.no_padding()
    out = os.path.join(ROOT, "tests", "fixtures", "tokens_long.jsonl")
    with open(out, "w") as f:
        f.write(json.dumps({"tokenizers": tokenizers.__version__}) + "\n")
        for name, seed, reps, tail in CASES:
            text = seed * reps + tail
            enc = toks[name].encode(text)
            # character offsets -> byte offsets
            starts = [0]
            for ch in text:
                starts.append(starts[-1] + len(ch.encode("utf-8")))
            vals = []
            for i, (s, e) in zip(enc.ids, enc.offsets):
                vals += [i, starts[s], starts[e]]
            f.write(json.dumps({"tokenizer": name, "seed": seed, "reps": reps, "tail": tail,
                                "n": len(enc.ids), "head": enc.ids[:16], "tail_ids": enc.ids[-16:],
                                "fnv": fnv(vals), "bounded": seed != "qqq" and not seed.startswith("数据库是")}, ensure_ascii=False) + "\n")
            print(f"{name} {seed[:12]!r} x{reps}: {len(enc.ids)} ids", file=sys.stderr)


if __name__ == "__main__":
    main()
