"""One Model from several Python threads at once (each call runs in its own library session, the GIL
released): the vectors equal the single-thread ones bit for bit, and other Python threads run while
the model does."""

import threading
import time

import numpy as np
import pytest

from conftest import FIXTURES


def sentences(n, seed):
    words = ("bees make honey from the nectar of flowers while volcanoes erupt molten rock and "
             "compilers translate source code into machine instructions for the processor").split()
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=int(rng.integers(3, 60)))) for _ in range(n)]


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def test_four_threads_bit_for_bit(model):
    texts = [sentences(24, seed) for seed in range(4)]
    alone = [model.encode(t, batch_size=8) for t in texts]
    results, errors = [None] * 4, []
    barrier = threading.Barrier(4)

    def work(i):
        try:
            barrier.wait()
            out = []
            for _ in range(3):  # several rounds, overlapping the other threads
                out.append(model.encode(texts[i], batch_size=8))
            results[i] = out
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for i in range(4):
        for r in results[i]:
            assert np.array_equal(bits(r), bits(alone[i])), f"thread {i} differs from the single-thread result"


def test_gil_released_during_encode(modattn, minilm_path):
    """One long library call (batch_size >= every text): a pure-Python thread keeps running meanwhile.
    With the GIL held through the call it would stop for the whole call."""
    m = modattn.Model(minilm_path, threads=1)

    def measure(n):
        texts = [("the long sentence about honey bees and volcanoes " * 40)] * n  # 256 tokens each
        started = threading.Event()
        span = {}

        def encode():
            started.set()
            t0 = time.perf_counter()
            m.encode(texts, batch_size=len(texts))
            span["t"] = time.perf_counter() - t0

        th = threading.Thread(target=encode)
        th.start()
        started.wait()
        ticks, gap, last = 0, 0.0, time.perf_counter()
        while th.is_alive():
            now = time.perf_counter()
            gap = max(gap, now - last)
            last = now
            ticks += 1
        th.join()
        return span["t"], gap, ticks

    n = 16
    duration, gap, ticks = measure(n)
    while duration < 0.5 and n < 1024:  # a fast machine: a longer call, so that a stall would show
        n *= 4
        duration, gap, ticks = measure(n)
    assert duration >= 0.5, f"the encode of {n} texts took {duration:.2f} s: too short to tell"
    # the main thread ran all along: its longest pause is a small part of the call
    assert gap < duration / 4, f"Python stalled {gap:.2f} s during a {duration:.2f} s encode"
    assert ticks > 1000


def test_attention_from_threads(modattn):
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 4, 64, 32)).astype(np.float32) for _ in range(3))
    want = modattn.attention(q, k, v, causal=True)
    errors, outs = [], []

    def work():
        try:
            for _ in range(20):
                outs.append(modattn.attention(q, k, v, causal=True))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(outs) == 80
    assert all(np.array_equal(o, want) for o in outs)
