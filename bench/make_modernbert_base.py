#!/usr/bin/env python3
"""bench/make_modernbert_base.py — a ModernBERT-base-shaped sentence-transformers folder with
random weights, for timing only (issue 38 item 6): hidden 768, 22 layers, 12 heads, intermediate
1152 (GeGLU: Wi is 2 x 1152), local window 128 with a global layer every 3rd, rotary bases
160000 (global) and 10000 (local), no biases: answerdotai/ModernBERT-base's config.json, built with
transformers' ModernBertModel and its own initialisation (seeded). The tokenizer is
.models/tiny-modernbert's byte-level BPE (700 ids, ModernBERT's layout), so the embedding table is
700 x 768 instead of 50368 x 768: a lookup, no arithmetic, so the timing is the same. Mean pooling
and Normalize as tiny-modernbert; max_seq_length 512.

    bench/.venv/bin/python bench/make_modernbert_base.py [OUT]   # default bench/work/modernbert-base-shaped

bench/work/ is git-ignored: the folder is generated, never committed."""
import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import ModernBertConfig, ModernBertModel

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / ".models" / "tiny-modernbert"


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "bench" / "work" / "modernbert-base-shaped"
    if (out / "model.safetensors").exists():
        print(f"{out}: already there")
        return 0
    torch.manual_seed(20261206)
    tiny = json.loads((SRC / "config.json").read_text())
    cfg = ModernBertConfig(
        vocab_size=tiny["vocab_size"], hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
        num_attention_heads=12, hidden_activation="gelu", max_position_embeddings=8192, initializer_range=0.02,
        norm_eps=1e-5, norm_bias=False, pad_token_id=tiny["pad_token_id"], eos_token_id=tiny["eos_token_id"],
        bos_token_id=tiny["bos_token_id"], cls_token_id=tiny["cls_token_id"], sep_token_id=tiny["sep_token_id"],
        global_rope_theta=160000.0, local_rope_theta=10000.0, attention_bias=False, attention_dropout=0.0,
        global_attn_every_n_layers=3, local_attention=128, embedding_dropout=0.0, mlp_bias=False, mlp_dropout=0.0,
        classifier_pooling="mean")
    model = ModernBertModel(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "modules.json"):
        shutil.copy(SRC / f, out / f)
    for d in ("1_Pooling", "2_Normalize"):
        shutil.copytree(SRC / d, out / d, dirs_exist_ok=True)
    pool = json.loads((out / "1_Pooling" / "config.json").read_text())
    pool["word_embedding_dimension"] = 768
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pool, indent=2) + "\n")
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512, "do_lower_case": False}) + "\n")
    n = sum(p.numel() for p in model.parameters())
    print(f"{out}: {n / 1e6:.1f} M parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
