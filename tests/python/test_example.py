"""python/examples/quickstart.py runs and says what it should."""

import subprocess
import sys

from conftest import REPO


def test_quickstart(minilm_path):
    script = REPO / "python" / "examples" / "quickstart.py"
    r = subprocess.run([sys.executable, str(script), str(minilm_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "shape: (2, 384)" in r.stdout, r.stdout
    cos = float(r.stdout.split("cosine:")[1])
    assert 0.5 < cos < 1.0, r.stdout  # two sentences of the same meaning
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage" in r.stderr
