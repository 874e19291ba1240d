"""Model.encode and Model.tokenize against sentence-transformers' goldens (tests/fixtures, made by
tools/make_goldens.py) and against the `modattn embed` command, bit for bit."""

import base64
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES, MODELS, TINY, _need_model

MIN_COSINE = 0.99999


def load_golden(name):
    path = FIXTURES / name
    with path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert rows, f"{path} is empty"
    return rows


def golden_input(row):
    """The exact bytes (invalid UTF-8 inputs) or the str sentence-transformers embedded."""
    return base64.b64decode(row["bytes_b64"]) if "bytes_b64" in row else row["text"]


def as_text(x):
    """What a str-only client passes: invalid UTF-8 replaced as Python's errors="replace" does,
    which is what the library does to the bytes (so the vectors must be equal)."""
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else x


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.fixture(scope="module")
def minilm_golden():
    return load_golden("golden_minilm.jsonl")


@pytest.fixture(scope="module")
def minilm_vectors(model, minilm_golden):
    return model.encode([golden_input(r) for r in minilm_golden])


def test_model_attributes(model, minilm_path):
    assert model.dim == 384
    assert model.max_seq_length == 256
    assert model.name == "all-MiniLM-L6-v2"
    assert model.normalize is True
    assert model.model_type == "bert"
    assert model.num_layers == 6
    assert "mean" in model.pooling
    assert model.device_name == "cpu"
    assert model.precision == "fp32"
    assert model.path == str(minilm_path)
    assert len(model.identity) == 16 and len(model.weights_hash) == 16
    assert model.threads >= 1
    assert "all-MiniLM-L6-v2" in repr(model)


def test_golden_every_input(model, minilm_golden, minilm_vectors):
    """Every input of the minilm golden file: cosine >= 0.99999 with sentence-transformers, and the
    same token ids as Hugging Face."""
    emb = minilm_vectors
    assert emb.dtype == np.float32 and emb.shape == (len(minilm_golden), model.dim)
    want = np.array([r["embedding"] for r in minilm_golden], dtype=np.float64)
    got = emb.astype(np.float64)
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    bad = [(i, float(c)) for i, c in enumerate(cos) if not c >= MIN_COSINE]
    assert not bad, f"inputs below cosine {MIN_COSINE}: {bad[:10]}"
    assert len(cos) == 249 and any("bytes_b64" in r for r in minilm_golden)
    ids = model.tokenize([golden_input(r) for r in minilm_golden])
    diff = [i for i, (a, r) in enumerate(zip(ids, minilm_golden)) if a != r["ids"]]
    assert not diff, f"token ids differ from Hugging Face's for inputs {diff[:10]}"


def cpu_runs(precision):
    """Whether this CPU must run `precision`, decided here from /proc/cpuinfo's flags (not from the
    library, whose detection is what is under test), MODATTN_CPU_DISABLE and ONEDNN_MAX_CPU_ISA
    applied as core/cpu.c and backends/cpu/cpu_gemm.c apply them: (True, "") or (False, why)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError as e:
        return False, f"cannot read /proc/cpuinfo: {e}"
    masked = {x.strip().lower() for x in os.environ.get("MODATTN_CPU_DISABLE", "").split(",") if x.strip()}
    if masked & {"avx", "avx512", "avx512f"}:
        flags -= {f for f in flags if f.startswith("avx512") or f.startswith("amx")}
    if "avx512_bf16" in masked:
        flags -= {"avx512_bf16", "amx_bf16"}
    if "avx512_vnni" in masked:
        flags -= {"avx512_vnni", "amx_int8"}
    if "amx" in masked:
        flags -= {"amx_bf16", "amx_int8"}
    need = {"bf16": ["avx512_bf16"], "int8": ["avx512_vnni"], "bf16x3": ["avx512_bf16", "amx_bf16"]}[precision]
    need += ["avx512bw", "avx512vl"]
    missing = [f for f in need if f not in flags]
    if missing:
        return False, f"this CPU lacks {', '.join(missing)} (or MODATTN_CPU_DISABLE masks it)"
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if precision == "bf16x3" and limit and "AMX" not in limit and limit not in ("ALL", "DEFAULT"):
        return False, f"ONEDNN_MAX_CPU_ISA={limit} keeps oneDNN off AMX"
    return True, ""


@pytest.mark.parametrize("precision,isa,floor", [("bf16", "AVX512_BF16", 0.999), ("int8", "AVX512_VNNI", 0.95),
                                                 ("bf16x3", "AMX-BF16", 0.99999)], ids=["bf16", "int8", "bf16x3"])
def test_precision_modes(modattn, minilm_path, minilm_golden, minilm_vectors, precision, isa, floor):
    """precision='bf16' / 'bf16x3' / 'int8': cosine >= the floor against sentence-transformers' fp32 goldens
    (bf16x3: the exactness bar itself)
    and a batch of one equal to the whole batch bit for bit where the CPU has the instructions (a
    refusal there is a failure); elsewhere refused with the reason, never run in fp32 instead, and
    then reported as a skip with why (ctest runs each precision as its own entry: python_precision_*)."""
    runs, why = cpu_runs(precision)
    if not runs:
        with pytest.raises(modattn.UnsupportedError) as e:
            modattn.Model(minilm_path, precision=precision)
        assert isa in str(e.value) or "oneDNN" in str(e.value), str(e.value)
        pytest.skip(f"{precision} not available here: {why} (the load was refused: {e.value})")
    try:
        m = modattn.Model(minilm_path, precision=precision)
    except modattn.UnsupportedError as e:
        pytest.fail(f"{precision} was refused on a CPU that has the instructions ({isa}): {e}")
    assert m.precision == precision and m.identity != modattn.Model(minilm_path).identity
    texts = [golden_input(r) for r in minilm_golden]
    got = m.encode(texts).astype(np.float64)
    want = np.array([r["embedding"] for r in minilm_golden], dtype=np.float64)
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    print(f"{precision}: min cosine {cos.min():.6f}, mean {cos.mean():.6f}")
    assert cos.min() >= floor
    assert not np.array_equal(got, minilm_vectors.astype(np.float64))  # not fp32 in disguise
    assert np.array_equal(m.encode(texts[:5], batch_size=1), m.encode(texts[:5]))


def test_golden_second_model_not_normalised(modattn, minilm_golden):
    """tiny-bert-cls (CLS pooling, no Normalize): cosine with its golden, and normalize_embeddings."""
    if not (TINY / "modules.json").is_file():
        pytest.fail(f"{TINY} is missing: run `make model`")
    rows = load_golden("golden_tiny_bert_cls.jsonl")
    m = modattn.Model(TINY, threads=1)
    assert m.normalize is False and m.pooling == "cls"
    texts = [golden_input(r) for r in rows]
    emb = m.encode(texts).astype(np.float64)
    want = np.array([r["embedding"] for r in rows], dtype=np.float64)
    cos = (emb * want).sum(1) / (np.linalg.norm(emb, axis=1) * np.linalg.norm(want, axis=1))
    assert cos.min() >= MIN_COSINE, cos.argmin()
    np.testing.assert_allclose(emb, want, rtol=0, atol=1e-4 * np.abs(want).max())
    assert not np.allclose(np.linalg.norm(emb, axis=1), 1.0)
    unit = m.encode(texts[:20], normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(unit.astype(np.float64), axis=1), 1.0, atol=1e-6)
    # False and None leave the model's own output (sentence-transformers does the same)
    assert np.array_equal(bits(m.encode(texts[:20], normalize_embeddings=False)), bits(emb[:20].astype(np.float32)))


def run_cli_embed(cli, model_path, texts):
    """`modattn embed --jsonl -` on texts (str): its vectors, parsed exactly (%.9g round-trips a float32)."""
    payload = "".join(json.dumps(t) + "\n" for t in texts).encode()
    r = subprocess.run([str(cli), "embed", "--model", str(model_path), "--jsonl", "-"], input=payload,
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    lines = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert [x["index"] for x in lines] == list(range(len(texts)))
    return np.array([x["embedding"] for x in lines], dtype=np.float64).astype(np.float32)


def test_equal_to_cli_bit_for_bit(model, minilm_path, minilm_golden, minilm_vectors, cli):
    inputs = [golden_input(r) for r in minilm_golden]
    texts = [as_text(x) for x in inputs]
    from_cli = run_cli_embed(cli, minilm_path, texts)
    assert from_cli.shape == minilm_vectors.shape
    mism = np.nonzero((bits(from_cli) != bits(minilm_vectors)).any(1))[0]
    assert mism.size == 0, f"{mism.size} inputs differ from `modattn embed` (first: {mism[:5]})"
    # the str forms of the invalid-UTF-8 inputs give what their bytes give
    idx = [i for i, x in enumerate(inputs) if isinstance(x, bytes)]
    assert idx
    assert np.array_equal(bits(model.encode([texts[i] for i in idx])), bits(minilm_vectors[idx]))


def test_batching_does_not_change_bits(model, minilm_golden, minilm_vectors):
    texts = [golden_input(r) for r in minilm_golden][:60]
    for bs in (1, 7, 1000):
        assert np.array_equal(bits(model.encode(texts, batch_size=bs)), bits(minilm_vectors[:60])), bs
    # in another order, and one at a time as a single str (shape (dim,) like sentence-transformers)
    rev = model.encode(texts[::-1])
    assert np.array_equal(bits(rev[::-1]), bits(minilm_vectors[:60]))
    one = model.encode(texts[3])
    assert one.shape == (model.dim,) and np.array_equal(bits(one), bits(minilm_vectors[3]))


def test_encode_forms(model):
    empty = model.encode([])
    assert empty.shape == (0, model.dim) and empty.dtype == np.float32
    rows = model.encode(("a tuple", "of texts"), convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == 2 and rows[0].shape == (model.dim,)
    assert np.array_equal(bits(np.stack(rows)), bits(model.encode(["a tuple", "of texts"])))
    # sentence-transformers' keyword name works too
    assert np.array_equal(bits(model.encode(sentences=["x"])), bits(model.encode(["x"])))
    # normalize_embeddings=True on a model that normalises already changes nothing
    assert np.array_equal(bits(model.encode(["x"], normalize_embeddings=True)), bits(model.encode(["x"])))
    # a generator of texts
    assert model.encode(t for t in ["a", "b", "c"]).shape == (3, model.dim)


def test_progress_bar(model, capsys):
    model.encode(["one", "two", "three"], batch_size=2, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "encoded 2/3" in err and "encoded 3/3" in err


def test_decode_wordpiece(model):
    ids = model.tokenize("Hello, world! Don't panic.")
    assert model.decode(ids) == "hello, world! don't panic."
    assert model.decode(ids, skip_special_tokens=False) == "[CLS] hello, world! don't panic. [SEP]"
    assert model.decode([ids, [7592]]) == ["hello, world! don't panic.", "hello"]
    with pytest.raises(Exception, match="outside the vocabulary"):
        model.decode([7592, 10 ** 9])
    with pytest.raises(TypeError, match="int"):
        model.decode([7592, "a"])


def test_decode_bytelevel(modattn):
    """tiny-modernbert's byte-level BPE (the same tokenizer.json as tests/fixtures/tokenizer_bpe_modernbert.json):
    decode equals tokenizers' decode on decode_bpe.jsonl's ModernBERT lines, U+FFFD for cut characters included."""
    m = modattn.Model(_need_model(MODELS / "tiny-modernbert"))
    text = "héllo wörld 日本 — ok"
    assert m.decode(m.tokenize(text)) == text
    assert m.decode(m.tokenize(text), skip_special_tokens=False) == "[CLS]" + text + "[SEP]"
    n = bad = fffd = 0
    with open(os.path.join(FIXTURES, "decode_bpe.jsonl"), encoding="utf-8") as f:
        for line in f:
            j = json.loads(line)
            if j.get("fixture") != "modernbert":
                continue
            n += 1
            fffd += "\ufffd" in j["text"]
            bad += m.decode(j["ids"], skip_special_tokens=j["skip"]) != j["text"]
    assert n > 1500 and fffd > 300 and bad == 0, (n, fffd, bad)


def test_tokenize(model):
    assert model.tokenize("Hello world") == [101, 7592, 2088, 102]
    assert model.tokenize(["Hello world", ""]) == [[101, 7592, 2088, 102], [101, 102]]
    long = model.tokenize("word " * 1000)
    assert len(long) == model.max_seq_length and long[0] == 101 and long[-1] == 102
