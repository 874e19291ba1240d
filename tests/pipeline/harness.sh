# tests/pipeline/harness.sh — sourced by the CLI test scripts: counters, ok/bad, a scratch folder
# removed at exit, and `finish NAME` that prints the tally and sets the exit status.
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# check DESCRIPTION COMMAND...: ok when the command succeeds, else bad with the description
check() { local d=$1; shift; if "$@"; then ok; else bad "$d"; fi; }
need_model() {
  [ -f "$1/model.safetensors" ] && return 0
  echo "FAIL: no model at $1: run make model" >&2
  echo "$2: 0 passed, 1 failed"
  exit 1
}
# scratch NAME: T is a new folder, removed at exit unless MODATTN_TEST_KEEP=1 (then named on stderr)
scratch() {
  T=$(mktemp -d "/tmp/modattn-$1-XXXXXX")
  if [ "${MODATTN_TEST_KEEP:-0}" = 1 ]; then trap 'echo "kept $T" >&2' EXIT
  else trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT; fi
}
finish() { echo "$1: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
