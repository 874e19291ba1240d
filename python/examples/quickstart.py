"""Quickstart: load a sentence-transformers model folder, embed two sentences, compare them.

    python python/examples/quickstart.py .models/all-MiniLM-L6-v2

(pip install . first, or PYTHONPATH=build/python from a CMake build.)
"""

import sys

import numpy as np

import modattn


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} MODEL_DIR", file=sys.stderr)
        return 2
    model = modattn.Model(argv[1])
    sentences = ["A man is eating food.", "Someone is having a meal."]
    emb = model.encode(sentences)  # float32 (2, model.dim), like SentenceTransformer.encode
    cosine = float(np.dot(emb[0], emb[1]) / (np.linalg.norm(emb[0]) * np.linalg.norm(emb[1])))
    print(f"modattn {modattn.__version__}, model {model.name}: {model.dim} dimensions")
    print(f"shape: {emb.shape}")
    print(f"cosine: {cosine:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
