"""modattn.attention on numpy arrays against an fp64 oracle written here, within the conformance
suite's tolerance (attn/conformance.c): per element |O - oracle| <= 2 * (largest error of a naive fp32
implementation over three summation orders) + 1e-6 + one fp32 ulp of the oracle's value; the same for
the LSE. Also explain, check, backends, and the errors."""

import math

import numpy as np
import pytest


# ----------------------------------------------------------------------------- the oracle


def visible(B, Sq, Sk, causal, kv_lens):
    """[B, Sq, Sk] bool: query i sees key j iff j < L_b and (not causal or j <= i + L_b - Sq)."""
    L = np.full(B, Sk) if kv_lens is None else np.asarray(kv_lens)
    j = np.arange(Sk)[None, None, :]
    i = np.arange(Sq)[None, :, None]
    lb = L[:, None, None]
    vis = j < lb
    if causal:
        vis = vis & (j <= i + lb - Sq)
    return vis


def scores_of(q, k, scale, mask, causal, kv_lens, dtype, order=0):
    """scale * q.k^T (+ mask), -inf where invisible, in dtype; order: the dot's summation order
    (0 forward, 1 reverse, 2 eight interleaved partial sums) as attn/conformance.c's naive kernel."""
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    G = Hq // Hkv
    kk = np.repeat(k, G, axis=1).astype(dtype)
    qq = q.astype(dtype)
    if dtype == np.float64:
        dot = np.einsum("bhid,bhjd->bhij", qq, kk)
    else:
        prod = qq[:, :, :, None, :] * kk[:, :, None, :, :]  # [B, H, Sq, Sk, D], each product rounded
        if order == 2:
            part = np.zeros(prod.shape[:-1] + (8,), dtype)
            for e in range(D):
                part[..., e % 8] += prod[..., e]
            p = part
            dot = ((p[..., 0] + p[..., 4]) + (p[..., 1] + p[..., 5])) + ((p[..., 2] + p[..., 6]) + (p[..., 3] + p[..., 7]))
        else:
            dot = np.zeros(prod.shape[:-1], dtype)
            for e in (range(D - 1, -1, -1) if order == 1 else range(D)):
                dot += prod[..., e]
    s = dtype(scale) * dot
    if mask is not None:
        m = np.broadcast_to(mask.astype(dtype), (B, Hq, Sq, Sk))
        s = np.where(m == -np.inf, -np.inf, s + m)
    vis = visible(B, Sq, Sk, causal, kv_lens)[:, None, :, :]
    return np.where(vis, s, -np.inf)


def softmax_pv(s, v, Hq, dtype, reverse=False):
    """O and LSE from scores; rows with no visible key: O = 0, LSE = -inf. Sums over keys run in
    order (forward or reverse) in dtype."""
    G = Hq // v.shape[1]
    vv = np.repeat(v, G, axis=1).astype(dtype)
    mx = s.max(-1, keepdims=True)
    empty = ~np.isfinite(mx)
    mx = np.where(empty, 0, mx)
    p = np.where(np.isfinite(s), np.exp(s - mx), 0).astype(dtype)
    if dtype == np.float64:
        ssum = p.sum(-1, keepdims=True)
        o = np.einsum("bhij,bhjd->bhid", p, vv)
    else:
        Sk = s.shape[-1]
        ssum = np.zeros(s.shape[:-1] + (1,), dtype)
        o = np.zeros(s.shape[:-1] + (vv.shape[-1],), dtype)
        for j in (range(Sk - 1, -1, -1) if reverse else range(Sk)):
            ssum[..., 0] += p[..., j]
            o += p[..., j, None] * vv[:, :, None, j, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(empty, 0, o / np.where(empty, 1, ssum))
        lse = np.where(empty[..., 0], -np.inf, mx[..., 0] + np.log(np.where(empty, 1, ssum))[..., 0])
    return o.astype(dtype), lse.astype(dtype)


def oracle(q, k, v, scale, mask=None, causal=False, kv_lens=None):
    s = scores_of(q.astype(np.float64), k.astype(np.float64), scale, mask, causal, kv_lens, np.float64)
    return softmax_pv(s, v.astype(np.float64), q.shape[1], np.float64)


def naive_errors(q, k, v, scale, mask, causal, kv_lens, o64, l64):
    """The largest error of the naive fp32 kernel over its three orders (o, lse)."""
    eo = el = 0.0
    for order in range(3):
        s = scores_of(q, k, scale, mask, causal, kv_lens, np.float32, order)
        o, lse = softmax_pv(s, v, q.shape[1], np.float32, reverse=order == 1)
        eo = max(eo, float(np.abs(o.astype(np.float64) - o64).max(initial=0)))
        fin = np.isfinite(l64)
        el = max(el, float(np.abs(lse.astype(np.float64)[fin] - l64[fin]).max(initial=0)))
    return eo, el


def check_close(got, want, naive_err, what):
    assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    assert not np.isnan(got).any(), f"{what}: NaN"
    inf = np.isinf(want)
    assert np.array_equal(np.isinf(got), inf) and np.array_equal(got[inf], want[inf].astype(np.float32)), what
    w = want[~inf]
    ulp = np.spacing(np.abs(w).astype(np.float32)).astype(np.float64)
    tol = 2 * naive_err + 1e-6 + ulp
    err = np.abs(got[~inf].astype(np.float64) - w)
    ratio = float((err / tol).max(initial=0))
    assert ratio <= 1.0, f"{what}: max |err|/tol = {ratio:.3f} (naive fp32 error {naive_err:.3g})"
    return ratio


def cpu_backends(modattn):
    return ["auto"] + [b["name"] for b in modattn.backends(details=True) if b["device"] == "cpu" and b["available"]]


def run_case(modattn, q, k, v, *, causal=False, mask=None, kv_lens=None, scale=None, backends=None):
    D = q.shape[-1]
    sc = scale if scale is not None else 1.0 / math.sqrt(D)
    o64, l64 = oracle(q, k, v, sc, mask, causal, kv_lens)
    eo, el = naive_errors(q, k, v, sc, mask, causal, kv_lens, o64, l64)
    for be in backends or cpu_backends(modattn):
        out, lse = modattn.attention(q, k, v, causal=causal, mask=mask, kv_lens=kv_lens, scale=scale,
                                     return_lse=True, backend=be)
        check_close(out, o64, eo, f"{be}: out")
        check_close(lse, l64, el, f"{be}: lse")
        alone = modattn.attention(q, k, v, causal=causal, mask=mask, kv_lens=kv_lens, scale=scale, backend=be)
        assert np.array_equal(alone, out), f"{be}: out differs with and without return_lse"
    return o64, l64


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- against the oracle


def test_plain(modattn, rng):
    run_case(modattn, rand(rng, 2, 3, 13, 16), rand(rng, 2, 3, 17, 16), rand(rng, 2, 3, 17, 16))


def test_causal_bottom_right(modattn, rng):
    # Sq < Sk: query i sees keys j <= i + (Sk - Sq)
    q, k, v = rand(rng, 1, 2, 5, 8), rand(rng, 1, 2, 11, 8), rand(rng, 1, 2, 11, 8)
    o64, _ = run_case(modattn, q, k, v, causal=True)
    # the last query sees every key: equal to the same row without causality
    full = modattn.attention(q, k, v)
    out = modattn.attention(q, k, v, causal=True)
    np.testing.assert_allclose(out[:, :, -1], full[:, :, -1], rtol=0, atol=1e-6)
    # Sq > Sk: the first Sq - Sk queries see no key: zeros, LSE -inf
    out, lse = modattn.attention(rand(rng, 1, 2, 6, 8), k[:, :, :3], v[:, :, :3], causal=True, return_lse=True)
    assert np.all(out[:, :, :3] == 0) and np.all(lse[:, :, :3] == -np.inf) and np.isfinite(lse[:, :, 3:]).all()


def test_gqa_and_dv(modattn, rng):
    # 8 query heads over 2 key/value heads, Dv != D
    run_case(modattn, rand(rng, 2, 8, 9, 16), rand(rng, 2, 2, 12, 16), rand(rng, 2, 2, 12, 24), causal=True)
    # MQA
    run_case(modattn, rand(rng, 1, 4, 7, 8), rand(rng, 1, 1, 7, 8), rand(rng, 1, 1, 7, 8))


def test_kv_lens(modattn, rng):
    q, k, v = rand(rng, 3, 2, 6, 8), rand(rng, 3, 2, 10, 8), rand(rng, 3, 2, 10, 8)
    run_case(modattn, q, k, v, kv_lens=[10, 4, 0])
    run_case(modattn, q, k, v, kv_lens=np.array([7, 10, 6], dtype=np.int64), causal=True)
    out, lse = modattn.attention(q, k, v, kv_lens=[10, 4, 0], return_lse=True)
    assert np.all(out[2] == 0) and np.all(lse[2] == -np.inf)
    # keys past kv_lens do not matter
    k2, v2 = k.copy(), v.copy()
    k2[1, :, 4:] = 1e4
    v2[1, :, 4:] = np.nan
    assert np.array_equal(modattn.attention(q, k2, v2, kv_lens=[10, 4, 0]), out)


def test_mask_and_scale(modattn, rng):
    q, k, v = rand(rng, 2, 2, 5, 8), rand(rng, 2, 2, 6, 8), rand(rng, 2, 2, 6, 8)
    mask = rand(rng, 2, 2, 5, 6)
    mask[0, 1, 2, :] = -np.inf  # a row that sees nothing
    mask[1, 0, :, 3] = -np.inf
    run_case(modattn, q, k, v, mask=mask, scale=0.3)
    # broadcast (1, 1, Sq, Sk) and the 2-D form, and a bool mask (True: may attend)
    m2 = rand(rng, 5, 6)
    run_case(modattn, q, k, v, mask=m2[None, None])
    assert np.array_equal(modattn.attention(q, k, v, mask=m2), modattn.attention(q, k, v, mask=m2[None, None]))
    allowed = rng.random((5, 6)) > 0.3
    additive = np.where(allowed, 0, -np.inf).astype(np.float32)
    assert np.array_equal(modattn.attention(q, k, v, mask=allowed), modattn.attention(q, k, v, mask=additive))


def test_strided_views(modattn, rng):
    # (B, S, H, D) memory seen as (B, H, S, D): a transposed view, read in place
    B, S, H, D = 2, 9, 3, 16
    qs, ks, vs = rand(rng, B, S, H, D), rand(rng, B, S, H, D), rand(rng, B, S, H, D)
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (qs, ks, vs))
    assert not q.flags.c_contiguous
    o64, _ = run_case(modattn, q, k, v, causal=True)
    np.testing.assert_array_equal(modattn.attention(q, k, v, causal=True),
                                  modattn.attention(*(np.ascontiguousarray(x) for x in (q, k, v)), causal=True))
    # a non-unit innermost stride, a sliced batch, a broadcast (stride 0) key/value, negative strides
    big = rand(rng, 4, 3, 9, 32)
    run_case(modattn, big[::2, :, :, ::2], big[1::2, :, :, ::2], big[:2, :, :, 1::2])
    kb = np.broadcast_to(rand(rng, 1, 1, 9, 16), (2, 3, 9, 16))
    run_case(modattn, rand(rng, 2, 3, 4, 16), kb, kb)
    qr = rand(rng, 1, 2, 5, 8)[:, :, ::-1]
    run_case(modattn, qr, rand(rng, 1, 2, 5, 8), rand(rng, 1, 2, 5, 8), backends=["auto"])


def test_empty_shapes(modattn, rng):
    out = modattn.attention(rand(rng, 1, 2, 0, 8), rand(rng, 1, 2, 5, 8), rand(rng, 1, 2, 5, 8))
    assert out.shape == (1, 2, 0, 8)
    out, lse = modattn.attention(rand(rng, 1, 2, 3, 8), rand(rng, 1, 2, 0, 8), rand(rng, 1, 2, 0, 8), return_lse=True)
    assert np.all(out == 0) and np.all(lse == -np.inf)


# ----------------------------------------------------------------------------- errors


def test_wrong_arrays(modattn, rng):
    q, k, v = rand(rng, 1, 2, 3, 4), rand(rng, 1, 2, 3, 4), rand(rng, 1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"q: expected a float32 array, got float64"):
        modattn.attention(q.astype(np.float64), k, v)
    with pytest.raises(ValueError, match=r"k: expected a float32 array, got int32"):
        modattn.attention(q, k.astype(np.int32), v)
    with pytest.raises(ValueError, match=r"v: expected a float32 array, got float16"):
        modattn.attention(q, k, v.astype(np.float16))
    with pytest.raises(ValueError, match=r"q: expected 4 dimensions \(B, H, S, D\), got 3"):
        modattn.attention(q[0], k, v)
    with pytest.raises(ValueError, match=r"k: shape\[3\] \(D\) is 5, expected 4"):  # the library's message
        modattn.attention(q, rand(rng, 1, 2, 3, 5), v)
    with pytest.raises(ValueError, match=r"not a multiple"):
        modattn.attention(rand(rng, 1, 3, 3, 4), k, v)
    with pytest.raises(ValueError, match=r"kv_lens\[0\] = 5 is outside"):
        modattn.attention(q, k, v, kv_lens=[5])
    with pytest.raises(ValueError, match=r"kv_lens has 2 entries, expected B = 1"):
        modattn.attention(q, k, v, kv_lens=[1, 2])
    with pytest.raises(ValueError, match=r"mask"):
        modattn.attention(q, k, v, mask=rand(rng, 3, 5))
    with pytest.raises(ValueError, match=r"stride.*not a multiple of 4"):
        raw = np.zeros(1 * 2 * 3 * 4 * 4 + 2, np.uint8)[2:].view(np.float32)  # misaligned: still itemsize 4
        odd = np.lib.stride_tricks.as_strided(raw, (1, 2, 3, 4), (96, 48, 16, 2))
        modattn.attention(odd, k, v)
    with pytest.raises(TypeError, match=r"q must be a float32 numpy array, not list"):
        modattn.attention([[1.0]], k, v)
    with pytest.raises(ValueError, match=r"no implementation named 'bogus'"):
        modattn.attention(q, k, v, backend="bogus")
    with pytest.raises(ValueError, match=r"scale"):
        modattn.attention(q, k, v, scale=float("nan"))
    # the errors are modattn.Error too, with the library's status
    with pytest.raises(modattn.InvalidArgumentError) as ei:
        modattn.attention(q, rand(rng, 1, 2, 3, 5), v)
    assert isinstance(ei.value, modattn.Error) and ei.value.code == "MODATTN_EINVAL" and ei.value.status == -1


# ----------------------------------------------------------------------------- explain, check, backends


def test_backends(modattn):
    names = modattn.backends()
    assert "reference" in names and "cpu_flash" in names
    info = {b["name"]: b for b in modattn.backends(details=True)}
    assert info["reference"]["available"] and info["reference"]["device"] == "cpu"


def test_explain(modattn, rng):
    text = modattn.explain((1, 12, 128, 32), (1, 12, 128, 32), (1, 12, 128, 32), causal=True)
    assert "B=1 Hq=12 Hkv=12 Sq=128 Sk=128 D=32" in text and "causal" in text
    assert "chosen" in text and "policy: auto" in text
    q, k, v = rand(rng, 2, 8, 4, 16), rand(rng, 2, 2, 4, 16), rand(rng, 2, 2, 4, 16)
    text = modattn.explain(q, k, v, mask=np.zeros((4, 4), np.float32), kv_lens=[4, 2])
    assert "Hq=8 Hkv=2" in text and "chosen" in text
    only = modattn.explain(q, k, v, backend="reference")
    assert "reference          chosen" in only and "excluded" in only
    with pytest.raises(ValueError, match="shapes do not agree"):
        modattn.explain((1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 3, 4))


def test_check(modattn):
    r = modattn.check("cpu_flash", configs=30)
    assert r["backend"] == "cpu_flash" and r["passed"] + r["unsupported"] == 30 and r["failed"] == 0
    assert r["ok"] and r["worst_error_ratio"] <= 1.0 and "30 passed" in r["text"]
    with pytest.raises(ValueError, match="bogus"):
        modattn.check("bogus")
