#!/usr/bin/env python3
"""Write tests/fixtures/rerank_golden.json: cross-encoder scores from transformers / sentence-transformers.

    /work/main/bench/.venv/bin/python tools/make_rerank_goldens.py [MODELS_ROOT]

For each pair (query, passage), on .models/tiny-cross-encoder (1 label) and tiny-cross-encoder-3 (3
labels): the ids and token_type_ids that the `tokenizers` library gives for the pair with
truncation="longest_first" to the model's max length, the raw logits of
AutoModelForSequenceClassification, and the scores of sentence-transformers' CrossEncoder.predict
(its default activation: sigmoid for one label, none for more). The pairs cover the truncation
cases: both short, one side longer than the budget, both longer, equal lengths, odd budgets, empty
sides. Tooling only: the tests read the JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from sentence_transformers import CrossEncoder
from transformers import AutoModelForSequenceClassification, AutoTokenizer

REPO = Path(__file__).resolve().parent.parent
MODELS = ("tiny-cross-encoder", "tiny-cross-encoder-3")

W = "the quick brown fox jumps over the lazy dog while bees make honey in the garden".split()


def words(n: int, shift: int = 0) -> str:
    return " ".join(W[(i + shift) % len(W)] for i in range(n))


PAIRS = [
    ("who makes honey", "Bees make honey from the nectar of flowers."),
    ("how does the store survive a crash", "The store writes a journal before it changes a page, so a crash loses nothing."),
    ("café naïve résumé", "Accents are stripped: CAFÉ becomes cafe; 東京 is split into characters."),
    ("", "an empty query"),
    ("an empty passage", ""),
    ("", ""),
    ("short", words(200)),            # the passage alone is over the budget
    (words(200), "short"),            # the query alone is over the budget
    (words(70, 1), words(70, 3)),     # equal lengths, both over half
    (words(80, 2), words(60, 5)),     # both over half, unequal
    (words(62), words(63)),           # just over
    (words(62), words(62)),           # exactly at the budget (124 + 3 specials = 127) ...
    (words(62), words(61)),           # ... and one under
    (words(125), "x"),                # the long side cut to fill the budget exactly
    ("x", words(124)),
    (words(300), words(301)),         # both far over
    ("unbelievable tokenization", "unbelievably " * 90),  # word pieces cut inside a word
]


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / ".models"
    out = {"pairs": [list(p) for p in PAIRS], "models": {}}
    torch.set_grad_enabled(False)
    for name in MODELS:
        d = str(root / name)
        tok = AutoTokenizer.from_pretrained(d)
        model = AutoModelForSequenceClassification.from_pretrained(d).eval()
        ce = CrossEncoder(d)
        max_len = ce.max_length
        enc = tok([p[0] for p in PAIRS], [p[1] for p in PAIRS], truncation="longest_first",
                  max_length=max_len, padding=True, return_tensors="pt")
        logits = model(**enc).logits
        rows = []
        for i in range(len(PAIRS)):
            n = int(enc["attention_mask"][i].sum())
            rows.append({
                "ids": enc["input_ids"][i][:n].tolist(),
                "types": enc["token_type_ids"][i][:n].tolist(),
                "logits": [float(x) for x in logits[i]],
                "truncated": len(tok(PAIRS[i][0], PAIRS[i][1])["input_ids"]) > max_len,
            })
        scores = ce.predict(PAIRS, batch_size=4)
        for i, s in enumerate(scores):
            rows[i]["score"] = [float(x) for x in (s if hasattr(s, "__len__") else [s])]
        out["models"][name] = {
            "max_length": max_len,
            "num_labels": model.config.num_labels,
            "activation": type(ce.activation_fn).__name__,
            "rows": rows,
        }
    path = REPO / "tests" / "fixtures" / "rerank_golden.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"make_rerank_goldens: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
