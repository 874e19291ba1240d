#!/usr/bin/env python3
"""tools/make_decode_goldens.py — expected texts of `tokenizers`' Tokenizer.decode for
tests/model/test_tokenizer_decode.c: tests/fixtures/decode_bpe.jsonl and decode_unigram.jsonl.

For each base (not variant) line of tests/fixtures/tokens_bpe.jsonl (the BPE goldens' inputs, on
the GPT-2, Qwen2, ModernBERT layouts with the ByteLevel decoder, and the suffix tokenizer with no
decoder), decode its ids with skip_special_tokens True and False; then ids that end or start
inside a character (every id alone, and cuts of the id list at each position), a special token
in the middle, and the full vocabulary as one list. Run with the bench venv:
    /work/main/bench/.venv/bin/python tools/make_decode_goldens.py
"""
import json
import os
import random

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")


def main():
    toks = {}
    lines = [json.loads(l) for l in open(os.path.join(FIX, "tokens_bpe.jsonl"))][1:]
    rng = random.Random(38)
    out = [{"tokenizers": tokenizers.__version__}]

    def add(name, ids, skip):
        t = toks.setdefault(name, Tokenizer.from_file(os.path.join(FIX, f"tokenizer_bpe_{name}.json")))
        out.append({"fixture": name, "ids": ids, "skip": skip, "text": t.decode(ids, skip_special_tokens=skip)})

    seen = set()
    for j in lines:
        if j.get("variant"):
            continue
        name, ids = j["fixture"], j["ids"]
        for skip in (True, False):
            add(name, ids, skip)
        # cuts inside characters: a prefix and a suffix at a random position
        if len(ids) > 2:
            k = rng.randrange(1, len(ids) - 1)
            add(name, ids[:k], False)
            add(name, ids[k:], False)
        # a special added token in the middle
        if len(ids) > 1 and name != "suffix":
            t = toks[name]
            sid = t.token_to_id({"gpt2": "<|endoftext|>", "qwen2": "<|im_start|>", "modernbert": "[CLS]"}[name])
            m = len(ids) // 2
            for skip in (True, False):
                add(name, ids[:m] + [sid] + ids[m:], skip)
        seen.add(name)
    for name in sorted(seen):
        t = toks[name]
        n = t.get_vocab_size()
        for i in range(n):  # every id alone: partial UTF-8 sequences among them
            add(name, [i], False)
        add(name, list(range(n)), True)
        add(name, list(range(n)), False)
        for _ in range(20):  # random id lists: bytes that are not UTF-8
            add(name, [rng.randrange(n) for _ in range(rng.randrange(1, 12))], rng.random() < 0.5)
    with open(os.path.join(FIX, "decode_bpe.jsonl"), "w", encoding="utf-8") as f:
        for o in out:
            f.write(json.dumps(o, ensure_ascii=True) + "\n")
    print(f"{len(out) - 1} decodes written")
    unigram(rng)


def unigram(rng):
    """tests/fixtures/decode_unigram.jsonl: the Metaspace decoder (XLM-R's layout, prepend_scheme
    "always") of tests/fixtures/tokenizer_unigram.json on the ids of tests/fixtures/tokens_unigram.jsonl
    (every third line of up to 48 ids: skip_special_tokens True and False, and each list without its first id, so a "▁" opens the
    first token kept or not), every id alone, and random id lists."""
    t = Tokenizer.from_file(os.path.join(FIX, "tokenizer_unigram.json"))
    out = [{"tokenizers": tokenizers.__version__}]

    def add(ids, skip):
        out.append({"fixture": "unigram", "ids": ids, "skip": skip, "text": t.decode(ids, skip_special_tokens=skip)})

    for line in list(open(os.path.join(FIX, "tokens_unigram.jsonl")))[1::3]:
        ids = json.loads(line)["ids"]
        if len(ids) > 48:  # the long texts add size, not cases
            continue
        for skip in (True, False):
            add(ids, skip)
        if len(ids) > 2:
            add(ids[1:], True)
            add(ids[2:], False)
    n = t.get_vocab_size()
    for i in range(n):
        add([i], False)
    for _ in range(200):
        add([rng.randrange(n) for _ in range(rng.randrange(1, 12))], rng.random() < 0.5)
    with open(os.path.join(FIX, "decode_unigram.jsonl"), "w", encoding="utf-8") as f:
        for o in out:
            f.write(json.dumps(o, ensure_ascii=True) + "\n")
    print(f"{len(out) - 1} Metaspace decodes written")


if __name__ == "__main__":
    main()
