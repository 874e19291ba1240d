"""modattn.SparseEncoder against sentence-transformers' SparseEncoder goldens
(tests/fixtures/sparse_golden.json, from tools/make_sparse_goldens.py): encode() gives per text a
{token_id: weight} dict with sentence-transformers' non-zero ids, weights within 1e-5 relative +
5e-6 absolute (fp32's spread, see tests/model/test_sparse.c), alone = batched bit for bit;
max_active_dims / threshold; decode() and similarity(); bad input; the refusal of a model without
an MLM head; and the same vectors as `modattn embed --sparse`."""
import json
import subprocess

import pytest

from conftest import FIXTURES, MODELS, TINY

SP = MODELS / "splade-tiny"


@pytest.fixture(scope="module")
def golden():
    if not (SP / "model.safetensors").is_file():
        pytest.fail(f"{SP} is missing: run `make model` first")
    return json.load(open(FIXTURES / "sparse_golden.json", encoding="utf-8"))


@pytest.fixture(scope="module")
def sp(modattn, golden):
    return modattn.SparseEncoder(str(SP))


def close(a, b):
    return abs(a - b) <= 1e-5 * abs(b) + 5e-6


def test_encode_matches_sentence_transformers(sp, golden):
    assert (sp.vocab_size, sp.max_seq_length, sp.pooling, sp.architecture) == (30522, 512, "max", "BertForMaskedLM")
    texts = [r["text"] for r in golden["rows"]]
    vs = sp.encode(texts)
    assert isinstance(vs, list) and len(vs) == len(texts)
    for v, r in zip(vs, golden["rows"]):
        want = {int(k): w for k, w in r["weights"].items()}
        assert isinstance(v, dict) and set(v) == set(want)
        assert list(v) == sorted(v)
        bad = [k for k in v if not close(v[k], want[k])]
        assert not bad, [(k, v[k], want[k]) for k in bad[:5]]
    # one text alone: one dict, bit for bit the batched one; batch_size changes nothing
    for i, t in enumerate(texts):
        assert sp.encode(t) == vs[i]
    assert sp.encode(texts, batch_size=2) == vs
    assert sp.encode_query(texts[0]) == vs[0] and sp.encode_document(texts[:2]) == vs[:2]


def test_pruning_decode_similarity(sp, golden):
    full = sp.encode(golden["rows"][1]["text"])
    top = sp.encode(golden["rows"][1]["text"], max_active_dims=4)
    heaviest = sorted(full.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    assert top == dict(sorted(heaviest))
    th = sp.encode(golden["rows"][1]["text"], threshold=1.0)
    assert th == {k: w for k, w in full.items() if w >= 1.0} and th
    q = sp.encode("who makes honey")
    dec = sp.decode(q, top_k=3)
    assert [t for t, _ in dec] == ["honey", "makes", "who"] and dec[0][1] == q[6861]
    assert sp.decode([q, q], top_k=1) == [dec[:1], dec[:1]]
    sim = sp.similarity([q, full], q)
    assert sim[0][0] == pytest.approx(sum(w * w for w in q.values()), rel=1e-6)
    assert 0 < sim[1][0] < sim[0][0]


def test_bad_input(modattn, sp):
    with pytest.raises(modattn.InvalidArgumentError):
        sp.encode("x", threshold=-1.0)
    with pytest.raises(modattn.InvalidArgumentError):
        sp.encode("x", max_active_dims=0)
    with pytest.raises(modattn.InvalidArgumentError):
        sp.encode("x", batch_size=0)
    with pytest.raises(TypeError):
        sp.encode(["a", 3])
    with pytest.raises(modattn.InvalidArgumentError):
        sp.convert_ids_to_tokens([30522])
    assert sp.encode([]) == []


def test_not_a_splade_model(modattn):
    with pytest.raises(modattn.UnsupportedError, match="ForMaskedLM"):
        modattn.SparseEncoder(str(TINY))


def test_same_as_cli(sp, cli, golden):
    texts = [r["text"] for r in golden["rows"][:3]]
    out = subprocess.run([cli, "embed", "--sparse", "--model", str(SP), *texts], capture_output=True, text=True,
                         check=True).stdout
    from_cli = [{int(k): w for k, w in json.loads(line)["sparse"].items()} for line in out.splitlines()]
    got = sp.encode(texts)
    # the CLI prints 9 significant digits: equal as float32
    import struct

    def f32(x):
        return struct.unpack("f", struct.pack("f", x))[0]

    assert [{k: f32(w) for k, w in v.items()} for v in got] == [{k: f32(w) for k, w in v.items()} for v in from_cli]
