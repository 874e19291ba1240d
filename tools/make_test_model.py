#!/usr/bin/env python3
"""Write tiny-bert-cls: a small BERT sentence-transformers model with seeded random weights.

    python3 tools/make_test_model.py [--vocab-from .models/all-MiniLM-L6-v2] [OUT_DIR]

OUT_DIR defaults to <repo>/.models/tiny-bert-cls. Only the Python standard library (it runs in
tools/setup_model.sh on a fresh machine): the weights come from random.Random(SEED).random(),
whose sequence Python guarantees for a given integer seed across versions, and are written as
float32 safetensors by hand, so the directory is the same byte for byte everywhere
(tools/setup_model.sh pins the sha256 of every file).

The model is not trained: it exists to run the engine on a BERT whose every size differs from
all-MiniLM-L6-v2's and whose sentence-transformers pipeline differs too:

                      tiny-bert-cls          all-MiniLM-L6-v2
  hidden_size         128                    384
  heads x head dim    2 x 64                 12 x 32
  layers              3                      6
  intermediate_size   512                    1536
  max_position        128                    512
  layer_norm_eps      1e-5                   1e-12
  max_seq_length      96                     256  (tokenizer.json's own truncation is 128)
  pooling             CLS                    mean
  Normalize module    none (raw CLS vector)  yes

The vocabulary, tokenizer.json, vocab.txt and tokenizer_config.json are the all-MiniLM-L6-v2 ones
(copied from --vocab-from), so the tokenizer is a real one. Weights are uniform with the standard
deviations below (not BERT's 0.02: query and key are larger so that attention is far from
uniform, and biases and LayerNorm parameters are not at their defaults, so that every tensor
changes the output).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import struct
import sys
from array import array
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED = 20250611
NAME = "tiny-bert-cls"

HIDDEN, HEADS, LAYERS, INTER, MAX_POS, TYPES = 128, 2, 3, 512, 128, 2
MAX_SEQ = 96
EPS = 1e-5

CONFIG = {
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "classifier_dropout": None,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": HIDDEN,
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
    "use_cache": True,
    "vocab_size": None,  # from the vocabulary
}

MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
]
SBERT = {"max_seq_length": MAX_SEQ, "do_lower_case": False}
POOLING = {
    "word_embedding_dimension": HIDDEN,
    "pooling_mode_cls_token": True,
    "pooling_mode_mean_tokens": False,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
    "pooling_mode_weightedmean_tokens": False,
    "pooling_mode_lasttoken": False,
    "include_prompt": True,
}
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")

README = f"""# {NAME}

A test model for modattn, written by tools/make_test_model.py (seed {SEED}) with the Python standard
library: a BERT (model_type "bert") with random, untrained weights. Its embeddings mean nothing;
it exists so that the engine is checked against sentence-transformers on a BERT whose sizes and
pipeline differ from all-MiniLM-L6-v2: hidden {HIDDEN}, {HEADS} heads of {HIDDEN // HEADS}, {LAYERS} layers,
intermediate {INTER}, {MAX_POS} positions, layer_norm_eps {EPS:g}, max_seq_length {MAX_SEQ}, CLS pooling, no
Normalize module. Tokenizer files: those of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0).
"""


class Gen:
    """Uniform values of a given standard deviation from random.Random(seed).random()."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def uniform(self, n: int, std: float, mean: float = 0.0) -> array:
        a = std * math.sqrt(3.0)
        r = self.rng.random
        return array("f", [mean + a * (2.0 * r() - 1.0) for _ in range(n)])


def build(vocab: int) -> dict:
    g = Gen(SEED)
    t: dict[str, tuple[list[int], array]] = {}

    def put(name, shape, std, mean=0.0):
        n = 1
        for d in shape:
            n *= d
        t[name] = (list(shape), g.uniform(n, std, mean))

    H, I = HIDDEN, INTER
    put("embeddings.word_embeddings.weight", (vocab, H), 0.5)
    put("embeddings.position_embeddings.weight", (MAX_POS, H), 0.3)
    put("embeddings.token_type_embeddings.weight", (TYPES, H), 0.2)
    put("embeddings.LayerNorm.weight", (H,), 0.1, 1.0)
    put("embeddings.LayerNorm.bias", (H,), 0.05)
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
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
    put("pooler.dense.weight", (H, H), 0.08)
    put("pooler.dense.bias", (H,), 0.05)
    return t


def write_safetensors(path: Path, tensors: dict) -> None:
    header, offset, order = {"__metadata__": {"format": "pt"}}, 0, sorted(tensors)
    for name in order:
        shape, a = tensors[name]
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + 4 * len(a)]}
        offset += 4 * len(a)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in order:
            a = tensors[name][1]
            if sys.byteorder != "little":
                a = array("f", a)
                a.byteswap()
            a.tofile(f)


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=REPO / ".models" / NAME)
    ap.add_argument("--vocab-from", type=Path, default=REPO / ".models" / "all-MiniLM-L6-v2",
                    help="directory whose tokenizer files are copied (default: all-MiniLM-L6-v2)")
    args = ap.parse_args()

    src = args.vocab_from
    for f in TOKENIZER_FILES:
        if not (src / f).is_file():
            print(f"make_test_model: {src / f} is missing (run tools/setup_model.sh for "
                  "all-MiniLM-L6-v2 first)", file=sys.stderr)
            return 1
    vocab = sum(1 for _ in open(src / "vocab.txt", encoding="utf-8"))
    tok = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    if len(tok["model"]["vocab"]) != vocab:
        print(f"make_test_model: vocab.txt has {vocab} lines, tokenizer.json "
              f"{len(tok['model']['vocab'])} tokens", file=sys.stderr)
        return 1

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(CONFIG, vocab_size=vocab)
    write_json(out / "config.json", cfg)
    write_json(out / "modules.json", MODULES)
    write_json(out / "sentence_bert_config.json", SBERT)
    write_json(out / "1_Pooling" / "config.json", POOLING)
    for f in TOKENIZER_FILES:
        shutil.copyfile(src / f, out / f)
    (out / "README.md").write_text(README, encoding="utf-8")
    tmp = out / "model.safetensors.tmp"
    write_safetensors(tmp, build(vocab))
    os.replace(tmp, out / "model.safetensors")
    print(f"make_test_model: wrote {out} (hidden {HIDDEN}, {HEADS} heads, {LAYERS} layers, "
          f"vocab {vocab}, seed {SEED})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
