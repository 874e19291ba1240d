"""Prompts and Matryoshka dimensions in the binding: Model.encode(prompt_name=, prompt=,
truncate_dim=), encode_query, encode_document against sentence-transformers' goldens
(tests/fixtures/golden_prompts.jsonl) on models with prompts made here
(tests/fixtures/prompt_model/make.py); the errors; a Store indexed with a document prompt and cut
dimensions searched with the query prompt."""
import math
import sys

import numpy as np
import pytest

import modattn
from conftest import FIXTURES, MINILM, TINY, _need_model

sys.path.insert(0, str(FIXTURES / "prompt_model"))
import make  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("prompt-models")
    out = {}
    for base, key, cfg in ((MINILM, "minilm", "prompts"), (MINILM, "minilm", "default"), (TINY, "tiny", "prompts")):
        _need_model(base)
        out[(key, cfg)] = modattn.Model(make.make(str(base), cfg, str(d / f"{key}-{cfg}")), device="cpu")
    return out


def cos(a, b):
    return float(np.dot(a, b) / math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b))))


def test_goldens(models):
    n = 0
    for (key, cfg), m in models.items():
        for r in make.goldens(key, cfg):
            kw = {}
            for k in ("prompt_name", "prompt", "truncate_dim"):
                if r[k] is not None:
                    kw[k] = r[k]
            if r["normalize"]:
                kw["normalize_embeddings"] = True
            got = getattr(m, r["call"])(r["text"], **kw)
            want = np.array(r["embedding"], dtype=np.float32)
            assert got.shape == want.shape, (key, cfg, r["call"], kw)
            c = cos(got, want)
            assert c >= 0.99999, (key, cfg, r["call"], kw, r["text"][:30], c)
            nw = float(np.linalg.norm(want))
            assert abs(float(np.linalg.norm(got)) - nw) <= 1e-5 * max(nw, 1.0), (key, cfg, kw, "length")
            # in a list, among others: the same bits
            lst = getattr(m, r["call"])(["another text", r["text"]], **kw)
            assert np.array_equal(lst[1], got)
            n += 1
    assert n >= 80


def test_errors(models):
    m = models[("minilm", "prompts")]
    with pytest.raises(modattn.InvalidArgumentError, match=r'no prompt named "nope".*"instruct"'):
        m.encode("x", prompt_name="nope")
    for bad in (0, 385, -1):
        with pytest.raises(modattn.InvalidArgumentError, match="truncate_dim"):
            m.encode("x", truncate_dim=bad)
    with pytest.raises(TypeError):
        m.encode("x", truncate_dim="64")
    # prompt wins over prompt_name, as in sentence-transformers
    assert np.array_equal(m.encode("x", prompt="query: ", prompt_name="instruct"), m.encode("x", prompt_name="query"))


def test_store(models, tmp_path):
    m = models[("minilm", "default")]  # document "passage: ", query "query: ", truncate_dim 128
    (tmp_path / "docs").mkdir()
    texts = {"a.txt": "The moon pulls on the oceans and makes the tides.",
             "b.txt": "Sourdough bread needs a starter and a long rise."}
    for k, v in texts.items():
        (tmp_path / "docs" / k).write_text(v)
    with modattn.Store(str(tmp_path / "s.db"), m) as s:
        s.index([str(tmp_path / "docs")])
        hits = s.search("why are there tides", k=2, mode="vector")
        assert hits[0]["path"].endswith("a.txt")
        q = m.encode_query("why are there tides")
        d = m.encode_document(texts["a.txt"])
        assert q.shape == (128,) and d.shape == (128,)
        assert abs(hits[0]["cosine"] - float(np.dot(q, d))) < 2e-5
