#!/usr/bin/env python3
"""Write tests/fixtures/golden_prompts.jsonl: prompts and Matryoshka dimensions as sentence-transformers
applies them, for modattn's tests (tests/model/test_prompts.c, the CLI, server and Python tests).

    bench/.venv/bin/python tools/make_prompt_goldens.py [--models-dir .models] [--out tests/fixtures/golden_prompts.jsonl]

The models with prompts are made the way the tests make them (tools/prompt_model.sh): a folder of
links to every file of .models/all-MiniLM-L6-v2 (or tiny-bert-cls) but config_sentence_transformers.json,
which is one of tests/fixtures/prompt_model/:
  config_sentence_transformers.json   prompts query / passage / instruct, no default_prompt_name
  config_default.json                 prompts query / passage, default_prompt_name "query", truncate_dim 128

One JSON object per line:
  {"model": "minilm" | "tiny",         the base model
   "config": "prompts" | "default",    which config_sentence_transformers.json
   "call": "encode" | "encode_query" | "encode_document",
   "prompt_name": str|null, "prompt": str|null, "truncate_dim": int|null,
   "normalize": bool,                  normalize_embeddings= (true for a model with a Normalize module:
                                       what modattn does after cutting dimensions)
   "text": str, "tokens": int,         word pieces fed to the model, the prompt's included
   "embedding": [float]}               the call's output, batch_size=1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

TEXTS = [
    "how do I bake sourdough bread at home?",
    "The quick brown fox jumps over the lazy dog.",
    "Pâte à choux, naïve café — Ünïcödé text with accents.",
    "",
    "search engines rank documents by relevance " * 40,  # past max_seq_length with any prompt
]


def make_model(base: Path, config: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for e in base.iterdir():
        if e.name == "config_sentence_transformers.json":
            continue
        os.symlink(e.resolve(), dest / e.name)
    shutil.copy(config, dest / "config_sentence_transformers.json")
    return dest


def f32_list(vec) -> list:
    import numpy as np
    return [float(str(np.float32(v))) for v in vec]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=".models")
    ap.add_argument("--out", default="tests/fixtures/golden_prompts.jsonl")
    a = ap.parse_args()
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(2)
    fx = Path("tests/fixtures/prompt_model")
    cases = [
        # (call, prompt_name, prompt, truncate_dim)
        ("encode", None, None, None),
        ("encode_query", None, None, None),
        ("encode_document", None, None, None),
        ("encode", "instruct", None, None),
        ("encode", None, "Represent this sentence for searching relevant passages: ", None),
        ("encode", None, "", None),
        ("encode_query", None, None, 64),
        ("encode", None, None, 200),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for base_name, key in (("all-MiniLM-L6-v2", "minilm"), ("tiny-bert-cls", "tiny")):
            base = Path(a.models_dir) / base_name
            for cfg_name, cfg_file in (("prompts", "config_sentence_transformers.json"), ("default", "config_default.json")):
                if key == "tiny" and cfg_name == "default":
                    continue
                d = make_model(base, fx / cfg_file, Path(tmp) / f"{key}-{cfg_name}")
                m = SentenceTransformer(str(d), device="cpu")
                normalize = any(type(mod).__name__ == "Normalize" for mod in m)
                dim = m.get_sentence_embedding_dimension()
                my_cases = cases if cfg_name == "prompts" else [
                    ("encode", None, None, None), ("encode_query", None, None, None),
                    ("encode_document", None, None, None), ("encode", None, "", None), ("encode", None, None, 384)]
                if key == "tiny":
                    my_cases = [c for c in cases if c[0] != "encode" or c[2] is None] + [("encode", None, None, 7)]
                for call, pname, prompt, tdim in my_cases:
                    if tdim and tdim > dim:
                        continue
                    for t in TEXTS:
                        kw = {}
                        if pname is not None:
                            kw["prompt_name"] = pname
                        if prompt is not None:
                            kw["prompt"] = prompt
                        if tdim is not None:
                            kw["truncate_dim"] = tdim
                        fn = getattr(m, call)
                        e = fn([t], batch_size=1, convert_to_numpy=True, normalize_embeddings=normalize, **kw)[0]
                        # the prompt the call applied, to count the word pieces it fed
                        p = prompt
                        if p is None:
                            n = pname
                            if n is None and call == "encode_query" and "query" in m.prompts:
                                n = "query"
                            if n is None and call == "encode_document":
                                n = next((c for c in ("document", "passage", "corpus") if c in m.prompts), None)
                            if n is None:
                                n = m.default_prompt_name
                            p = m.prompts.get(n) if n else None
                        full = (p or "") + t
                        ids = m.preprocess([full])["input_ids"][0].tolist()
                        rows.append({"model": key, "config": cfg_name, "call": call, "prompt_name": pname,
                                     "prompt": prompt, "truncate_dim": tdim, "normalize": normalize, "text": t,
                                     "tokens": len(ids), "embedding": f32_list(e)})
                # without normalize_embeddings: sentence-transformers' truncate_dim alone (not unit length)
                if key == "minilm" and cfg_name == "prompts":
                    e = m.encode([TEXTS[0]], batch_size=1, convert_to_numpy=True, truncate_dim=64)[0]
                    import numpy as np
                    print(f"minilm truncate_dim=64 without normalize_embeddings: norm {np.linalg.norm(e):.6f}")
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{a.out}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
