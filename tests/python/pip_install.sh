#!/usr/bin/env bash
# tests/python/pip_install.sh VENV REPO MODEL — `pip install .` as a user runs it: pyproject.toml
# through scikit-build-core builds the library and the extension from a copy of the sources, the
# package lands in a fresh target folder, and from another directory `import modattn` finds it there
# and embeds. (--no-build-isolation: the backend comes pinned from the test venv, not from PyPI at
# test time.)
set -euo pipefail
VENV=$1
REPO=$2
MODEL=$3
T=$(mktemp -d /tmp/modattn-pip-XXXXXX)
trap 'rm -rf "$T"' EXIT
# a copy of the tracked sources (a build tree or venv inside the repository is not the package's)
mkdir -p "$T/src" && (cd "$REPO" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$T/src")
t0=$(date +%s)
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  --target "$T/site" "$T/src" > "$T/pip.log" 2>&1 || { tail -40 "$T/pip.log"; echo "FAIL: pip install . failed"; exit 1; }
echo "pip install . took $(( $(date +%s) - t0 )) s"
ls "$T/site/modattn" | sed 's/^/  site\/modattn\//'
cd /
out=$(PYTHONPATH="$T/site" "$VENV/bin/python" -c "
import modattn, sys
assert modattn.__file__.startswith(sys.argv[1]), modattn.__file__
print(modattn.__version__, modattn.Model(sys.argv[2]).encode(['hi']).shape)" "$T/site" "$MODEL") \
  || { echo "FAIL: the installed package does not import or embed"; exit 1; }
echo "installed package: $out"
[ "${out#* }" = "(1, 384)" ] || { echo "FAIL: expected (1, 384), got $out"; exit 1; }
echo "python_pip_install: passed"
