#!/usr/bin/env python3
"""Write tiny-xlm-roberta, tiny-distilbert, tiny-mpnet, tiny-modernbert, tiny-gte, tiny-gte-hf, tiny-nomic and
tiny-nomic-gptj: small random-weight sentence-transformers
models of the other encoder families modattn runs.

    python3 tools/make_tiny_models.py [--vocab-from .models/all-MiniLM-L6-v2] [--only NAME] [MODELS_DIR]

MODELS_DIR defaults to <repo>/.models. Only the Python standard library, like
tools/make_test_model.py (whose seeded generator and safetensors writer this reuses): the
directories are the same byte for byte everywhere, so tools/setup_model.sh pins their sha256 and
the goldens (tools/make_goldens.py, from transformers + sentence-transformers) are committed.

Each has the tensor names and config.json keys that transformers writes for its family
(XLMRobertaModel, DistilBertModel, MPNetModel, ModernBertModel, NomicBertModel), so transformers loads them with no
missing or unexpected weight:

  name              model_type    tokenizer                         sizes                     pooling
  tiny-xlm-roberta  xlm-roberta   tests/fixtures/tokenizer_unigram  hidden 64, 4x16, 2 layers mean, Normalize
                                  .json (Unigram, Precompiled)      130 positions from pad+1
  tiny-distilbert   distilbert    all-MiniLM-L6-v2's WordPiece      hidden 96, 3x32, 3 layers mean, Normalize
                                                                    (no token types)
  tiny-mpnet        mpnet         all-MiniLM-L6-v2's WordPiece      hidden 64, 4x16, 2 layers mean+max, no Normalize
                                                                    32 relative buckets
  tiny-modernbert   modernbert    tests/fixtures/tokenizer_bpe_     hidden 64, 4x16, 4 layers mean, Normalize
                    (the Hub's    modernbert.json (byte-level BPE,  (global, local, local,
                    config keys)  ModernBERT's layout, 700 ids)     global), window 16, 128 tokens
  tiny-gte          new (the      all-MiniLM-L6-v2's WordPiece      hidden 64, 4x16, 2 layers CLS, Normalize
                    Hub's GTE     (as gte-base-en-v1.5's BERT one)  rotary with NTK factor 2,
                    v1.5 layout)                                    packed QKV, GeGLU, post-LN
  tiny-gte-hf       gte (what     all-MiniLM-L6-v2's WordPiece      hidden 64, 4x16, 2 layers CLS, Normalize
                    transformers'                                   rotary theta 20000 (no scaling),
                    GteModel                                        separate q/k/v, gate/up
                    writes)
  tiny-nomic        nomic_bert    all-MiniLM-L6-v2's WordPiece      hidden 64, 4x16, 2 layers mean, Normalize
                    (the Hub's                                      SwiGLU 96, rotary base 1000
                    keys and transformers')                         vocabulary padded to 30528
  tiny-nomic-gptj   as tiny-nomic, with rotary_emb_interleaved (GPT-J's layout; transformers runs NeoX's
                    only: its goldens come from transformers with nomic's interleaved rotation put in)
  tiny-jina         bert + alibi  all-MiniLM-L6-v2's WordPiece      hidden 96, 6x16, 2 layers mean, Normalize
                    (jina_bert)                                     GEGLU, ALiBi, 128 tokens

Untrained: the vectors mean nothing; they exist so that each family's own parts (position ids
from padding_idx + 1, the absent token types, DistilBERT's names and LayerNorm eps, MPNet's
relative position buckets shared by every layer; ModernBERT's rotary bases, GeGLU, bias-free
pre-LN layers and 16-token local windows) change the output and are checked against transformers.
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

ST_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def pooling(dim: int, mean: bool = True, mx: bool = False) -> dict:
    return {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": mean,
        "pooling_mode_max_tokens": mx,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    }


def modules(normalize: bool) -> list:
    m = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
         {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        m.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    return m


class Tensors:
    def __init__(self, seed: int):
        self.g = Gen(seed)
        self.t: dict = {}

    def put(self, name, shape, std, mean=0.0):
        n = 1
        for d in shape:
            n *= d
        self.t[name] = (list(shape), self.g.uniform(n, std, mean))

    def lin(self, name, out, inp, std_w=0.1, std_b=0.05):
        self.put(name + ".weight", (out, inp), std_w)
        self.put(name + ".bias", (out,), std_b)

    def ln(self, name, dim):
        self.put(name + ".weight", (dim,), 0.1, 1.0)
        self.put(name + ".bias", (dim,), 0.05)


# ---------------------------------------------------------------------------- xlm-roberta

XLMR = dict(name="tiny-xlm-roberta", seed=20261206, H=64, heads=4, layers=2, I=192, max_pos=130, pad=1,
            max_seq=128)


def xlmr(out: Path, vocab_from: Path) -> None:
    c = XLMR
    tok = json.loads((REPO / "tests" / "fixtures" / "tokenizer_unigram.json").read_text(encoding="utf-8"))
    V = len(tok["model"]["vocab"])
    # "<pad>" (id 1) as an added special token, as in XLM-R's own tokenizer.json: transformers adds
    # it from special_tokens_map.json anyway, so the file says what the goldens' tokenizer does
    if not any(a["content"] == "<pad>" for a in tok["added_tokens"]):
        tok["added_tokens"].append({"id": 1, "content": "<pad>", "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": True})
        tok["added_tokens"].sort(key=lambda a: a["id"])
    H, I = c["H"], c["I"]
    cfg = {
        "architectures": ["XLMRobertaModel"], "attention_probs_dropout_prob": 0.1, "bos_token_id": 0,
        "classifier_dropout": None, "eos_token_id": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "hidden_size": H, "initializer_range": 0.02, "intermediate_size": I, "layer_norm_eps": 1e-05,
        "max_position_embeddings": c["max_pos"], "model_type": "xlm-roberta", "num_attention_heads": c["heads"],
        "num_hidden_layers": c["layers"], "pad_token_id": c["pad"], "position_embedding_type": "absolute",
        "torch_dtype": "float32", "type_vocab_size": 1, "use_cache": True, "vocab_size": V,
    }
    t = Tensors(c["seed"])
    t.put("embeddings.word_embeddings.weight", (V, H), 0.5)
    t.put("embeddings.position_embeddings.weight", (c["max_pos"], H), 0.3)
    t.put("embeddings.token_type_embeddings.weight", (1, H), 0.2)
    t.ln("embeddings.LayerNorm", H)
    for i in range(c["layers"]):
        p = f"encoder.layer.{i}."
        t.lin(p + "attention.self.query", H, H, 0.15)
        t.lin(p + "attention.self.key", H, H, 0.15)
        t.lin(p + "attention.self.value", H, H, 0.1)
        t.lin(p + "attention.output.dense", H, H, 0.1)
        t.ln(p + "attention.output.LayerNorm", H)
        t.lin(p + "intermediate.dense", I, H, 0.1)
        t.lin(p + "output.dense", H, I, 0.06)
        t.ln(p + "output.LayerNorm", H)
    t.lin("pooler.dense", H, H, 0.08)
    write_json(out / "config.json", cfg)
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "XLMRobertaTokenizer", "model_max_length": c["max_seq"], "bos_token": "<s>",
        "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "mask_token": "<mask>", "clean_up_tokenization_spaces": True})
    write_json(out / "special_tokens_map.json", {
        "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>",
        "pad_token": "<pad>", "mask_token": "<mask>"})
    finish(out, c, t, modules(True), pooling(H), "XLM-RoBERTa", "tests/fixtures/tokenizer_unigram.json (a "
           "SentencePiece Unigram tokenizer trained by tools/make_unigram_tokenizer.py)")


# ---------------------------------------------------------------------------- distilbert

DISTIL = dict(name="tiny-distilbert", seed=20261207, H=96, heads=3, layers=3, I=256, max_pos=128, max_seq=100)


def distilbert(out: Path, vocab_from: Path) -> None:
    c = DISTIL
    V = copy_wordpiece(out, vocab_from)
    H, I = c["H"], c["I"]
    cfg = {
        "activation": "gelu", "architectures": ["DistilBertModel"], "attention_dropout": 0.1, "dim": H,
        "dropout": 0.1, "hidden_dim": I, "initializer_range": 0.02, "max_position_embeddings": c["max_pos"],
        "model_type": "distilbert", "n_heads": c["heads"], "n_layers": c["layers"], "pad_token_id": 0,
        "qa_dropout": 0.1, "seq_classif_dropout": 0.2, "sinusoidal_pos_embds": False,
        "tie_weights_": True, "torch_dtype": "float32", "vocab_size": V,
    }
    t = Tensors(c["seed"])
    t.put("embeddings.word_embeddings.weight", (V, H), 0.5)
    t.put("embeddings.position_embeddings.weight", (c["max_pos"], H), 0.3)
    t.ln("embeddings.LayerNorm", H)
    for i in range(c["layers"]):
        p = f"transformer.layer.{i}."
        t.lin(p + "attention.q_lin", H, H, 0.15)
        t.lin(p + "attention.k_lin", H, H, 0.15)
        t.lin(p + "attention.v_lin", H, H, 0.1)
        t.lin(p + "attention.out_lin", H, H, 0.1)
        t.ln(p + "sa_layer_norm", H)
        t.lin(p + "ffn.lin1", I, H, 0.1)
        t.lin(p + "ffn.lin2", H, I, 0.06)
        t.ln(p + "output_layer_norm", H)
    write_json(out / "config.json", cfg)
    finish(out, c, t, modules(True), pooling(H), "DistilBERT", "sentence-transformers/all-MiniLM-L6-v2's "
           "(Apache-2.0)")


# ---------------------------------------------------------------------------- mpnet

MPNET = dict(name="tiny-mpnet", seed=20261208, H=64, heads=4, layers=2, I=160, max_pos=130, pad=1, max_seq=128,
             buckets=32)


def mpnet(out: Path, vocab_from: Path) -> None:
    c = MPNET
    V = copy_wordpiece(out, vocab_from)
    H, I = c["H"], c["I"]
    cfg = {
        "architectures": ["MPNetModel"], "attention_probs_dropout_prob": 0.1, "bos_token_id": 0,
        "eos_token_id": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": H,
        "initializer_range": 0.02, "intermediate_size": I, "layer_norm_eps": 1e-05,
        "max_position_embeddings": c["max_pos"], "model_type": "mpnet", "num_attention_heads": c["heads"],
        "num_hidden_layers": c["layers"], "pad_token_id": c["pad"],
        "relative_attention_num_buckets": c["buckets"], "torch_dtype": "float32", "vocab_size": V,
    }
    t = Tensors(c["seed"])
    t.put("embeddings.word_embeddings.weight", (V, H), 0.5)
    t.put("embeddings.position_embeddings.weight", (c["max_pos"], H), 0.3)
    t.ln("embeddings.LayerNorm", H)
    # large enough that every bucket moves the scores by about as much as q.k does
    t.put("encoder.relative_attention_bias.weight", (c["buckets"], c["heads"]), 1.0)
    for i in range(c["layers"]):
        p = f"encoder.layer.{i}."
        t.lin(p + "attention.attn.q", H, H, 0.15)
        t.lin(p + "attention.attn.k", H, H, 0.15)
        t.lin(p + "attention.attn.v", H, H, 0.1)
        t.lin(p + "attention.attn.o", H, H, 0.1)
        t.ln(p + "attention.LayerNorm", H)
        t.lin(p + "intermediate.dense", I, H, 0.1)
        t.lin(p + "output.dense", H, I, 0.06)
        t.ln(p + "output.LayerNorm", H)
    t.lin("pooler.dense", H, H, 0.08)
    write_json(out / "config.json", cfg)
    finish(out, c, t, modules(False), pooling(H, mean=True, mx=True), "MPNet",
           "sentence-transformers/all-MiniLM-L6-v2's (Apache-2.0)")


# ---------------------------------------------------------------------------- modernbert

MODERN = dict(name="tiny-modernbert", seed=20261209, H=64, heads=4, layers=4, I=96, max_pos=512, max_seq=128,
              local=16)


def modernbert(out: Path, vocab_from: Path) -> None:
    c = MODERN
    V, sp = copy_modernbert_bpe(out, c)
    H, I = c["H"], c["I"]
    # the keys of answerdotai/ModernBERT-base's config.json (global_rope_theta, local_attention, ...);
    # the special ids are the tokenizer's, as there ([CLS] bos/cls, [SEP] eos/sep, [PAD] pad)
    cfg = {
        "architectures": ["ModernBertModel"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": sp["[CLS]"], "classifier_activation": "gelu", "classifier_bias": False,
        "classifier_dropout": 0.0, "classifier_pooling": "mean", "cls_token_id": sp["[CLS]"], "decoder_bias": True,
        "deterministic_flash_attn": False, "embedding_dropout": 0.0, "eos_token_id": sp["[SEP]"],
        "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "hidden_activation": "gelu",
        "hidden_size": H, "initializer_cutoff_factor": 2.0, "initializer_range": 0.02, "intermediate_size": I,
        "local_attention": c["local"], "local_rope_theta": 10000.0, "max_position_embeddings": c["max_pos"],
        "mlp_bias": False, "mlp_dropout": 0.0, "model_type": "modernbert", "norm_bias": False, "norm_eps": 1e-05,
        "num_attention_heads": c["heads"], "num_hidden_layers": c["layers"], "pad_token_id": sp["[PAD]"],
        "sep_token_id": sp["[SEP]"], "torch_dtype": "float32", "vocab_size": V,
    }
    t = Tensors(c["seed"])
    t.put("embeddings.tok_embeddings.weight", (V, H), 0.5)
    t.put("embeddings.norm.weight", (H,), 0.1, 1.0)
    for i in range(c["layers"]):
        p = f"layers.{i}."
        if i > 0:  # layer 0's attn_norm is nn.Identity
            t.put(p + "attn_norm.weight", (H,), 0.1, 1.0)
        # q and k large enough that the rotation of each position moves the scores
        t.put(p + "attn.Wqkv.weight", (3 * H, H), 0.2)
        t.put(p + "attn.Wo.weight", (H, H), 0.1)
        t.put(p + "mlp_norm.weight", (H,), 0.1, 1.0)
        t.put(p + "mlp.Wi.weight", (2 * I, H), 0.15)
        t.put(p + "mlp.Wo.weight", (H, I), 0.1)
    t.put("final_norm.weight", (H,), 0.1, 1.0)
    write_json(out / "config.json", cfg)
    finish(out, c, t, modules(True), pooling(H), "ModernBERT",
           "tests/fixtures/tokenizer_bpe_modernbert.json (a byte-level BPE in ModernBERT's layout, trained by "
           "tools/make_bpe_goldens.py), with ModernBERT's tokenizer_config.json and special_tokens_map.json")


# ---------------------------------------------------------------------------- nomic_bert

NOMIC = dict(name="tiny-nomic", seed=20261210, H=64, heads=4, layers=2, I=96, max_pos=512, max_seq=128,
             interleaved=False)
NOMIC_GPTJ = dict(NOMIC, name="tiny-nomic-gptj", interleaved=True)


def nomic(out: Path, vocab_from: Path, c: dict | None = None) -> None:
    c = c or NOMIC
    V = copy_wordpiece(out, vocab_from)
    Vp = (V + 63) // 64 * 64  # nomic pads the vocabulary to a multiple of 64 (pad_vocab_size_multiple)
    H, I = c["H"], c["I"]
    # the keys of nomic-ai/nomic-embed-text-v1.5's config.json (n_embd, rotary_emb_*, ...), which
    # transformers' NomicBertConfig does not read (it would take its defaults, 768 wide): so its own
    # names (hidden_size, ...) are here too, with the same values; modattn checks that they agree
    cfg = {
        "activation_function": "swiglu", "architectures": ["NomicBertModel"], "attn_pdrop": 0.0,
        "bos_token_id": None, "causal": False, "dense_seq_output": True, "embd_pdrop": 0.0, "eos_token_id": None,
        "fused_bias_fc": True, "fused_dropout_add_ln": True, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-12, "max_trained_positions": c["max_pos"], "mlp_fc1_bias": False,
        "mlp_fc2_bias": False, "model_type": "nomic_bert", "n_embd": H, "n_head": c["heads"], "n_inner": I,
        "n_layer": c["layers"], "n_positions": c["max_pos"], "pad_vocab_size_multiple": 64,
        "parallel_block": False, "parallel_block_tied_norm": False, "prenorm": False, "qkv_proj_bias": False,
        "reorder_and_upcast_attn": False, "resid_pdrop": 0.0, "rotary_emb_base": 1000,
        "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": c["interleaved"], "rotary_emb_scale_base": None,
        "rotary_scaling_factor": None, "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
        "summary_activation": None, "summary_first_dropout": 0.0, "summary_proj_to_labels": True,
        "summary_type": "cls_index", "summary_use_proj": True, "torch_dtype": "float32",
        "type_vocab_size": 2, "use_cache": True, "use_flash_attn": True, "use_rms_norm": False,
        "use_xentropy": True, "vocab_size": Vp,
        # transformers' NomicBertConfig names
        "hidden_size": H, "num_attention_heads": c["heads"], "num_hidden_layers": c["layers"],
        "intermediate_size": I, "max_position_embeddings": c["max_pos"], "layer_norm_eps": 1e-12,
        "hidden_act": "silu", "pad_token_id": 0,
        "rope_parameters": {"rope_theta": 1000.0, "rope_type": "default"},
    }
    t = Tensors(c["seed"])
    t.put("embeddings.word_embeddings.weight", (Vp, H), 0.5)
    t.put("embeddings.token_type_embeddings.weight", (2, H), 0.3)
    t.ln("emb_ln", H)
    for i in range(c["layers"]):
        p = f"encoder.layers.{i}."
        # q and k large enough that the rotation of each position moves the scores
        t.put(p + "attn.Wqkv.weight", (3 * H, H), 0.25)
        t.put(p + "attn.out_proj.weight", (H, H), 0.1)
        t.ln(p + "norm1", H)
        t.put(p + "mlp.fc11.weight", (I, H), 0.15)
        t.put(p + "mlp.fc12.weight", (I, H), 0.15)
        t.put(p + "mlp.fc2.weight", (H, I), 0.1)
        t.ln(p + "norm2", H)
    write_json(out / "config.json", cfg)
    finish(out, c, t, modules(True), pooling(H), "NomicBERT" + (" (rotary_emb_interleaved)" if c["interleaved"] else ""),
           "sentence-transformers/all-MiniLM-L6-v2's (Apache-2.0)")


def nomic_gptj(out: Path, vocab_from: Path) -> None:
    nomic(out, vocab_from, NOMIC_GPTJ)


MODERN_SPECIAL = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")


def copy_modernbert_bpe(out: Path, c: dict) -> tuple:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json as answerdotai/ModernBERT-base
    has them (no vocab.txt or merges.txt: a PreTrainedTokenizerFast reads tokenizer.json alone)."""
    src = REPO / "tests" / "fixtures" / "tokenizer_bpe_modernbert.json"
    tok = json.loads(src.read_text(encoding="utf-8"))
    V = len(tok["model"]["vocab"])
    added = {a["content"]: a for a in tok["added_tokens"]}
    sp = {}
    for name in MODERN_SPECIAL:
        if name not in added or tok["model"]["vocab"].get(name) != added[name]["id"]:
            raise SystemExit(f"make_tiny_models: {src}: no special token {name} in both vocab and added_tokens")
        sp[name] = added[name]["id"]
    if max(a["id"] for a in tok["added_tokens"]) >= V:
        raise SystemExit(f"make_tiny_models: {src}: an added token lies outside the vocabulary")
    shutil.copyfile(src, out / "tokenizer.json")
    flags = ("lstrip", "normalized", "rstrip", "single_word")
    write_json(out / "tokenizer_config.json", {
        "added_tokens_decoder": {str(a["id"]): {"content": a["content"], **{k: a[k] for k in flags},
                                                "special": a["special"]} for a in tok["added_tokens"]},
        "clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "mask_token": "[MASK]",
        "model_input_names": ["input_ids", "attention_mask"], "model_max_length": c["max_seq"],
        "pad_token": "[PAD]", "sep_token": "[SEP]", "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "[UNK]"})
    write_json(out / "special_tokens_map.json", {
        key: {"content": name, **{k: added[name][k] for k in flags}}
        for key, name in (("cls_token", "[CLS]"), ("mask_token", "[MASK]"), ("pad_token", "[PAD]"),
                          ("sep_token", "[SEP]"), ("unk_token", "[UNK]"))})
    return V, sp


# ---------------------------------------------------------------------------- gte (model_type "new")

GTE = dict(name="tiny-gte", seed=20261210, H=64, heads=4, layers=2, I=96, max_pos=512, max_seq=128, types=2,
           theta=10000.0, ntk=2.0)
GTE_HF = dict(name="tiny-gte-hf", seed=20261211, H=64, heads=4, layers=2, I=80, max_pos=512, max_seq=128, types=1,
              theta=20000.0)


def gte_hf(out: Path, vocab_from: Path) -> None:
    """transformers 5's own GteModel layout (model_type "gte", as save_pretrained writes it): rope_parameters,
    layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, post_attention_layernorm, post_mlp_layernorm
    (GteConfig has no rotary scaling to set)."""
    c = GTE_HF
    V = copy_wordpiece(out, vocab_from)
    H, I = c["H"], c["I"]
    cfg = {
        "architectures": ["GteModel"], "attention_probs_dropout_prob": 0.0, "classifier_dropout": None,
        "dtype": "float32", "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": H,
        "initializer_range": 0.02, "intermediate_size": I, "layer_norm_eps": 1e-12,
        "max_position_embeddings": c["max_pos"], "model_type": "gte", "num_attention_heads": c["heads"],
        "num_hidden_layers": c["layers"], "pad_token_id": 0,
        "rope_parameters": {"rope_theta": c["theta"], "rope_type": "default"}, "tie_word_embeddings": True,
        "type_vocab_size": c["types"], "vocab_size": V,
    }
    t = Tensors(c["seed"])
    t.put("embeddings.word_embeddings.weight", (V, H), 0.5)
    t.put("embeddings.token_type_embeddings.weight", (c["types"], H), 0.3)
    t.ln("embeddings.LayerNorm", H)
    for i in range(c["layers"]):
        p = f"layers.{i}."
        for n in ("q", "k", "v"):
            t.lin(p + f"self_attn.{n}_proj", H, H, 0.2)
        t.lin(p + "self_attn.o_proj", H, H, 0.1)
        t.ln(p + "post_attention_layernorm", H)
        t.put(p + "mlp.gate_proj.weight", (I, H), 0.15)
        t.put(p + "mlp.up_proj.weight", (I, H), 0.15)
        t.lin(p + "mlp.down_proj", H, I, 0.1)
        t.ln(p + "post_mlp_layernorm", H)
    write_json(out / "config.json", cfg)
    pool = pooling(H, mean=False)
    pool["pooling_mode_cls_token"] = True
    finish(out, c, t, modules(True), pool, "GTE (transformers' GteModel, model_type \"gte\")",
           "sentence-transformers/all-MiniLM-L6-v2's (Apache-2.0)")


def gte(out: Path, vocab_from: Path) -> None:
    """The Hub's layout of Alibaba-NLP/gte-base-en-v1.5 (model_type "new", its remote NewModel): packed
    qkv_proj, up_gate_proj ([up | gate]: act(gate) * up), attn_ln / mlp_ln after each residual, rotary
    positions with rope_scaling {"type": "ntk", "factor": 2.0}, which scales every position."""
    c = GTE
    V = copy_wordpiece(out, vocab_from)
    H, I = c["H"], c["I"]
    cfg = {
        "architectures": ["NewModel"], "attention_probs_dropout_prob": 0.0,
        "auto_map": {"AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",
                     "AutoModel": "Alibaba-NLP/new-impl--modeling.NewModel"},
        "classifier_dropout": None, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": H,
        "initializer_range": 0.02, "intermediate_size": I, "layer_norm_eps": 1e-12, "layer_norm_type": "layer_norm",
        "logn_attention_clip1": False, "logn_attention_scale": False, "max_position_embeddings": c["max_pos"],
        "model_type": "new", "num_attention_heads": c["heads"], "num_hidden_layers": c["layers"], "pack_qkv": True,
        "pad_token_id": 0, "position_embedding_type": "rope", "rope_scaling": {"factor": c["ntk"], "type": "ntk"},
        "rope_theta": c["theta"], "torch_dtype": "float32", "type_vocab_size": c["types"], "unpad_inputs": False,
        "use_memory_efficient_attention": False, "vocab_size": V,
    }
    t = Tensors(c["seed"])
    t.put("embeddings.word_embeddings.weight", (V, H), 0.5)
    t.put("embeddings.token_type_embeddings.weight", (c["types"], H), 0.3)
    t.ln("embeddings.LayerNorm", H)
    for i in range(c["layers"]):
        p = f"encoder.layer.{i}."
        # q and k large enough that the rotation of each position moves the scores
        t.lin(p + "attention.qkv_proj", 3 * H, H, 0.2)
        t.lin(p + "attention.o_proj", H, H, 0.1)
        t.ln(p + "attn_ln", H)
        t.put(p + "mlp.up_gate_proj.weight", (2 * I, H), 0.15)
        t.lin(p + "mlp.down_proj", H, I, 0.1)
        t.ln(p + "mlp_ln", H)
    write_json(out / "config.json", cfg)
    pool = pooling(H, mean=False)
    pool["pooling_mode_cls_token"] = True
    finish(out, c, t, modules(True), pool, "GTE v1.5 (model_type \"new\")",
           "sentence-transformers/all-MiniLM-L6-v2's (Apache-2.0)")

# ---------------------------------------------------------------------------- jina_bert

JINA = dict(name="tiny-jina", seed=20261210, H=96, heads=6, layers=2, I=128, max_pos=512, max_seq=128)
JINA_IMPL = "jinaai/jina-bert-implementation"


def jina(out: Path, vocab_from: Path) -> None:
    """jina-embeddings-v2-small-en's layout (transformers has no class for it: the reference forward is
    tools/make_jina_goldens.py's): model_type "bert", position_embedding_type "alibi" (no position
    table), feed_forward_type "geglu" (mlp.gated_layers [2I, H] without bias, mlp.wo, mlp.layernorm),
    auto_map naming jina-bert-implementation. 6 heads: not a power of two, so both branches of
    jina's ALiBi slopes are used."""
    c = JINA
    V = copy_wordpiece(out, vocab_from)
    H, I = c["H"], c["I"]
    cfg = {
        "_name_or_path": JINA_IMPL, "architectures": ["JinaBertForMaskedLM"],
        "attention_probs_dropout_prob": 0.0, "attn_implementation": None,
        "auto_map": {"AutoConfig": JINA_IMPL + "--configuration_bert.JinaBertConfig",
                     "AutoModel": JINA_IMPL + "--modeling_bert.JinaBertModel",
                     "AutoModelForMaskedLM": JINA_IMPL + "--modeling_bert.JinaBertForMaskedLM",
                     "AutoModelForSequenceClassification": JINA_IMPL + "--modeling_bert.JinaBertForSequenceClassification"},
        "classifier_dropout": None, "emb_pooler": "mean", "feed_forward_type": "geglu",
        "gradient_checkpointing": False, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": H,
        "initializer_range": 0.02, "intermediate_size": I, "layer_norm_eps": 1e-12,
        "max_position_embeddings": c["max_pos"], "model_max_length": c["max_pos"], "model_type": "bert",
        "num_attention_heads": c["heads"], "num_hidden_layers": c["layers"], "pad_token_id": 0,
        "position_embedding_type": "alibi", "torch_dtype": "float32", "type_vocab_size": 2, "use_cache": True,
        "vocab_size": V,
    }
    t = Tensors(c["seed"])
    t.put("embeddings.word_embeddings.weight", (V, H), 0.5)
    t.put("embeddings.token_type_embeddings.weight", (2, H), 0.3)
    t.ln("embeddings.LayerNorm", H)
    for i in range(c["layers"]):
        p = f"encoder.layer.{i}."
        # q and k large enough that the scores compete with the ALiBi bias
        t.lin(p + "attention.self.query", H, H, 0.2)
        t.lin(p + "attention.self.key", H, H, 0.2)
        t.lin(p + "attention.self.value", H, H, 0.1)
        t.lin(p + "attention.output.dense", H, H, 0.1)
        t.ln(p + "attention.output.LayerNorm", H)
        t.put(p + "mlp.gated_layers.weight", (2 * I, H), 0.15)
        t.lin(p + "mlp.wo", H, I, 0.1)
        t.ln(p + "mlp.layernorm", H)
    t.lin("pooler.dense", H, H, 0.08)
    write_json(out / "config.json", cfg)
    finish(out, c, t, modules(True), pooling(H), "jina_bert (jina-embeddings-v2 layout: ALiBi, GEGLU)",
           "sentence-transformers/all-MiniLM-L6-v2's (Apache-2.0)")


# ---------------------------------------------------------------------------- qwen3, qwen2

QWEN3 = dict(name="tiny-qwen3", seed=20261210, H=64, heads=4, kv_heads=2, head_dim=32, layers=3, I=96, max_pos=512,
             max_seq=128, theta=10000.0)
QWEN2 = dict(name="tiny-qwen2", seed=20261211, H=64, heads=4, kv_heads=1, head_dim=16, layers=2, I=80, max_pos=512,
             max_seq=96, theta=10000.0)
# Qwen3-Embedding's config_sentence_transformers.json prompts (its query instruction)
QWEN_PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:",
                "document": ""}


def qwen(out: Path, c: dict, q3: bool) -> None:
    V = copy_qwen_bpe(out, c)
    H, I, D, nh, kvh = c["H"], c["I"], c["head_dim"], c["heads"], c["kv_heads"]
    # the keys of Qwen/Qwen3-Embedding-0.6B's config.json (rope_theta, rope_scaling null, sliding_window null,
    # use_sliding_window false, tie_word_embeddings true); Qwen2's without head_dim and attention_bias
    cfg = {
        "architectures": ["Qwen3Model" if q3 else "Qwen2Model"], "attention_dropout": 0.0, "bos_token_id": 0,
        "eos_token_id": 0, "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
        "intermediate_size": I, "max_position_embeddings": c["max_pos"], "max_window_layers": c["layers"],
        "model_type": "qwen3" if q3 else "qwen2", "num_attention_heads": nh, "num_hidden_layers": c["layers"],
        "num_key_value_heads": kvh, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": c["theta"],
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True,
        "use_sliding_window": False, "vocab_size": V,
    }
    if q3:
        cfg["attention_bias"] = False
        cfg["head_dim"] = D
    t = Tensors(c["seed"])
    t.put("embed_tokens.weight", (V, H), 0.5)
    for i in range(c["layers"]):
        p = f"layers.{i}."
        t.put(p + "input_layernorm.weight", (H,), 0.1, 1.0)
        # q and k large enough that the rotation of each position moves the scores
        for n, rows, std in (("q", nh * D, 0.25), ("k", kvh * D, 0.25), ("v", kvh * D, 0.15)):
            t.put(p + f"self_attn.{n}_proj.weight", (rows, H), std)
            if not q3:
                t.put(p + f"self_attn.{n}_proj.bias", (rows,), 0.1)
        t.put(p + "self_attn.o_proj.weight", (H, nh * D), 0.1)
        if q3:
            t.put(p + "self_attn.q_norm.weight", (D,), 0.2, 1.0)
            t.put(p + "self_attn.k_norm.weight", (D,), 0.2, 1.0)
        t.put(p + "post_attention_layernorm.weight", (H,), 0.1, 1.0)
        t.put(p + "mlp.gate_proj.weight", (I, H), 0.15)
        t.put(p + "mlp.up_proj.weight", (I, H), 0.15)
        t.put(p + "mlp.down_proj.weight", (H, I), 0.1)
    t.put("norm.weight", (H,), 0.1, 1.0)
    write_json(out / "config.json", cfg)
    pool = pooling(H, mean=False)
    pool["pooling_mode_lasttoken"] = True
    write_json(out / "config_sentence_transformers.json", {
        "prompts": QWEN_PROMPTS, "default_prompt_name": None, "similarity_fn_name": "cosine"})
    finish(out, c, t, modules(True), pool, "Qwen3 decoder (QK-norm, GQA)" if q3 else "Qwen2 decoder (q/k/v biases, MQA)",
           "tests/fixtures/tokenizer_bpe_qwen2.json (a byte-level BPE in Qwen2/Qwen3's layout, trained by "
           "tools/make_bpe_goldens.py) with Qwen3-Embedding's post-processor (TemplateProcessing appending "
           "<|endoftext|>) and tokenizer_config.json (left padding)")


def qwen3(out: Path, vocab_from: Path) -> None:
    qwen(out, QWEN3, True)


def qwen2(out: Path, vocab_from: Path) -> None:
    qwen(out, QWEN2, False)


def copy_qwen_bpe(out: Path, c: dict) -> int:
    """tokenizer.json as Qwen/Qwen3-Embedding-0.6B has it: the Qwen2 layout, its post-processor a
    TemplateProcessing that appends <|endoftext|> to every text (last-token pooling reads it)."""
    src = REPO / "tests" / "fixtures" / "tokenizer_bpe_qwen2.json"
    tok = json.loads(src.read_text(encoding="utf-8"))
    V = len(tok["model"]["vocab"])
    added = {a["content"]: a for a in tok["added_tokens"]}
    eos = "<|endoftext|>"
    if eos not in added:
        raise SystemExit(f"make_tiny_models: {src}: no {eos} in added_tokens")
    eid = added[eos]["id"]
    V = max(V, max(a["id"] for a in tok["added_tokens"]) + 1)
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": eos, "type_id": 1}}],
        "special_tokens": {eos: {"id": eos, "ids": [eid], "tokens": [eos]}}}
    write_json(out / "tokenizer.json", tok)
    flags = ("lstrip", "normalized", "rstrip", "single_word")
    write_json(out / "tokenizer_config.json", {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {str(a["id"]): {"content": a["content"], **{k: a[k] for k in flags},
                                                "special": a["special"]} for a in tok["added_tokens"]},
        "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": eos, "errors": "replace",
        "model_max_length": c["max_seq"], "pad_token": eos, "padding_side": "left", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None})
    write_json(out / "special_tokens_map.json", {
        "eos_token": {"content": eos, **{k: added[eos][k] for k in flags}},
        "pad_token": {"content": eos, **{k: added[eos][k] for k in flags}}})
    return V


# ---------------------------------------------------------------------------- common

def copy_wordpiece(out: Path, src: Path) -> int:
    for f in ST_FILES:
        if not (src / f).is_file():
            raise SystemExit(f"make_tiny_models: {src / f} is missing (run tools/setup_model.sh for "
                             "all-MiniLM-L6-v2 first)")
        shutil.copyfile(src / f, out / f)
    return sum(1 for _ in open(src / "vocab.txt", encoding="utf-8"))


def finish(out: Path, c: dict, t: Tensors, mods: list, pool: dict, family: str, tok_note: str) -> None:
    write_json(out / "modules.json", mods)
    write_json(out / "sentence_bert_config.json", {"max_seq_length": c["max_seq"], "do_lower_case": False})
    write_json(out / "1_Pooling" / "config.json", pool)
    if any(m["type"].endswith("Normalize") for m in mods):
        (out / "2_Normalize").mkdir(exist_ok=True)
    (out / "README.md").write_text(
        f"# {c['name']}\n\nA test model for modattn, written by tools/make_tiny_models.py (seed {c['seed']}) "
        f"with the Python standard library: a {family} with random, untrained weights (hidden {c['H']}, "
        f"{c['heads']} heads, {c['layers']} layers). Its embeddings mean nothing. Tokenizer: {tok_note}.\n",
        encoding="utf-8")
    tmp = out / "model.safetensors.tmp"
    write_safetensors(tmp, t.t)
    os.replace(tmp, out / "model.safetensors")
    print(f"make_tiny_models: wrote {out}", file=sys.stderr)


MODELS = {"tiny-xlm-roberta": xlmr, "tiny-distilbert": distilbert, "tiny-mpnet": mpnet, "tiny-modernbert": modernbert,
          "tiny-gte": gte, "tiny-gte-hf": gte_hf, "tiny-nomic": nomic, "tiny-nomic-gptj": nomic_gptj, "tiny-jina": jina,
          "tiny-qwen3": qwen3, "tiny-qwen2": qwen2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path, default=REPO / ".models")
    ap.add_argument("--vocab-from", type=Path, default=REPO / ".models" / "all-MiniLM-L6-v2")
    ap.add_argument("--only", choices=sorted(MODELS))
    args = ap.parse_args()
    for name, fn in MODELS.items():
        if args.only and args.only != name:
            continue
        d = args.out / name
        d.mkdir(parents=True, exist_ok=True)
        fn(d, args.vocab_from)
    return 0


if __name__ == "__main__":
    sys.exit(main())
