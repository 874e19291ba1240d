#!/usr/bin/env bash
# bench/setup_venv.sh [VENV_DIR [REQUIREMENTS]]: create a Python tooling venv (default bench/.venv) and
# install REQUIREMENTS (default bench/requirements.txt) into it. Idempotent: does nothing (and needs
# no network) when the pinned versions are installed. Concurrent runs on one venv take turns.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${1:-$HERE/.venv}"
REQ="${2:-$HERE/requirements.txt}"
PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null || { echo "setup_venv: $PYTHON not found (apt-get install -y python3 python3-venv)" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV" || { echo "setup_venv: cannot create $VENV (Debian: apt-get install -y python3-venv)" >&2; exit 1; }
fi
if "$VENV/bin/python" - "$REQ" <<'PY'
import sys, importlib.metadata as md
ok = True
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, ver = line.split("==")
    try:
        ok &= md.version(name) == ver
    except md.PackageNotFoundError:
        ok = False
sys.exit(0 if ok else 1)
PY
then
  echo "setup_venv: $VENV already has the pinned packages"
  exit 0
fi
exec 9> "$VENV/.install.lock" # several builds may run their tests at once: one installs at a time
flock 9
echo "setup_venv: installing $REQ into $VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check -r "$REQ"
echo "setup_venv: done: $VENV/bin/python"
