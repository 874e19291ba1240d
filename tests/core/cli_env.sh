#!/bin/sh
# tests/core/cli_env.sh MODATTN — the environment variables: every MODATTN_* variable is read by one
# reader (core/env.c's table) with the rules of the flag it stands for. A bad value is a usage
# error naming the variable (exit 2), before any work, in every command; good values in every
# accepted spelling pass; the library refuses them too (modattn_ctx_create, seen through Python's
# binding elsewhere). And the table cannot drift: every MODATTN_* name the sources read is a row
# of the table and a row of the README's table of variables.
set -u
BIN=$1
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

bad() { # VAR=VALUE: exit 2 naming VAR, nothing on stdout, for a command that does work
    var=${1%%=*}
    for cmd in devices "embed --model /nonexistent x"; do
        env "$1" "$BIN" $cmd > "$TMP/out" 2> "$TMP/err"; rc=$?
        if [ $rc -eq 2 ] && grep -q "$var" "$TMP/err" && [ ! -s "$TMP/out" ]; then ok
        else ko "$1 $cmd: rc $rc, want 2 naming $var: $(head -c 300 "$TMP/err")"; fi
    done
}
good() {
    env "$1" "$BIN" devices > "$TMP/out" 2> "$TMP/err"; rc=$?
    if [ $rc -eq 0 ]; then ok; else ko "$1 was refused (rc $rc): $(head -c 300 "$TMP/err")"; fi
}
# the values the hardening issue found accepted or ignored
bad MODATTN_POOL_SPIN_US=-1
bad MODATTN_POOL_SPIN_US=2000000
bad MODATTN_POOL_SPIN_US=12abc
bad MODATTN_HUGEPAGES=banana
bad MODATTN_CPU_DISABLE=garbage
bad MODATTN_CPU_DISABLE=avx2,,fma
bad MODATTN_VECTOR_FILE=maybe
bad MODATTN_TRUNCATE=maybe
bad MODATTN_LOG_JSON=sometimes
bad MODATTN_HOST_FALLBACK=2
bad MODATTN_PRECISION=
bad MODATTN_PRECISION=fp16
bad MODATTN_GEMM_PLANS=x
bad MODATTN_PEAK_GFLOPS=-3
bad MODATTN_DEVICE=
bad MODATTN_MODEL=
# accepted spellings
good MODATTN_LOG_JSON=yes
good MODATTN_HOST_FALLBACK=yes
good MODATTN_HUGEPAGES=0
good MODATTN_HUGEPAGES=Off
good MODATTN_POOL_SPIN_US=0
good MODATTN_CPU_DISABLE=AVX512,amx
good MODATTN_VECTOR_FILE=off
good MODATTN_PRECISION=BF16x3
# a value that does not parse is never half-used: the pool's spin with a bad value does not run
env MODATTN_POOL_SPIN_US=-1 "$BIN" embed --help > /dev/null 2>&1; rc=$?
if [ $rc -eq 2 ]; then ok; else ko "embed --help with a bad variable: rc $rc, want 2 (checked before any command)"; fi
# serve's variables: its own table, the same messages as its flags
env MODATTN_TIMEOUT=soon "$BIN" serve > /dev/null 2> "$TMP/err"; rc=$?
if [ $rc -eq 2 ] && grep -q MODATTN_TIMEOUT "$TMP/err"; then ok; else ko "MODATTN_TIMEOUT=soon: rc $rc"; fi
env MODATTN_PORT= "$BIN" serve > /dev/null 2> "$TMP/err"; rc=$?
if [ $rc -eq 2 ] && grep -q MODATTN_PORT "$TMP/err"; then ok; else ko "MODATTN_PORT= (empty): rc $rc"; fi

# the table cannot drift: names read in the sources, in core/env.c's table and the README
names=$(grep -rhoE '(getenv|env|modattn__env_[a-z]+)\("MODATTN_[A-Z0-9_]+"' core attn backends device model pipeline cli server python/src 2>/dev/null |
        grep -oE 'MODATTN_[A-Z0-9_]+' | grep -v '^MODATTN_TEST_' | sort -u)
[ -n "$names" ] || ko "no MODATTN_ variable found in the sources (the grep is broken)"
for n in $names; do
    if grep -q "{\"$n\"" core/env.c; then ok; else ko "$n is read by the sources but not a row of core/env.c's table"; fi
    if grep -q "\`$n\`" README.md; then ok; else ko "$n is not in the README's table of environment variables"; fi
done
for n in $(grep -oE '^    \{"MODATTN_[A-Z0-9_]+"' core/env.c | grep -oE 'MODATTN_[A-Z0-9_]+'); do
    if grep -q "\`$n\`" README.md; then ok; else ko "$n (core/env.c) is not in the README's table"; fi
done
# every command the top-level --help lists answers --help (exit 0, a usage line on stdout)
cmds=$("$BIN" --help 2>&1 | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}')
[ -n "$cmds" ] || ko "modattn --help lists no commands"
for c in $cmds; do
    if [ "$c" = bench ]; then args="bench attn --help"; else args="$c --help"; fi
    "$BIN" $args > "$TMP/h" 2>&1; rc=$?
    if [ $rc -eq 0 ] && grep -qi "usage" "$TMP/h"; then ok; else ko "modattn $args: rc $rc, $(head -c 200 "$TMP/h")"; fi
done
echo "cli_env: $pass passed, $fail failed"
[ $fail -eq 0 ]
