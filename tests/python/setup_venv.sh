#!/usr/bin/env bash
# tests/python/setup_venv.sh [VENV] — the venv the Python binding's tests run in (default
# <repo>/.venv-python, git-ignored) with tests/python/requirements.txt (numpy, pytest) from PyPI; the
# work is bench/setup_venv.sh's. The binding itself is not installed there: the tests import it from
# the build tree (PYTHONPATH=<build>/python), so that they test what was just built.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$HERE/../../bench/setup_venv.sh" "${1:-$HERE/../../.venv-python}" "$HERE/requirements.txt"
