#!/usr/bin/env bash
# tests/install/install_test.sh BUILD_DIR MODEL_DIR — the installed C library, as a user meets it:
# `cmake --install` into a fresh prefix, then the examples/ programs built against that copy with
# `pkg-config --cflags --libs modattn` alone, and run. Also: the SONAME carries the version, the
# library exports exactly the public API (no internal modattn__* symbols, nothing foreign), and the
# umbrella header modattn/modattn.h declares every exported function.
set -euo pipefail
BUILD="$(cd "$1" && pwd)"
MODEL="$2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
T="$(mktemp -d /tmp/modattn-install-XXXXXX)"
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAILED: $*" >&2; }

cmake --install "$BUILD" --prefix "$T/prefix" > "$T/install.log" || { cat "$T/install.log" >&2; exit 1; }
P="$T/prefix"
for f in include/modattn/modattn.h lib/pkgconfig/modattn.pc bin/modattn; do
  [ -e "$P/$f" ] && ok "installed $f" || bad "$f is not installed"
done
lib=$(ls "$P"/lib/libmodattn.so.*.*.* 2>/dev/null | head -1)
[ -n "$lib" ] && ok "installed $(basename "$lib")" || { bad "no versioned libmodattn.so"; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
ver=$(sed -n 's/.*MODATTN_VERSION_STRING "\([0-9]*\)\.\([0-9]*\)\..*"/\1.\2/p' "$REPO/include/modattn/modattn.h")
[ "$soname" = "libmodattn.so.$ver" ] && ok "SONAME $soname" || bad "SONAME '$soname', want libmodattn.so.$ver"
[ -L "$P/lib/$soname" ] && [ -L "$P/lib/libmodattn.so" ] && ok "symlinks $soname and libmodattn.so" || bad "missing symlinks"

# exactly the public API is exported
nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRVW]/ {print $3}' | sed 's/@.*//' | sort -u > "$T/exports"
n=$(wc -l < "$T/exports")
[ "$n" -gt 100 ] && ok "$n functions exported" || bad "only $n exported symbols"
if grep -v '^modattn_[a-z0-9]' "$T/exports" | grep -v '^MODATTN_' > "$T/foreign"; then
  bad "exported beyond the public API: $(head -5 "$T/foreign" | tr '\n' ' ')"
else
  ok "no internal (modattn__*) or foreign symbols exported"
fi
# ... and exactly the committed list (tests/install/exports.txt): a symbol that appears or goes is a
# change of the ABI, made on purpose (update the list; removing one needs an ABI version bump)
if diff "$REPO/tests/install/exports.txt" "$T/exports" > "$T/exports.diff"; then
  ok "the exports are tests/install/exports.txt's $(wc -l < "$REPO/tests/install/exports.txt")"
else
  bad "the exports differ from tests/install/exports.txt (< listed, not exported; > exported, not listed): $(grep '^[<>]' "$T/exports.diff" | head -10 | tr '\n' ' ')"
fi

CC_ALONE=${CC:-cc}
# the umbrella header declares every exported function (implicit declarations are errors)
{
  echo '#include <modattn/modattn.h>'
  echo 'typedef void (*fn)(void);'
  echo 'const fn every_export[] = {'
  sed 's/.*/    (fn)\&&,/' "$T/exports"
  echo '};'
  echo 'int main(void) { return every_export[0] == 0; }'
} > "$T/umbrella.c"
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
flags=$(pkg-config --cflags --libs modattn) || { bad "pkg-config does not find modattn"; exit 1; }
libdir=$(pkg-config --variable=libdir modattn)
CC=${CC:-cc}
if $CC -std=c11 -Wall -Wextra -Werror -Wno-cast-function-type "$T/umbrella.c" $flags -o "$T/umbrella" 2> "$T/umbrella.err"; then
  ok "modattn/modattn.h declares all $n exported functions"
else
  bad "the umbrella header misses declarations: $(grep -m3 error "$T/umbrella.err" | tr '\n' ' ')"
fi

# the installed headers are the two public tiers (docs/API.md) and nothing else: modattn/*.h (the
# user's API) and modattn/backend/*.h (the implementer's); each compiles alone, first in its file
(cd "$P/include" && find modattn -name '*.h' | sort) > "$T/headers"
(cd "$REPO/include" && find modattn -name '*.h' | sort) > "$T/headers.src"
if diff "$T/headers.src" "$T/headers" > /dev/null && ! grep -v '^modattn/\(backend/\)\?[a-z_]*\.h$' "$T/headers" > /dev/null; then
  ok "installed headers: $(grep -c -v / <<<"$(sed 's|^modattn/||' "$T/headers")") in modattn/, $(grep -c '^modattn/backend/' "$T/headers") in modattn/backend/"
else
  bad "installed headers differ from include/modattn's two tiers: $(diff "$T/headers.src" "$T/headers" | head -5 | tr '\n' ' ')"
fi
alone_bad=""
while read -r h; do
  printf '#include <%s>\nint modattn_header_alone_check;\n' "$h" > "$T/alone.c"
  $CC_ALONE -std=c11 -Wall -Wextra -Werror -I"$P/include" -c "$T/alone.c" -o "$T/alone.o" 2> "$T/alone.err" || alone_bad="$alone_bad $h"
  if grep -n 'modattn__[a-z0-9_]*[ \t]*(' "$P/include/$h" | grep -v '^[0-9]*:[ \t]*\(/\*\|\*\)' > "$T/internal.txt"; then
    alone_bad="$alone_bad $h(declares internal: $(head -1 "$T/internal.txt"))"
  fi
done < "$T/headers"
[ -z "$alone_bad" ] && ok "each of the $(wc -l < "$T/headers") installed headers compiles alone and declares no modattn__ function" \
  || bad "installed headers that do not compile alone or declare internals:$alone_bad $(head -c 300 "$T/alone.err")"

# the examples, built with pkg-config alone against the installed copy, and run
for ex in attention embed; do
  if $CC -std=c11 -Wall -Wextra -Werror "$REPO/examples/$ex.c" $flags -lm -Wl,-rpath,"$libdir" -o "$T/$ex" 2> "$T/$ex.err"; then
    ok "examples/$ex.c builds with pkg-config --cflags --libs modattn"
  else
    bad "examples/$ex.c does not build: $(head -3 "$T/$ex.err")"
    continue
  fi
  if ldd "$T/$ex" | grep "libmodattn.so.* => $P/lib" > /dev/null; then ok "$ex runs against the installed library"
  else bad "$ex does not load the installed libmodattn: $(ldd "$T/$ex" | grep modattn)"; fi
done
if out=$("$T/attention" 2>&1); then ok "examples/attention: $out"; else bad "examples/attention: $out"; fi
if out=$("$T/embed" "$MODEL" "A cat sits on the mat." "A kitten rests on a rug." "Stock prices fell." 2>&1); then
  echo "$out"
  c2=$(echo "$out" | sed -n 's/^cosine(text 1, text 2) = \([0-9.-]*\).*/\1/p')
  c3=$(echo "$out" | sed -n 's/^cosine(text 1, text 3) = \([0-9.-]*\).*/\1/p')
  if echo "$out" | grep "^3 texts, 384 dimensions" > /dev/null && awk -v a="$c2" -v b="$c3" 'BEGIN {exit !(a > 0.5 && b < 0.3)}'; then
    ok "examples/embed: the paraphrase is close ($c2), the unrelated text is not ($c3)"
  else
    bad "examples/embed printed unexpected results"
  fi
else
  bad "examples/embed failed: $out"
fi
# a model directory that is not there: the library's message, no crash
if out=$("$T/embed" "$T/no-such-model" "hi" 2>&1); then bad "embed with a missing model succeeded"
elif echo "$out" | grep "no-such-model" > /dev/null; then ok "a missing model is a clear error: $out"
else bad "missing model: unclear error: $out"; fi
# the installed CLI runs from the prefix and reports its build
if "$P/bin/modattn" --version > "$T/version" 2>&1 && grep -q "^modattn $(sed -n 's/.*MODATTN_VERSION_STRING "\(.*\)"/\1/p' "$REPO/include/modattn/modattn.h")" "$T/version"; then
  ok "installed modattn --version: $(head -1 "$T/version")"
else
  bad "installed modattn --version: $(cat "$T/version")"
fi
# the installed CLI finds the default model `make install` put in <prefix>/share/modattn/models, from
# any folder, with no --model and no MODATTN_MODEL
if [ -f "$P/share/modattn/models/all-MiniLM-L6-v2/config.json" ]; then ok "the default model is installed"
else bad "the default model is not in $P/share/modattn/models"; fi
if out=$(cd "$T" && env -u MODATTN_MODEL HOME="$T/nohome" "$P/bin/modattn" embed "found with no --model" 2>&1) && grep -q '"embedding"' <<<"$out"; then
  ok "the installed modattn embeds with no --model"
else
  bad "the installed modattn found no model: $(head -c 300 <<<"$out")"
fi
# the installed CLI indexes and searches with no --model: a store made with the installed default model,
# and a bge store, each searched from another folder (the store names its model; issue 40's "done when")
mkdir -p "$T/docs" "$T/elsewhere"
echo "the quick brown fox jumps over the lazy dog" > "$T/docs/fox.txt"
for m in default bge; do
  if [ $m = bge ]; then margs=(--model "$REPO/.models/bge-small-en-v1.5-int8"); else margs=(); fi
  if (cd "$T" && env -u MODATTN_MODEL HOME="$T/nohome" "$P/bin/modattn" index --quiet "${margs[@]}" --db "$T/$m.db" "$T/docs") > "$T/idx.out" 2>&1 &&
     out=$(cd "$T/elsewhere" && env -u MODATTN_MODEL HOME="$T/nohome" "$P/bin/modattn" search --json --db "$T/$m.db" "foxes" 2>&1) &&
     grep -q '"path": ".*fox.txt"' <<<"$out"; then
    ok "the installed modattn indexes ($m model) and searches with no --model"
  else
    bad "the installed modattn, $m model, with no --model: $(head -c 300 "$T/idx.out") $(head -c 300 <<<"${out:-}")"
  fi
done
echo "install_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
