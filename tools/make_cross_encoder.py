#!/usr/bin/env python3
"""Write the tiny cross-encoders: small BertForSequenceClassification directories with seeded random weights.

    python3 tools/make_cross_encoder.py [--vocab-from .models/all-MiniLM-L6-v2] [OUT_ROOT]

Writes OUT_ROOT/tiny-cross-encoder (num_labels 1: a relevance score, sigmoid by default as
sentence-transformers' CrossEncoder applies) and OUT_ROOT/tiny-cross-encoder-3 (num_labels 3 with
id2label, no activation), OUT_ROOT defaulting to <repo>/.models. Only the Python standard library,
as tools/make_test_model.py (whose generator and safetensors writer it uses): the directories are the
same byte for byte everywhere and tools/setup_model.sh pins every file's sha256.

The layout is what `transformers` saves for BertForSequenceClassification (and what
sentence-transformers' CrossEncoder loads): config.json, model.safetensors with the "bert." prefix,
the pooler (bert.pooler.dense) and the classifier (classifier.weight / .bias), and the tokenizer
files of all-MiniLM-L6-v2 (Apache-2.0) with tokenizer_config.json's model_max_length set to the
model's 128 positions. hidden 128, 2 heads, 2 layers, intermediate 256. Untrained: the scores mean
nothing; the directories exist to check the engine's reranking against `transformers`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_test_model import Gen, write_json, write_safetensors  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
HIDDEN, HEADS, LAYERS, INTER, MAX_POS, TYPES = 128, 2, 2, 256, 128, 2
EPS = 1e-12
MODELS = {
    # name: (seed, num_labels, id2label)
    "tiny-cross-encoder": (20261206, 1, {0: "LABEL_0"}),
    "tiny-cross-encoder-3": (20261207, 3, {0: "contradiction", 1: "entailment", 2: "neutral"}),
}
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "special_tokens_map.json")


def config(vocab: int, num_labels: int, id2label: dict) -> dict:
    return {
        "architectures": ["BertForSequenceClassification"],
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout": None,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": HIDDEN,
        "id2label": {str(k): v for k, v in id2label.items()},
        "label2id": {v: k for k, v in id2label.items()},
        "initializer_range": 0.02,
        "intermediate_size": INTER,
        "layer_norm_eps": EPS,
        "max_position_embeddings": MAX_POS,
        "model_type": "bert",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
        "type_vocab_size": TYPES,
        "vocab_size": vocab,
    }


def build(seed: int, vocab: int, num_labels: int) -> dict:
    g = Gen(seed)
    t: dict = {}

    def put(name, shape, std, mean=0.0):
        n = 1
        for d in shape:
            n *= d
        t[name] = (list(shape), g.uniform(n, std, mean))

    H, I = HIDDEN, INTER
    put("bert.embeddings.word_embeddings.weight", (vocab, H), 0.5)
    put("bert.embeddings.position_embeddings.weight", (MAX_POS, H), 0.3)
    # the two token types far apart, so that a wrong type id changes the score
    put("bert.embeddings.token_type_embeddings.weight", (TYPES, H), 0.5)
    put("bert.embeddings.LayerNorm.weight", (H,), 0.1, 1.0)
    put("bert.embeddings.LayerNorm.bias", (H,), 0.05)
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}."
        put(p + "attention.self.query.weight", (H, H), 0.12)
        put(p + "attention.self.query.bias", (H,), 0.05)
        put(p + "attention.self.key.weight", (H, H), 0.12)
        put(p + "attention.self.key.bias", (H,), 0.05)
        put(p + "attention.self.value.weight", (H, H), 0.08)
        put(p + "attention.self.value.bias", (H,), 0.05)
        put(p + "attention.output.dense.weight", (H, H), 0.08)
        put(p + "attention.output.dense.bias", (H,), 0.05)
        put(p + "attention.output.LayerNorm.weight", (H,), 0.1, 1.0)
        put(p + "attention.output.LayerNorm.bias", (H,), 0.05)
        put(p + "intermediate.dense.weight", (I, H), 0.08)
        put(p + "intermediate.dense.bias", (I,), 0.05)
        put(p + "output.dense.weight", (H, I), 0.05)
        put(p + "output.dense.bias", (H,), 0.05)
        put(p + "output.LayerNorm.weight", (H,), 0.1, 1.0)
        put(p + "output.LayerNorm.bias", (H,), 0.05)
    put("bert.pooler.dense.weight", (H, H), 0.15)
    put("bert.pooler.dense.bias", (H,), 0.05)
    put("classifier.weight", (num_labels, H), 0.3)
    put("classifier.bias", (num_labels,), 0.1)
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=REPO / ".models")
    ap.add_argument("--vocab-from", type=Path, default=REPO / ".models" / "all-MiniLM-L6-v2",
                    help="directory whose tokenizer files are copied (default: all-MiniLM-L6-v2)")
    ap.add_argument("--only", choices=sorted(MODELS), help="write just this one")
    args = ap.parse_args()
    src = args.vocab_from
    for f in TOKENIZER_FILES + ("tokenizer_config.json",):
        if not (src / f).is_file():
            print(f"make_cross_encoder: {src / f} is missing (run tools/setup_model.sh for "
                  "all-MiniLM-L6-v2 first)", file=sys.stderr)
            return 1
    vocab = sum(1 for _ in open(src / "vocab.txt", encoding="utf-8"))
    tcfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    tcfg["model_max_length"] = MAX_POS
    tcfg.pop("name_or_path", None)
    for name, (seed, nl, id2label) in MODELS.items():
        if args.only and name != args.only:
            continue
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "config.json", config(vocab, nl, id2label))
        write_json(out / "tokenizer_config.json", tcfg)
        for f in TOKENIZER_FILES:
            shutil.copyfile(src / f, out / f)
        (out / "README.md").write_text(
            f"# {name}\n\nA test cross-encoder for modattn, written by tools/make_cross_encoder.py "
            f"(seed {seed}) with the Python standard library: a BertForSequenceClassification with "
            f"random, untrained weights ({nl} label{'s' if nl > 1 else ''}; hidden {HIDDEN}, {HEADS} heads, "
            f"{LAYERS} layers, intermediate {INTER}, {MAX_POS} positions). Its scores mean nothing. Tokenizer "
            "files: those of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0).\n", encoding="utf-8")
        tmp = out / "model.safetensors.tmp"
        write_safetensors(tmp, build(seed, vocab, nl))
        os.replace(tmp, out / "model.safetensors")
        print(f"make_cross_encoder: wrote {out} ({nl} label(s), seed {seed})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
