#!/usr/bin/env python3
"""bench/make_qwen3_06b.py — a Qwen3-Embedding-0.6B-shaped sentence-transformers folder with random
weights, for timing only (issue 38 item 6): hidden 1024, 28 layers, 16 query heads and 8 key/value heads
of 128 (GQA), intermediate 3072 (SwiGLU), RMSNorm eps 1e-6, QK-norm, rotary base 1e6, no biases, tied
embeddings: Qwen/Qwen3-Embedding-0.6B's config.json, built with transformers' Qwen3Model and its own
initialisation (seeded). The tokenizer is .models/tiny-qwen3's byte-level BPE (Qwen2/Qwen3's layout,
<|endoftext|> appended, left padding), so the embedding table is 700 x 1024 instead of 151669 x 1024: a
lookup, no arithmetic, so the timing is the same. Last-token pooling and Normalize, as
Qwen3-Embedding; max_seq_length 512.

    bench/.venv/bin/python bench/make_qwen3_06b.py [OUT] [--layers N]
        # default bench/work/qwen3-0.6b-shaped; --layers N < 28 writes bench/work/qwen3-0.6b-shaped-<N>l
        # (the same layer, fewer of them: for a machine where 28 do not fit the time)

bench/work/ is git-ignored: the folder is generated, never committed."""
import argparse
import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3Model

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / ".models" / "tiny-qwen3"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--layers", type=int, default=28)
    args = ap.parse_args()
    name = "qwen3-0.6b-shaped" + ("" if args.layers == 28 else f"-{args.layers}l")
    out = args.out or REPO / "bench" / "work" / name
    if (out / "model.safetensors").exists():
        print(f"{out}: already there")
        return 0
    torch.manual_seed(20261206)
    tiny = json.loads((SRC / "config.json").read_text())
    cfg = Qwen3Config(
        vocab_size=tiny["vocab_size"], hidden_size=1024, intermediate_size=3072, num_hidden_layers=args.layers,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, hidden_act="silu",
        max_position_embeddings=32768, initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True,
        tie_word_embeddings=True, rope_theta=1000000.0, rope_scaling=None, attention_bias=False,
        use_sliding_window=False, sliding_window=None, max_window_layers=args.layers, attention_dropout=0.0,
        bos_token_id=tiny["bos_token_id"], eos_token_id=tiny["eos_token_id"])
    cfg.architectures = ["Qwen3Model"]
    model = Qwen3Model(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "modules.json",
              "config_sentence_transformers.json"):
        shutil.copy(SRC / f, out / f)
    for d in ("1_Pooling", "2_Normalize"):
        shutil.copytree(SRC / d, out / d, dirs_exist_ok=True)
    pool = json.loads((out / "1_Pooling" / "config.json").read_text())
    pool["word_embedding_dimension"] = 1024
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pool, indent=2) + "\n")
    tc = json.loads((out / "tokenizer_config.json").read_text())
    tc["model_max_length"] = 512
    (out / "tokenizer_config.json").write_text(json.dumps(tc, indent=2) + "\n")
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512, "do_lower_case": False}) + "\n")
    n = sum(p.numel() for p in model.parameters())
    print(f"{out}: {n / 1e6:.1f} M parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
