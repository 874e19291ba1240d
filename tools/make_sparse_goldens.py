#!/usr/bin/env python3
"""Write tests/fixtures/sparse_golden.json: SPLADE vectors of .models/splade-tiny from
sentence-transformers' SparseEncoder (its default for a BertForMaskedLM: max over the attended tokens
of log(1 + ReLU(MLM logits))), every non-zero weight as {token_id: weight}, for texts of varied
length. Tooling only (/work/main/bench/.venv); the tests read the JSON.

    /work/main/bench/.venv/bin/python tools/make_sparse_goldens.py [MODELS_ROOT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sentence_transformers import SparseEncoder

REPO = Path(__file__).resolve().parent.parent
TEXTS = [
    "who makes honey",
    "Bees make honey from the nectar of flowers.",
    "How does the store survive a crash? It writes a journal before it changes a page.",
    "café naïve résumé 東京",
    "a",
    " ".join(["the quick brown fox jumps over the lazy dog"] * 70),  # over 512 tokens: cut
]


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / ".models"
    m = SparseEncoder(str(root / "splade-tiny"))
    emb = m.encode(TEXTS, batch_size=4, convert_to_tensor=True).to_dense()
    rows = []
    for i, t in enumerate(TEXTS):
        v = emb[i]
        nz = v.nonzero().flatten().tolist()
        rows.append({"text": t, "weights": {str(k): float(v[k]) for k in nz}})
    out = {"model": "splade-tiny", "max_seq_length": m.max_seq_length, "rows": rows}
    path = REPO / "tests" / "fixtures" / "sparse_golden.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"make_sparse_goldens: wrote {path} ({[len(r['weights']) for r in rows]} non-zero weights)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
