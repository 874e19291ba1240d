"""Ctrl-C during a long encode: KeyboardInterrupt between two library calls (batch_size texts each),
promptly, with everything freed; the Model still works afterwards and the process exits cleanly."""

import os
import signal
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent(
    """
    import sys, time
    import modattn
    m = modattn.Model(sys.argv[1], threads=1)
    texts = ["a long text about bees and honey and volcanoes, number %d " % i * 30 for i in range(3000)]
    ref = m.encode(["after the interrupt"])
    print("started", flush=True)
    t0 = time.perf_counter()
    try:
        m.encode(texts, batch_size=4, show_progress_bar=True)
        print("finished: not interrupted", flush=True)
        sys.exit(3)
    except KeyboardInterrupt:
        print("interrupted after %.2f s" % (time.perf_counter() - t0), flush=True)
    again = m.encode(["after the interrupt"])
    print("model works:", bool((again == ref).all()), flush=True)
    """
)


def test_keyboard_interrupt_during_encode(minilm_path):
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(minilm_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line.strip() == "started", line + p.stderr.read()
        time.sleep(1.0)  # well inside the encode (3000 texts of ~256 tokens: minutes on one thread)
        sent = time.perf_counter()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        took = time.perf_counter() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {out}\nstderr: {err}"
    assert "interrupted after" in out and "model works: True" in out, out + err
    assert took < 10, f"{took:.1f} s from SIGINT to exit"
    # it was inside the encode: some texts done, far from all
    done = [int(x.split("/")[0]) for x in err.replace("\r", "\n").split("encoded ")[1:] if "/" in x]
    assert done and 0 < max(done) < 3000, err[-500:]


PESTER = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import numpy as np
    import modattn
    signal.signal(signal.SIGUSR1, lambda *a: None)
    m = modattn.Model(sys.argv[1], threads=1)
    texts = ["signals keep arriving while the model runs, text %d " % i * 30 for i in range(24)]
    ref = m.encode(texts)
    def pester():
        for _ in range(600):
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.002)
    t = threading.Thread(target=pester)
    t.start()
    outs = []
    while t.is_alive():
        outs.append(m.encode(texts, batch_size=4))
    t.join()
    same = all(np.array_equal(o.view(np.uint32), ref.view(np.uint32)) for o in outs)
    print("rounds", len(outs), "same", same, flush=True)
    """
)


def test_signals_during_encode(minilm_path):
    """Signals handled while the library runs (here a no-op SIGUSR1, 600 of them) change nothing: the
    binding blocks them on the threads running the library (a signal handled inside its oneDNN
    matmuls corrupted the heap), and Python still sees each one when the call returns."""
    r = subprocess.run([sys.executable, "-c", PESTER, str(minilm_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr[-2000:]}"
    assert "same True" in r.stdout, r.stdout


NDOCS = 8
INDEX = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    import modattn
    root, db, NDOCS = sys.argv[2], sys.argv[3], int(sys.argv[4])
    os.makedirs(root, exist_ok=True)
    words = "bees honey volcano lava river valley orchard apple stone bridge winter market harbour".split()
    for i in range(NDOCS):  # documents of ~13 chunks, ~1.3 s each on one thread; the first batch (64
        # chunks) commits 5 of them, the interrupt comes then, the rest is the next batch's (the
        # re-run below embeds what the interrupt left: few and small documents keep the test short,
        # most of all under ASan)
        with open(os.path.join(root, "doc%03d.txt" % i), "w") as f:
            f.write(" ".join(words[(i * 7 + j) % len(words)] + str(j % 97) for j in range(1000)))
    m = modattn.Model(sys.argv[1], threads=1)
    s = modattn.Store(db, m)
    print("started", flush=True)
    try:
        r = s.index(root, progress=False)
        print("finished: not interrupted", r["files_indexed"], flush=True)
        sys.exit(3)
    except KeyboardInterrupt as e:
        t = time.time()
        print("interrupted at %.3f" % t, flush=True)
        print("message:", e, flush=True)
        print("committed:", e.files_indexed, e.result["files_indexed"], e.result["interrupted"], flush=True)
    stored = s.counts()["documents"]
    print("stored:", stored, flush=True)
    # what was committed stays: the next run embeds only the rest
    t0 = time.time()
    r = s.index(root, progress=False)
    rerun = time.time() - t0
    print("again:", r["files_unchanged"], r["files_indexed"], s.counts()["documents"], flush=True)
    print("rerun: %.3f %d" % (rerun, r["chunks"]), flush=True)
    """
)


def test_keyboard_interrupt_during_index(minilm_path, tmp_path):
    """Ctrl-C in Store.index(): KeyboardInterrupt within about a second (the indexer's cancel hook,
    asked between documents and batches), the documents committed until then kept and reported."""
    p = subprocess.Popen([sys.executable, "-c", INDEX, str(minilm_path), str(tmp_path / "docs"),
                          str(tmp_path / "s.db"), str(NDOCS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "started", line + p.stderr.read()
        # inside the run, once a document is committed (the store is read as another process would)
        import sqlite3
        deadline = time.time() + 300  # a sanitizer build on a loaded machine is slow; the wait ends at the commit
        while time.time() < deadline:
            try:
                with sqlite3.connect(f"file:{tmp_path / 's.db'}?mode=ro", uri=True) as c:
                    if c.execute("select count(*) from documents").fetchone()[0] >= 1:
                        break
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        sent = time.time()
        p.send_signal(signal.SIGINT)
        # the script then indexes the rest again (minutes under ASan on a loaded machine: CI once took
        # over 120 s); how soon the interrupt came is checked from its timestamps below, not from this
        out, err = p.communicate(timeout=900)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {out}\nstderr: {err[-2000:]}"
    lines = dict(x.split(":", 1) if ":" in x else (x, "") for x in out.splitlines())
    assert "interrupted at " in out, out + err[-2000:]
    at = float(out.split("interrupted at ")[1].split()[0])
    print(f"{at - sent:.2f} s from SIGINT to KeyboardInterrupt; {out}")
    # the interrupt lands at the embedding's next 8-chunk slice: about a second in a plain build; an
    # ASan build embeds several times slower (2.1 s seen in CI), so there the bound is 6 s. On a slow
    # or loaded host a slice takes longer (a clean-clone run saw 1.71 s against 1.5): the bound is
    # also at least two slices at the speed the re-run below embedded, measured in this same run
    rerun_s, rerun_chunks = lines["rerun"].split()
    slice_s = 8 * float(rerun_s) / max(1, int(rerun_chunks))
    bound = max(6.0 if os.environ.get("MODATTN_TEST_SANITIZED") else 1.5, 2 * slice_s)
    print(f"bound {bound:.2f} s (an 8-chunk slice took {slice_s:.2f} s in the re-run)")
    assert at - sent < bound, (f"{at - sent:.2f} s from SIGINT to KeyboardInterrupt (bound {bound:.2f} s; "
                               f"an 8-chunk slice took {slice_s:.2f} s in the re-run)")
    n1, n2, flag = lines["committed"].split()
    stored = int(lines["stored"])
    assert int(n1) == int(n2) == stored and flag == "True", out
    assert 0 < stored < NDOCS, out  # inside the run: some documents committed, not all
    assert "%d documents committed" % stored in lines["message"], out
    unchanged, indexed, total = (int(x) for x in lines["again"].split())
    assert unchanged == stored and indexed == NDOCS - stored and total == NDOCS, out
