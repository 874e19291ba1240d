#!/usr/bin/env python3
"""Train small byte-level BPE tokenizers with Hugging Face `tokenizers` and write their goldens.

    python3 tools/make_bpe_goldens.py [--retrain]

Writes (tests/fixtures/)
  tokenizer_bpe_gpt2.json    GPT-2 / RoBERTa layout: ByteLevel pre-tokenizer (GPT-2's regex),
                             ByteLevel post-processor with trim_offsets, no normalizer; merges
                             written in the legacy "a b" string form
  tokenizer_bpe_qwen2.json   Qwen2 / Qwen3 layout, as the real file: NFC normalizer,
                             Sequence[Split(Qwen2's regex, Isolated), ByteLevel(use_regex=false)],
                             ByteLevel post-processor without trim_offsets, <|endoftext|>,
                             <|im_start|>, <|im_end|>; merges as [a, b] pairs
  tokenizer_bpe_modernbert.json  ModernBERT layout: ByteLevel(trim_offsets, use_regex), no
                             normalizer, TemplateProcessing [CLS] $A [SEP], [MASK] with lstrip
  tokenizer_bpe_suffix.json  a BPE without ByteLevel: Split(GPT-2's regex), continuing_subword_prefix
                             "##", end_of_word_suffix "</w>", unk_token "<unk>"
  tokens_bpe_long.jsonl      long texts (long_texts(): a recipe the C test repeats) through gpt2,
                             qwen2, modernbert and suffix (whose end_of_word_suffix shows where a
                             word ends), whole and cut at 3000 ids: the count and an FNV-1a hash
                             of the ids and offsets (the C side works on them in 8 KiB blocks)
  tokens_bpe.jsonl           ids and byte offsets from `tokenizers` for every fixture and the
                             variants below (VARIANTS: edits of the file that the C test,
                             tests/model/test_tokenizer_bpe.c, makes the same way)
Inputs: the existing golden texts (tools/make_token_goldens.py), the multilingual set of the
Unigram goldens (tools/make_unigram_goldens.py), contractions, whitespace and digit runs, and
invalid UTF-8. Truncation at 128 ids keeps the file small. The line format is make_token_goldens'.

Needs: pip install tokenizers. CI does not run this; the C tests read the committed files.
"""
import copy
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_token_goldens as g  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

OUT = g.OUT
MAX = 128

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
            r"\s+(?!\S)|\s+")
LLAMA3_RE = QWEN2_RE.replace(r"|\p{N}|", r"|\p{N}{1,3}|")

CORPUS = """\
The quick brown fox jumps over the lazy dog. Search engines find documents by meaning, not only by words.
A document engine indexes text, splits it into chunks and embeds every chunk into a dense vector.
I can't believe it's not butter! We'll see; they're here, you've won, I'm done, she'd go. DON'T SHOUT.
O rápido cachorro marrom pula sobre a raposa preguiçosa. Em São Paulo, a informação está em português.
Der schnelle braune Fuchs springt über den faulen Hund. Straße, Größe, Mädchen, Übersetzung, Bücher.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир! Поиск документов по смыслу.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم! نبحث عن المستندات حسب المعنى.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया! हम अर्थ के अनुसार दस्तावेज़ खोजते हैं।
敏捷的棕色狐狸跳过了懒狗。我爱北京天安门。我们按照意义而不是词语来搜索文档。中文分词测试。
日本語のテキストです。カタカナとひらがな。東京は日本の首都です。
한국어 텍스트입니다. 안녕하세요! 빠른 갈색 여우가 게으른 개를 뛰어넘습니다.
Emoji: 😀 😃 😄 👍 👍🏽 ❤️ 🇫🇷 🎉 🚀 family 👨‍👩‍👧‍👦 and flags.
Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 3.14159 1,000,000 12345678901234.
def f(x):
    return x ** 2 + 1  # square
    if x:\t\treturn None
https://www.example.com/path?query=1&b=two contact: john.doe@example.com
"""


def corpus():
    lines = [l for l in CORPUS.splitlines() if l.strip()]
    return [l for _ in range(4) for l in lines] + ["\n".join(lines)] * 4


def save(tok, name):
    path = os.path.join(OUT, name)
    j = json.loads(tok.to_str())
    return path, j


def write_json(path, j):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    print("wrote %s (%d bytes)" % (os.path.relpath(path, g.ROOT), os.path.getsize(path)))


def train_gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tr = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), tr)
    j = json.loads(tok.to_str())
    # GPT-2's own file: merges as "a b" strings
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    return j


def train_qwen2():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tr = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), tr)
    j = json.loads(tok.to_str())
    j["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in j["model"]["merges"]]
    j["model"]["continuing_subword_prefix"] = ""
    j["model"]["end_of_word_suffix"] = ""
    return j


def train_modernbert():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=700, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), tr)
    j = json.loads(tok.to_str())
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    j["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                           "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls], "tokens": ["[CLS]"]},
                                              "[SEP]": {"id": "[SEP]", "ids": [sep], "tokens": ["[SEP]"]}}}
    for a in j["added_tokens"]:
        if a["content"] == "[MASK]":
            a["lstrip"] = True
    return j


def train_suffix():
    tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(GPT2_RE), behavior="isolated")
    tr = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>"], continuing_subword_prefix="##",
                             end_of_word_suffix="</w>", limit_alphabet=120, show_progress=False)
    tok.train_from_iterator(corpus(), tr)
    return json.loads(tok.to_str())


# ----------------------------------------------------------------------------- variants
# name -> (fixture, edit). The C test makes the same edits; keep both in step.

def v_prefix(j):
    j["pre_tokenizer"]["add_prefix_space"] = True
    j["post_processor"]["add_prefix_space"] = True


def v_roberta(j):
    eot = j["model"]["vocab"]["<|endoftext|>"]
    j["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|endoftext|>", eot], "cls": ["<|endoftext|>", eot],
                           "trim_offsets": True, "add_prefix_space": True}
    j["pre_tokenizer"]["add_prefix_space"] = True


def v_split_gpt2(j):
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": GPT2_RE}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def v_unk(j, fuse):
    # no ByteLevel: code points reach the model, most non-ASCII ones are unknown
    j["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": GPT2_RE}, "behavior": "Isolated", "invert": False}
    j["model"]["unk_token"] = "<|endoftext|>"
    j["model"]["fuse_unk"] = fuse
    j["post_processor"] = None


def v_nounk(j):
    v_unk(j, False)
    j["model"]["unk_token"] = None


def v_llama3(j):
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = LLAMA3_RE
    j["model"]["ignore_merges"] = True


def v_qprefix(j):
    j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True


def v_template(j):
    eot = j["model"]["vocab"]["<|endoftext|>"]
    j["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot],
                                                                "tokens": ["<|endoftext|>"]}}}


def v_seq_post(j):
    bl = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    v_template(j)
    j["post_processor"] = {"type": "Sequence", "processors": [bl, j["post_processor"]]}


def v_neox(j):
    j["normalizer"] = {"type": "NFC"}
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


VARIANTS = {
    "prefix": ("gpt2", v_prefix), "roberta": ("gpt2", v_roberta), "split_gpt2": ("gpt2", v_split_gpt2),
    "unk": ("gpt2", lambda j: v_unk(j, False)), "fuse_unk": ("gpt2", lambda j: v_unk(j, True)),
    "nounk": ("gpt2", v_nounk), "llama3": ("qwen2", v_llama3), "qprefix": ("qwen2", v_qprefix),
    "template": ("qwen2", v_template), "seq_post": ("qwen2", v_seq_post), "neox": ("modernbert", v_neox),
}

MULTI = [
    "O rápido cachorro marrom pula sobre a raposa preguiçosa.", "Informação, ação, coração — São Paulo, Brasil",
    "Der schnelle braune Fuchs springt über den faulen Hund.", "Straße GROSSE Größe Mädchen Übersetzung",
    "Быстрая коричневая лиса прыгает через ленивую собаку.", "ПРИВЕТ, мир! Ёлка ёжик",
    "الثعلب البني السريع يقفز فوق الكلب الكسول.", "مرحبا بالعالم! ٠١٢٣٤٥٦٧٨٩",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।", "नमस्ते दुनिया! हिन्दी",
    "敏捷的棕色狐狸跳过了懒狗。", "我们按照意义搜索文档，而不是词语。", "日本語のテキストです。ｶﾀｶﾅ ﾊﾟﾋﾟﾌﾟ",
    "한국어 텍스트입니다. 안녕하세요!", "Emoji 😀😃😄 👍🏽 ❤️ 🇫🇷🇩🇪 👨‍👩‍👧‍👦 🎉🚀",
    "Mixed: Berlin Берлин برلين बर्लिन 柏林 ベルリン 베를린", "mixedScriptsБезПробелов中文English한국어",
    "e\u0301 a\u0300 o\u0308 n\u0303 \u1100\u1161\u11a8 \u0915\u094d\u0937", "A\u030a \u212b \u00c5 \u1e9b\u0323",
]

SPECIFIC = [
    "don't", "DON'T", "Don'T", "I'm I'M you're YOU'RE we've WE'VE he'll HE'LL she'd SHE'D it's IT'S",
    "'s 't 're 've 'm 'll 'd ' s", "'ſ 'ſo ſ's", "rock'n'roll o'clock ''quoted'' 'tis", "x's'", "'''",
    "a  b   c    d", "  lead", "trail  ", "\n", "\n\n", "\r\n", "a\nb", "a\n\nb", "a \n b", "a\n \nb", "a \r\n\r\n b",
    "\t\tx", "x\t \ty", " \u00a0 x", "\u3000x\u3000 y", "x\u2028y", "end with spaces   ", "   ", " ",
    "1", "12", "123", "1234", "12345678901", "3.14159", "1,000,000", "a1b22c333d4444", "٣٤٥ ١٢", "x²³ ½",
    "Ⅷ ⅷ ①②", "$100 €200", "v1.2.3-beta", "!!!???", "...\n", "(a)[b]{c}", " !x", "!\nx", " .Hello", ".Hello",
    "\tHello", "\u00a0Hello", "Hello\r\n\r\nWorld", "<|endoftext|>", "a<|endoftext|>b", "x <|im_start|>user\nhi<|im_end|>",
    "[CLS] [MASK] x", "the [MASK] sat", "a[MASK]b", "  [MASK]  ", "ﬁnance Ｆｕｌｌ",
]


def long_texts():
    """Two texts of about 100 KB with lines (tests/model/test_tokenizer_bpe.c builds the same)."""
    a = "".join("line %d: value=%d, naïve café 中文 😀 don't\n" % (i, i * i) for i in range(2500))
    b = "".join("Word%d  and\tmore \r\n%s" % (i, "" if i % 3 else "\n") for i in range(4000))
    return {"lines": a, "crlf": b}


def fnv(recs_ids, recs_offs):
    h = 0xCBF29CE484222325
    for i, (s, e) in zip(recs_ids, recs_offs):
        for byte in i.to_bytes(4, "little", signed=True) + s.to_bytes(8, "little") + e.to_bytes(8, "little"):
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def write_long(fixtures):
    out = []
    for name in ("gpt2", "qwen2", "modernbert", "suffix"):
        tok = g.make_tokenizer(fixtures[name])
        for tname, text in long_texts().items():
            for m in (None, 3000):
                r = g.record(tok, text, m)
                out.append({"fixture": name, "text": tname, "max": r["max"], "n": len(r["ids"]),
                            "fnv": fnv(r["ids"], r["offsets"])})
    path = os.path.join(OUT, "tokens_bpe_long.jsonl")
    with open(path, "w") as f:
        for r in out:
            f.write(json.dumps(r) + "\n")
    print("wrote %s (%d texts)" % (os.path.relpath(path, g.ROOT), len(out)))


def main():
    rng = random.Random(20261206)
    # training is not deterministic (ties between equal counts): committed fixtures are kept unless
    # --retrain is given, so that the goldens can be rewritten for the same files
    trainers_ = {"gpt2": train_gpt2, "qwen2": train_qwen2, "modernbert": train_modernbert, "suffix": train_suffix}
    fixtures = {}
    for name, train in trainers_.items():
        path = os.path.join(OUT, "tokenizer_bpe_%s.json" % name)
        if "--retrain" in sys.argv or not os.path.exists(path):
            write_json(path, train())
        with open(path, encoding="utf-8") as f:
            fixtures[name] = json.load(f)
    base_inputs = (SPECIFIC + MULTI + g.HAND[9:60] + g.generated(rng, 8) + g.random_unicode(rng, 8)
                   + g.invalid_utf8(rng)[:36])
    recs = []
    for name, j in fixtures.items():
        tok = g.make_tokenizer(j)
        inputs = base_inputs if name != "suffix" else SPECIFIC + MULTI[:6] + g.invalid_utf8(rng)[:12]
        for x in inputs:
            r = g.record(tok, x, MAX, None)
            r["fixture"] = name
            recs.append(r)
        if name != "suffix":
            for m in (2, 3, 7):
                r = g.record(tok, "Hello world, naïve 中文 😀", m)
                r["fixture"] = name
                recs.append(r)
            if name in ("gpt2", "qwen2"):
                r = g.record(tok, g.long_texts(rng)[0], None)
                r["fixture"] = name
                recs.append(r)
    vin = SPECIFIC + MULTI[::3] + [b"\xff\xfe", b"a\xffb", b"caf\xe9 au lait", b"\xf0\x9f\x98 x"]
    for vname, (fx, edit) in VARIANTS.items():
        tj = copy.deepcopy(fixtures[fx])
        edit(tj)
        vt = g.make_tokenizer(tj)
        for x in vin:
            r = g.record(vt, x, MAX, vname)
            r["fixture"] = fx
            recs.append(r)
    g.write(os.path.join(OUT, "tokens_bpe.jsonl"), {"tokenizers": tokenizers.__version__, "max": MAX}, recs)
    write_long(fixtures)


if __name__ == "__main__":
    sys.exit(main())
