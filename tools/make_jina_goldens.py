#!/usr/bin/env python3
"""Goldens of tiny-jina (tests/fixtures/golden_tiny_jina.jsonl): jina_bert's forward written in torch.

    /work/main/bench/.venv/bin/python tools/make_jina_goldens.py [--models-dir .models] [--out-dir tests/fixtures]

transformers has no jina_bert class (jina-embeddings-v2 run remote code, JinaBertModel of
jinaai/jina-bert-implementation), and modattn runs none. So the reference is this file's forward,
written from that published architecture (modeling_bert.py of jina-bert-implementation):

  x = LayerNorm(word[ids] + token_type[0])                      (no position embeddings: ALiBi)
  per layer (JinaBertLayer, post-LN):
    scores = q k^T / sqrt(d) + alibi + mask;  alibi[h, i, j] = -slope[h] * |j - i|
             (JinaBertEncoder.rebuild_alibi_tensor; slopes of _get_alibi_head_slopes, float32)
    x = LayerNorm(x + dense(softmax(scores) v))                 (BertSelfOutput)
    [g | u] = gated_layers(x);  x = layernorm(x + wo(GELU(g) * u))  (JinaBertGLUMLP, "geglu")
  mean pooling over the real tokens, then L2 normalisation (the sentence-transformers modules).

Token ids are the tokenizer's (transformers' AutoTokenizer on the model directory: BertTokenizerFast,
truncation at max_seq_length). Each text is run alone (batch 1), as make_goldens.py's goldens.

Independent cross-checks, asserted before anything is written:
  - the attention against torch's scaled_dot_product_attention with the bias as an explicit float
    mask (another kernel);
  - the slopes against the ALiBi paper's closed form for a power of two (2^(-8k/n)), and for a
    non-power of two its interleaving rule, written out separately;
  - a padded batch of all inputs against each text alone (padding masked as jina does, with the
    dtype's minimum added to the scores): the same vectors (cosine >= 0.999999).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))


def jina_slopes(n: int) -> list:
    """jina-bert-implementation's JinaBertEncoder._get_alibi_head_slopes, as published."""
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    closest = 2 ** math.floor(math.log2(n))
    return pow2(closest) + jina_slopes(2 * closest)[0::2][: n - closest]


def paper_slopes(n: int) -> list:
    """The ALiBi paper's rule, written apart: for n a power of two 2^(-8(k+1)/n); otherwise the
    slopes of the power of two below n, then the odd-indexed terms of 2n's geometric sequence."""
    p = 1 << (n.bit_length() - 1)
    s = [2.0 ** (-8.0 * (k + 1) / p) for k in range(p)]
    if p != n:
        s += [2.0 ** (-8.0 * (2 * k + 1) / (2 * p)) for k in range(n - p)]
    return s


def load(model_dir: Path):
    import torch
    from safetensors.torch import load_file
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["model_type"] == "bert" and cfg["position_embedding_type"] == "alibi", cfg
    assert cfg["feed_forward_type"] == "geglu", cfg["feed_forward_type"]
    w = load_file(str(model_dir / "model.safetensors"))
    w = {k: v.to(torch.float32) for k, v in w.items()}
    return cfg, w


def forward(cfg, w, ids, mask, sdpa: bool = False):
    """ids, mask: [B, S] (mask 1 for real tokens). Returns the last hidden states [B, S, H]."""
    import torch
    import torch.nn.functional as F
    H, nh, I = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"]
    eps = cfg["layer_norm_eps"]
    dh = H // nh
    B, S = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
    x = F.layer_norm(x, (H,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    # JinaBertEncoder.rebuild_alibi_tensor: slopes * -|memory - context|, [1, nh, S, S]
    pos = torch.arange(S)
    rel = torch.abs(pos[None, :] - pos[:, None])[None].expand(nh, -1, -1)
    slopes = torch.Tensor(jina_slopes(nh)) * -1
    alibi = (slopes.unsqueeze(1).unsqueeze(1) * rel).unsqueeze(0)
    # get_extended_attention_mask: (1 - mask) * finfo.min, [B, 1, 1, S]
    ext = (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
    bias = ext + alibi
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}."
        def lin(name, t):
            return F.linear(t, w[p + name + ".weight"], w.get(p + name + ".bias"))
        q, k, v = (lin("attention.self." + n, x).view(B, S, nh, dh).transpose(1, 2) for n in ("query", "key", "value"))
        if sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        else:
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh) + bias
            ctx = torch.matmul(torch.softmax(s, dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(B, S, H)
        x = F.layer_norm(lin("attention.output.dense", ctx) + x, (H,), w[p + "attention.output.LayerNorm.weight"],
                         w[p + "attention.output.LayerNorm.bias"], eps)
        h = F.linear(x, w[p + "mlp.gated_layers.weight"])
        gated, non_gated = h[:, :, :I], h[:, :, I:]
        h = F.gelu(gated) * non_gated
        x = F.layer_norm(lin("mlp.wo", h) + x, (H,), w[p + "mlp.layernorm.weight"], w[p + "mlp.layernorm.bias"], eps)
    return x


def pool(x, mask):
    import torch
    m = mask[:, :, None].to(x.dtype)
    v = (x * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
    return torch.nn.functional.normalize(v, p=2, dim=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-dir", type=Path, default=REPO / ".models")
    ap.add_argument("--out-dir", type=Path, default=REPO / "tests" / "fixtures")
    args = ap.parse_args()
    import numpy as np
    import torch
    import transformers
    from transformers import AutoTokenizer
    from make_goldens import f32_list, multilingual_inputs, second_model_inputs, sha256_file, uniq
    torch.set_num_threads(2)

    for n in (1, 2, 3, 4, 6, 8, 12, 16, 24):
        a, b = jina_slopes(n), paper_slopes(n)
        assert all(abs(x - y) <= 1e-15 * max(1.0, abs(y)) for x, y in zip(a, b)) and len(a) == len(b) == n, (n, a, b)

    mdir = args.models_dir / "tiny-jina"
    cfg, w = load(mdir)
    st = json.loads((mdir / "sentence_bert_config.json").read_text())
    max_len = int(st["max_seq_length"])
    tok = AutoTokenizer.from_pretrained(str(mdir))
    inputs = uniq(second_model_inputs(max_len) + multilingual_inputs())
    # invalid UTF-8 inputs: the text as sentence-transformers sees it (U+FFFD), the bytes kept
    raw = [x if isinstance(x, bytes) else None for x in inputs]
    texts = [x.decode("utf-8", errors="replace") if isinstance(x, bytes) else x for x in inputs]

    rows, single = [], []
    worst_sdpa = 0.0
    with torch.no_grad():
        for t, b in zip(texts, raw):
            full = tok(t, truncation=False, add_special_tokens=True)["input_ids"]
            ids = tok(t, truncation=True, max_length=max_len, add_special_tokens=True)["input_ids"]
            i = torch.tensor([ids], dtype=torch.long)
            m = torch.ones_like(i)
            x = forward(cfg, w, i, m)
            xs = forward(cfg, w, i, m, sdpa=True)
            worst_sdpa = max(worst_sdpa, float((x - xs).abs().max()))
            v = pool(x, m)[0].numpy()
            single.append(v)
            r = {"text": t}
            if b is not None:
                r["bytes_b64"] = base64.b64encode(b).decode("ascii")
            r.update({"ids": [int(z) for z in ids], "truncated": len(full) > max_len, "embedding": f32_list(v)})
            rows.append(r)
        # a padded batch of everything against each alone
        enc = tok(texts, truncation=True, max_length=max_len, padding=True, return_tensors="pt")
        vb = pool(forward(cfg, w, enc["input_ids"], enc["attention_mask"]), enc["attention_mask"]).numpy()
    single = np.stack(single)
    cos = (single * vb).sum(1) / (np.linalg.norm(single, axis=1) * np.linalg.norm(vb, axis=1))
    print(f"make_jina_goldens: {len(texts)} inputs; eager vs SDPA max abs diff {worst_sdpa:.3g}; "
          f"batched vs alone min cosine {cos.min():.9f}", file=sys.stderr)
    assert worst_sdpa < 1e-4, worst_sdpa
    assert cos.min() >= 0.999999, cos.min()

    out = args.out_dir / "golden_tiny_jina.jsonl"
    tmp = out.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    meta_path = args.out_dir / "golden_meta.json"
    meta = json.loads(meta_path.read_text())
    meta["fixtures"]["tiny_jina"] = {
        "file": str(out.relative_to(REPO)), "model_dir": "tiny-jina", "n_inputs": len(rows),
        "n_invalid_utf8": sum(b is not None for b in raw),
        "n_truncated": sum(r["truncated"] for r in rows), "max_seq_length": max_len,
        "embedding_dim": int(single.shape[1]), "normalized": True, "pooling": {"pooling_mode_mean_tokens": True},
        "generator": "tools/make_jina_goldens.py (jina_bert's forward in torch, from jina-bert-implementation's "
                     "published modeling_bert.py; transformers has no jina_bert class)",
        "cross_checks": {"eager_vs_sdpa_max_abs_diff": worst_sdpa, "batched_vs_single_min_cosine": float(cos.min()),
                         "slopes_vs_alibi_paper": "equal for 1, 2, 3, 4, 6, 8, 12, 16, 24 heads"},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "sha256": {fn: sha256_file(mdir / fn) for fn in ("model.safetensors", "tokenizer.json", "config.json")},
        "output_sha256": sha256_file(out),
        "source": "tools/make_tiny_models.py: random untrained jina_bert (seeded, standard library; 2 layers, 6 heads, "
                  "GEGLU, ALiBi), all-MiniLM-L6-v2 tokenizer files; mean pooling, Normalize, max_seq_length 128",
    }
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
