#!/usr/bin/env bash
# tests/server/setup_venv.sh [VENV] — the venv the server tests run in (default <repo>/.venv-server,
# git-ignored) with tests/server/requirements.txt (the openai client, schemathesis) from PyPI; the
# work is bench/setup_venv.sh's.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$HERE/../../bench/setup_venv.sh" "${1:-$HERE/../../.venv-server}" "$HERE/requirements.txt"
