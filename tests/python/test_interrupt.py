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
