#!/bin/sh
# tests/backends/clones_built.sh NM LIBRARY — the library holds the target_clones of cpu_blas's
# softmax_row and exp (AVX-512, AVX2, default and the resolver) and of a row kernel: in every
# build on x86-64 with GCC, the ASan+UBSan build included (where they were once left out, so the
# sanitizers never saw the AVX-512 code the CPU runs). In the sanitizer build the row kernel's
# instrumented copy is the static modattn__bias_layer_norm_checked (core/internal_core.h: kernel
# twins; its uninstrumented twin is _unchecked): that copy's clones are the ones looked for there.
nm=$1 lib=$2
syms=$("$nm" "$lib" 2>/dev/null) || { echo "FAIL: $nm $lib failed"; exit 1; }
fail=0 n=0
for f in cpu_blas_softmax_row cpu_blas_exp bias_layer_norm; do
  for c in avx512f avx2 default resolver; do
    if printf '%s\n' "$syms" | grep -q -E " modattn__$f(_checked)?\.$c\$"; then n=$((n + 1))
    else echo "FAIL: no modattn__$f.$c in $lib"; fail=1; fi
  done
done
echo "softmax_clones_built: $n of 12 clones found in $lib"
exit $fail
