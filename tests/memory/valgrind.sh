#!/usr/bin/env bash
# tests/memory/valgrind.sh VALGRIND MODATTN — valgrind memcheck on model loading + embedding, on one
# index-and-search run, and on the attention conformance suite: no invalid access, no definite or
# indirect leak. (valgrind emulates a CPU without AVX-512, so the AVX2 kernels run here.)
set -u
VG=$1
BIN=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
run() { # run NAME -- command...
  local name=$1
  shift 2
  if "$VG" --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
       --show-leak-kinds=definite,indirect --track-origins=no "$@" >"$tmp/out" 2>"$tmp/err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: valgrind $name (exit $?)" >&2
    tail -40 "$tmp/err" >&2
  fi
}
mkdir -p "$tmp/docs"
printf 'Attention is computed by one contract with many implementations.\n\nThe dispatcher explains its choices.\n' >"$tmp/docs/a.txt"
printf '<html><body><h1>Bees</h1><p>Honey bees make honey &amp; wax.</p><script>var x=1;</script></body></html>' >"$tmp/docs/b.html"
run "embed" -- "$BIN" --threads 2 embed "hello world" "a second, longer sentence about memory leaks"
run "index" -- "$BIN" --threads 2 index --quiet --db "$tmp/store.db" "$tmp/docs"
run "search" -- "$BIN" --threads 2 search --db "$tmp/store.db" -k 2 "who makes honey"
run "check" -- "$BIN" --threads 2 check --configs 40
echo "valgrind_memcheck: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
