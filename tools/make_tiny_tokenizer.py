#!/usr/bin/env python3
"""Write tests/fixtures/tokenizer_tiny.json: a small BERT tokenizer.json (about 300 ids) that the
tokenizer unit test and the fuzz target use when .models/ is absent. It has every part our loader
reads: BertNormalizer, BertPreTokenizer, WordPiece with a short max_input_chars_per_word, added
tokens with single_word / lstrip / rstrip / normalized, and TemplateProcessing.
Run once; tools/make_token_goldens.py then writes tests/fixtures/tokens_tiny.jsonl for it."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
chars = list("abcdefghijklmnopqrstuvwxyz0123456789") + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
chars += list("éüßøæœłıαβγδεσςπωабвгдежзийклмнопрстуя中文日本語한국한글😀👍🏽←→∑√€£¥«»“”—…")
words = ["the", "un", "aff", "able", "hello", "world", "token", "ization", "s", "ing", "ed", "cafe", "naive",
         "new", "york", "in", "on", "at", "to", "of", "and", "is", "it", "that", "this", "for", "with", "as",
         "was", "he", "she", "we", "they", "you", "i", "a", "an", "be", "by", "or", "not", "but", "from",
         "embed", "model", "text", "vector", "attention", "transform", "er", "ers", "ly", "ness", "less"]
vocab = {}
for s in specials:
    vocab[s] = len(vocab)
for c in chars:
    for v in (c, "##" + c):
        vocab.setdefault(v, len(vocab))
for w in words:
    for v in (w, "##" + w):
        vocab.setdefault(v, len(vocab))
added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True} for s in specials]
n = len(vocab)
added += [
    {"id": n, "content": "<sp>", "single_word": False, "lstrip": True, "rstrip": True, "normalized": False, "special": True},
    {"id": n + 1, "content": "New York", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False},
    {"id": n + 2, "content": "qqq", "single_word": True, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
]
tj = {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                   "strip_accents": None, "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                  {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                       "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                                {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                       "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [vocab["[CLS]"]], "tokens": ["[CLS]"]},
                                          "[SEP]": {"id": "[SEP]", "ids": [vocab["[SEP]"]], "tokens": ["[SEP]"]}}},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 20, "vocab": vocab},
}
path = os.path.join(ROOT, "tests", "fixtures", "tokenizer_tiny.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(tj, f, ensure_ascii=False, indent=1)
print("wrote %s (%d ids)" % (os.path.relpath(path, ROOT), n + 3))
