#!/bin/sh
# tests/backends/check_twins.sh NM OBJECTS... — sanitizer builds: each kernel twin's object
# (*_unchecked.c.o, core/internal_core.h: kernel twins) must carry no sanitizer instrumentation
# (ASan's or UBSan's), and the file it copies must carry ASan's. OBJECTS: lists of object files
# separated by ';' (CMake's $<TARGET_OBJECTS:...> of the backends that hold twins).
nm=$1
shift
objs=$(printf '%s\n' "$@" | tr ';' '\n')
fail=0
twins=0
for twin in $(printf '%s\n' "$objs" | grep '_unchecked\.c\.o$'); do
  twins=$((twins + 1))
  checked=$(printf '%s\n' "$objs" | grep -F -x "$(printf '%s' "$twin" | sed 's/_unchecked\.c\.o$/.c.o/')")
  if [ -z "$checked" ]; then
    echo "FAIL: $twin has no instrumented counterpart among the objects"
    fail=1
    continue
  fi
  nt=$("$nm" "$twin" | grep -c -E '__asan_|__ubsan_')
  nc=$("$nm" -u "$checked" | grep -c '__asan_report')
  echo "$(basename "$checked"): $nc of ASan's report functions called; its twin $(basename "$twin"): $nt ASan or UBSan symbols"
  if [ "$nt" -ne 0 ]; then echo "FAIL: $twin is instrumented by a sanitizer"; fail=1; fi
  if [ "$nc" -eq 0 ]; then echo "FAIL: $checked calls no ASan checks: the sanitizer build is not instrumented"; fail=1; fi
done
if [ "$twins" -lt 4 ]; then
  echo "FAIL: $twins twins among the objects (want our AVX2 GEMM's, the row kernels', cpu_flash's AVX2 and AVX-512)"
  fail=1
fi
exit $fail
