#!/usr/bin/env bash
# tests/python/asan_pytest.sh PYTHON LIBASAN EXTENSION [PYTEST ARGS...] — the Python binding's tests
# with the extension built under MODATTN_SANITIZE (ASan + UBSan), in the ordinary (uninstrumented)
# interpreter: ASan's runtime must be the first library of the process, so it is preloaded
# (LD_PRELOAD=LIBASAN); the extension brings UBSan's runtime itself. Registered by
# tests/python/CMakeLists.txt in the sanitizer build only (python_asan).
#
# What this run sees and what it does not, honestly:
#  - every read and write of the extension and of the library linked into it (modattn's C code,
#    instrumented) is checked: a heap overflow, a use after free, a double free in the binding or
#    the library aborts the test (abort_on_error=1), as do UBSan's findings (-fno-sanitize-recover);
#  - PYTHONMALLOC=malloc: Python's objects come from malloc too, so ASan's redzones surround them
#    (a write past a bytes object's or a list's end made by the binding is seen; with pymalloc's
#    arenas it would not be);
#  - python itself and numpy are not instrumented: their own bugs are not looked for;
#  - detect_leaks=0: LeakSanitizer is off for this process, because the interpreter deliberately
#    does not free its interned strings, types and module state at exit (hundreds of reports that
#    are not ours, and no reliable way to tell ours apart by suppression). The library's own leaks
#    are checked by the C tests of the same sanitizer build, where LeakSanitizer is on.
set -u
PY=$1
LIBASAN=$2
EXT=$3
shift 3
if [ ! -e "$LIBASAN" ]; then
  echo "FAIL: ASan's runtime $LIBASAN is missing (the compiler's libasan; make deps)" >&2
  exit 1
fi
# the extension must really be instrumented, else this run proves nothing
if ! nm -D --undefined-only "$EXT" 2>/dev/null | grep -q "__asan_report"; then
  echo "FAIL: $EXT calls no ASan checks: it was not built with MODATTN_SANITIZE" >&2
  exit 1
fi
export LD_PRELOAD="$LIBASAN${LD_PRELOAD:+:$LD_PRELOAD}"
# (ours last: a later option wins, and `make test-sanitize` sets detect_leaks=1 for the C tests)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0:abort_on_error=1:halt_on_error=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:print_stacktrace=1:halt_on_error=1"
export PYTHONMALLOC=malloc
# the tests that bound a latency scale it under the sanitizers (test_interrupt.py)
export MODATTN_TEST_SANITIZED=1
# the runtime is live in this interpreter (the preload took): ASan's own entry point is there
"$PY" -c "import ctypes, sys; ctypes.CDLL(None).__asan_init; import modattn; print('python_asan: ASan live in', sys.executable)" || {
  echo "FAIL: the ASan runtime is not live in the interpreter (LD_PRELOAD=$LIBASAN)" >&2
  exit 1
}
# --capture=sys: pytest captures Python's sys.stdout/stderr only, so that a sanitizer's report,
# written to file descriptor 2 just before the abort, reaches the log (with pytest's default fd
# capture it would go to a temporary file that the abort leaves unread)
exec "$PY" -m pytest --capture=sys "$@"
