#!/usr/bin/env bash
# tests/install/plugin_kit.sh BUILD_DIR — the kit for kernel authors, as one would use it: modattn
# installed into a fresh prefix, examples/plugin/ copied out of the tree and built with its Makefile
# against that copy (pkg-config alone), then `modattn check --plugin` (its CI recipe) passes it on the
# whole grid, and the faults the suite must name are named: a planted workspace overrun, a planted
# crash (isolated: the crash, its configuration, and the other results standing), a planted run
# failure at run time (one line on stderr, then counted, the reason in --stats). Also: --trace with a
# plugin that ran (it crashed the CLI once), plugin discovery from ~/.local/lib/modattn/plugins and
# from a Python package's entry point, --attn naming a refused plugin says why, and the tuning cache
# keyed by the plugin file (a rebuilt plugin is measured again).
set -uo pipefail
BUILD="$(cd "$1" && pwd)"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
T="$(mktemp -d /tmp/modattn-kit-XXXXXX)"
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$2"; then ok; else bad "$1"; fi; }
export MODATTN_CACHE_DIR="$T/cache"

cmake --install "$BUILD" --prefix "$T/prefix" > "$T/install.log" 2>&1 || { cat "$T/install.log" >&2; echo "plugin_kit: 0 passed, 1 failed"; exit 1; }
BIN="$T/prefix/bin/modattn"
export PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig"
cp -r "$REPO/examples/plugin" "$T/kit"
build() { # build DIR [CFLAGS...]: the kit's Makefile, out of the tree, into DIR
    mkdir -p "$1" && cp "$T/kit/myattn.c" "$T/kit/Makefile" "$1/" && make -s -C "$1" CFLAGS="-O2 -Wall -Wextra -Werror ${*:2}" > "$T/make.log" 2>&1
}
build "$T/good"; rc=$?
check "the kit builds out of tree with pkg-config against the installed modattn (rc $rc: $(head -c 300 "$T/make.log"))" '[ $rc -eq 0 ] && [ -f "$T/good/libmyattn.so" ]'
check "the plugin links nothing of libmodattn (no undefined modattn_ symbol)" '! nm -D --undefined-only "$T/good/libmyattn.so" | grep -q " modattn_"'

# the CI recipe: check --plugin, the whole grid
"$BIN" check --plugin "$T/good/libmyattn.so" --json > "$T/good.json" 2> "$T/err"; rc=$?
check "check --plugin passes the kit's skeleton (rc $rc: $(head -c 300 "$T/err"))" '[ $rc -eq 0 ]'
check "on every configuration of the grid ($(head -c 300 "$T/good.json"))" \
    "python3 -c \"import json,sys; i=json.load(open('$T/good.json'))['implementations']; sys.exit(0 if len(i)==1 and i[0]['name']=='myattn' and i[0]['failed']==0 and i[0]['passed']+i[0]['unsupported']==760 and i[0]['passed']>=600 else 1)\""
make -s -C "$T/good" check MODATTN="$BIN" > "$T/mk.out" 2>&1; rc=$?
check "make check (the kit's CI target) exits 0 (rc $rc)" '[ $rc -eq 0 ] && grep -q "^OK" "$T/mk.out"'

# a planted workspace overrun: named
build "$T/over" -DPLANT_OVERRUN
"$BIN" check --plugin "$T/over/libmyattn.so" --configs 40 > "$T/out" 2>&1; rc=$?
check "a workspace overrun fails check (rc $rc)" '[ $rc -eq 1 ]'
check "and is named as one ($(grep -m1 'first failure' "$T/out"))" 'grep -q "wrote outside its workspace" "$T/out"'

# a planted crash: isolated, named with its configuration, the other results standing
build "$T/crash" -DPLANT_CRASH
"$BIN" check --plugin "$T/crash/libmyattn.so" > "$T/out" 2>&1; rc=$?
check "a crashing plugin fails check with exit 1, not a signal (rc $rc)" '[ $rc -eq 1 ]'
check "the crash is reported by name, signal and configuration ($(grep -m1 crashed "$T/out"))" \
    'grep -q "implementation myattn crashed (signal 11" "$T/out" && grep -q "on config 44: B=2 Hq=4 Hkv=4 Sq=37" "$T/out"'
check "the other configurations still ran (656 passed, 103 refused: windows, ALiBi, softcap)" 'grep -Eq "^myattn +656 +1 +103 " "$T/out"'
MODATTN_PLUGIN_PATH="$T/crash/libmyattn.so" "$BIN" check --configs 50 > "$T/out" 2>&1; rc=$?
check "check of everything with the crashing plugin: the built-ins' results stand (rc $rc)" \
    '[ $rc -eq 1 ] && grep -Eq "^cpu_flash +50 +0 " "$T/out" && grep -q "myattn crashed" "$T/out"'

# --trace with a plugin that ran: the trace keeps its own copy of the plugin's name
MODATTN_PLUGIN_PATH="$T/good/libmyattn.so" "$BIN" --attn myattn --trace "$T/t.json" embed --model "$REPO/.models/all-MiniLM-L6-v2" "a plugin ran here" > /dev/null 2> "$T/err"; rc=$?
check "--trace with a plugin that ran exits 0 (rc $rc: $(head -c 200 "$T/err"))" '[ $rc -eq 0 ]'
check "and the trace names it" "python3 -c \"import json,sys; j=json.load(open('$T/t.json')); sys.exit(0 if any(e.get('args',{}).get('impl')=='myattn' for e in j['traceEvents']) else 1)\""
MODATTN_PLUGIN_PATH="$T/good/libmyattn.so" "$BIN" --trace "$T/t2.json" check --backend myattn --configs 5 > /dev/null 2>&1; rc=$?
check "check --trace with a plugin exits 0 (rc $rc)" '[ $rc -eq 0 ] && [ -s "$T/t2.json" ]'

# a failure at run time: said once on stderr, then counted; the reason in --stats
build "$T/fail" -DPLANT_FAIL
MODATTN_PLUGIN_PATH="$T/fail/libmyattn.so" "$BIN" --attn myattn,cpu_flash --stats embed --model "$REPO/.models/all-MiniLM-L6-v2" "one" "two" "three" > "$T/out" 2> "$T/err"; rc=$?
check "a plugin that fails at run time falls back to the next (rc $rc)" '[ $rc -eq 0 ] && [ "$(wc -l < "$T/out")" -eq 3 ]'
check "one line on stderr says so, with the reason ($(grep -c "implementation 'myattn' failed" "$T/err") lines)" \
    '[ "$(grep -c "implementation .myattn. failed: planted failure" "$T/err")" -eq 1 ]'
check "--stats counts its failures and shows the reason" 'grep -q "last failure: planted failure" "$T/err"'

# discovery: the user's plugin folder, and a Python package's entry point
mkdir -p "$T/home/.local/lib/modattn/plugins"
cp "$T/good/libmyattn.so" "$T/home/.local/lib/modattn/plugins/"
env -u MODATTN_PLUGIN_PATH HOME="$T/home" "$BIN" backends > "$T/out" 2>&1; rc=$?
check "a plugin in ~/.local/lib/modattn/plugins is found (rc $rc)" '[ $rc -eq 0 ] && grep -q "^myattn" "$T/out"'
SP="$T/venv/lib/python3.11/site-packages"
mkdir -p "$SP/someones_attn" "$SP/someones_attn-1.0.dist-info"
cp "$T/good/libmyattn.so" "$SP/someones_attn/"
printf '[console_scripts]\nx = y:z\n\n[modattn.plugins]\nmyattn = someones_attn/libmyattn.so\n' > "$SP/someones_attn-1.0.dist-info/entry_points.txt"
env -u MODATTN_PLUGIN_PATH HOME="$T/nohome" VIRTUAL_ENV="$T/venv" "$BIN" backends > "$T/out" 2>&1; rc=$?
check "a plugin a Python package declares (entry point group modattn.plugins) is found (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "^myattn .*someones_attn/libmyattn.so" "$T/out"'
MODATTN_PLUGIN_PATH="" HOME="$T/home" "$BIN" backends > "$T/out" 2>&1
check "MODATTN_PLUGIN_PATH set (even empty) is the whole list: nothing discovered" '! grep -q "^myattn" "$T/out"'

# --attn naming a plugin that was refused: why
printf 'not a library' > "$T/libbroken.so"
MODATTN_PLUGIN_PATH="$T/libbroken.so" "$BIN" --attn broken embed --model "$REPO/.models/all-MiniLM-L6-v2" x > /dev/null 2> "$T/err"; rc=$?
check "--attn naming a refused plugin: usage error saying the plugin was refused and why (rc $rc: $(head -c 300 "$T/err"))" \
    '[ $rc -eq 2 ] && grep -q "plugins refused at load: plugin .*libbroken.so: cannot load" "$T/err"'
MODATTN_PLUGIN_PATH="$T/libbroken.so" "$BIN" backends > /dev/null 2>&1; rc=$?
check "backends exits 1 when a plugin was refused (rc $rc)" '[ $rc -eq 1 ]'

# the tuning cache is keyed by the plugin file: a rebuilt plugin is measured again
MODATTN_PLUGIN_PATH="$T/good/libmyattn.so" "$BIN" --attn tune explain --shape 1,4,4,64,64,32 > /dev/null 2>&1
k1=$(grep -c "|p" "$MODATTN_CACHE_DIR"/tune-v1.tsv 2>/dev/null || echo 0)
build "$T/good" -DREBUILT=1 # the same source, another build: another file
MODATTN_PLUGIN_PATH="$T/good/libmyattn.so" "$BIN" --attn tune explain --shape 1,4,4,64,64,32 > /dev/null 2>&1
k2=$(grep -c "|p" "$MODATTN_CACHE_DIR"/tune-v1.tsv 2>/dev/null || echo 0)
check "the tuning cache keys name the plugin file ($k1 then $k2 keys): a rebuilt plugin is measured again" '[ "$k1" -ge 1 ] && [ "$k2" -gt "$k1" ]'
echo "plugin_kit: $pass passed, $fail failed"
[ $fail -eq 0 ]
