"""Shared fixtures of the Python binding's tests (tests/python).

Run by ctest (tests/python/CMakeLists.txt), which sets:
  PYTHONPATH             <build>/python: the modattn package just built
  MODATTN_TEST_MODELS    the folder of `make model`'s models (default <repo>/.models)
  MODATTN_CLI            the `modattn` command of the same build (for bit-for-bit comparisons)
  MODATTN_TEST_FIXTURES  tests/fixtures (the sentence-transformers goldens)
By hand, from the repository root:
  PYTHONPATH=build/python MODATTN_CLI=build/modattn .venv-python/bin/python -m pytest -q tests/python
A missing model is a failure, not a skip: a golden test that skips quietly proves nothing.
"""

import glob
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("MODATTN_TEST_MODELS") or REPO / ".models")
FIXTURES = pathlib.Path(os.environ.get("MODATTN_TEST_FIXTURES") or REPO / "tests" / "fixtures")
MINILM = MODELS / "all-MiniLM-L6-v2"
TINY = MODELS / "tiny-bert-cls"


def _need_model(path):
    if not (path / "modules.json").is_file():
        pytest.fail(f"model directory {path} is missing: run `make model` (tools/setup_model.sh) first")
    return path


@pytest.fixture(scope="session")
def modattn():
    try:
        import modattn as m  # from PYTHONPATH: the build tree (or an installed package)
    except ImportError as e:
        built = [f for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
                 for f in glob.glob(os.path.join(p, "modattn", "_modattn*"))]
        pytest.fail(f"cannot import modattn: {e}; this is Python {sys.version.split()[0]} ({sys.executable}), the "
                    f"extension modules on PYTHONPATH: {built or 'none'} (a venv made by another Python? remove "
                    f".venv-python and run the tests again)")
    return m


@pytest.fixture(scope="session")
def minilm_path():
    return _need_model(MINILM)


@pytest.fixture(scope="session")
def model(modattn, minilm_path):
    """all-MiniLM-L6-v2, shared by the tests (a Model is safe to share between threads)."""
    return modattn.Model(minilm_path)


@pytest.fixture(scope="session")
def cli():
    """The `modattn` command of this build."""
    env = os.environ.get("MODATTN_CLI")
    candidates = [pathlib.Path(env)] if env else [REPO / "build" / "modattn"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    pytest.fail(f"the modattn command was not found ({', '.join(map(str, candidates))}): set MODATTN_CLI")


# A ctest entry that runs tests which may be "not available here" (python_precision_*) sets
# MODATTN_PYTEST_SKIP_CODE=77: when every test it selected was skipped (none passed, none failed),
# pytest's exit status becomes that code, so CTest (SKIP_RETURN_CODE 77) lists the entry as
# skipped, never as passed; `-rs` prints each skip's reason in the log.
_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_sessionfinish(session, exitstatus):
    code = os.environ.get("MODATTN_PYTEST_SKIP_CODE")
    if code and exitstatus == 0 and _outcomes["skipped"] > 0 and not _outcomes["passed"] and not _outcomes["failed"]:
        session.exitstatus = int(code)
