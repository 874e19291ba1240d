"""modattn.CrossEncoder against transformers' goldens (tests/fixtures/rerank_golden.json, from
tools/make_rerank_goldens.py): predict() and rank() shaped like sentence-transformers' CrossEncoder,
scores within 1e-5, alone = batched bit for bit, several labels, bad input, the refusal of a model
that is no cross-encoder, and the same scores as `modattn rerank`."""
import json
import os
import subprocess

import pytest

from conftest import FIXTURES, MODELS, TINY

CE, CE3 = MODELS / "tiny-cross-encoder", MODELS / "tiny-cross-encoder-3"


@pytest.fixture(scope="module")
def golden():
    for m in (CE, CE3):
        if not (m / "model.safetensors").is_file():
            pytest.fail(f"{m} is missing: run `make model` first")
    return json.load(open(FIXTURES / "rerank_golden.json"))


def close(a, b):
    return abs(a - b) <= 1e-5 * abs(b) + 1e-6


def test_predict_matches_transformers(modattn, golden):
    import numpy as np

    ce = modattn.CrossEncoder(str(CE))
    assert (ce.num_labels, ce.activation, ce.max_length) == (1, "sigmoid", 128)
    pairs = [tuple(p) for p in golden["pairs"]]
    rows = golden["models"]["tiny-cross-encoder"]["rows"]
    s = ce.predict(pairs)
    assert s.dtype == np.float32 and s.shape == (len(pairs),)
    assert all(close(float(s[i]), r["score"][0]) for i, r in enumerate(rows)), (s, [r["score"] for r in rows])
    raw = ce.predict(pairs, raw=True)
    assert all(close(float(raw[i]), r["logits"][0]) for i, r in enumerate(rows))
    # alone = in a batch of another size, bit for bit; one pair alone is a scalar
    for i, p in enumerate(pairs):
        one = ce.predict(p)
        assert np.float32(one).tobytes() == s[i].tobytes()
    assert ce.predict(pairs, batch_size=3).tobytes() == s.tobytes()
    assert ce.predict(pairs[:2], convert_to_numpy=False) == [float(s[0]), float(s[1])]


def test_several_labels(modattn, golden):
    ce = modattn.CrossEncoder(str(CE3))
    assert ce.labels == ["contradiction", "entailment", "neutral"] and ce.activation == "identity"
    rows = golden["models"]["tiny-cross-encoder-3"]["rows"]
    s = ce.predict([tuple(p) for p in golden["pairs"][:4]])
    assert s.shape == (4, 3)
    assert all(close(float(s[i][k]), rows[i]["score"][k]) for i in range(4) for k in range(3))
    with pytest.raises(ValueError):
        ce.rank("q", ["a", "b"])


def test_rank(modattn):
    ce = modattn.CrossEncoder(str(CE))
    docs = ["Bees make honey.", "The store survives a crash.", "honey bees", "x y z"]
    r = ce.rank("who makes honey", docs, return_documents=True)
    scores = [x["score"] for x in r]
    assert scores == sorted(scores, reverse=True) and sorted(x["corpus_id"] for x in r) == [0, 1, 2, 3]
    assert all(docs[x["corpus_id"]] == x["text"] for x in r)
    assert ce.rank("who makes honey", docs, top_k=2) == [{"corpus_id": x["corpus_id"], "score": x["score"]} for x in r[:2]]
    # the command line gives the same scores
    cli = os.environ.get("MODATTN_CLI")
    if cli:
        out = subprocess.run([cli, "rerank", "--model", str(CE), "--json", "who makes honey", *docs],
                             capture_output=True, text=True, check=True)
        got = {x["index"]: x["score"] for x in json.loads(out.stdout)["results"]}
        assert all(got[x["corpus_id"]] == pytest.approx(x["score"], rel=1e-7) for x in r)


def test_bad_input(modattn):
    ce = modattn.CrossEncoder(str(CE))
    with pytest.raises(TypeError):
        ce.predict([("a", "b", "c")])
    with pytest.raises(TypeError):
        ce.predict([("a", 3)])
    with pytest.raises(ValueError):
        ce.predict([("a", "b")], batch_size=0)
    assert ce.predict([]).shape == (0,)
    with pytest.raises(modattn.UnsupportedError, match="ForSequenceClassification"):
        modattn.CrossEncoder(str(TINY))
    with pytest.raises(modattn.NotFoundError):
        modattn.CrossEncoder(str(MODELS / "no-such-model"))
