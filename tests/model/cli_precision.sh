#!/bin/sh
# tests/model/cli_precision.sh MODATTN [PRECISION] — `--precision` from the command line.
# Without PRECISION: names and usage errors, the refusal on a CPU without the instructions
# (MODATTN_CPU_DISABLE masks them on any machine), `explain --model` and `devices` saying why, and
# an fp32 store showing its precision.
# With PRECISION (bf16 or int8; ctest: cli_precision_bf16, cli_precision_int8): a store that keeps
# the precision it was indexed in (searching it in another is refused with the way out; `stats`
# shows it; an fp32 store refuses a query in PRECISION). Whether the CPU runs PRECISION is decided
# here from /proc/cpuinfo (MODATTN_CPU_DISABLE applied), not from the program: where the CPU has the
# instructions a refusal is a failure (never another precision instead); where it lacks them the
# refusal is checked and the test exits 77 (CTest: skipped) saying why.
# Needs the model from `make model`; fails (does not skip) without it.
set -u
BIN=$1
PREC=${2:-}
MODEL=.models/all-MiniLM-L6-v2
pass=0
fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$2"; then ok; else ko "$1"; fi; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ ! -d "$MODEL" ]; then
    echo "FAIL: $MODEL is missing: run \`make model\` (tools/setup_model.sh) first" >&2
    echo "cli_precision: 0 passed, 1 failed"
    exit 1
fi
export MODATTN_MODEL="$MODEL"

"$BIN" --help > "$TMP/help" 2>&1
check "--help names --precision" 'grep -q -- "--precision P" "$TMP/help"'
"$BIN" --precision fp16 embed x > /dev/null 2> "$TMP/err"; rc=$?
check "an unknown precision is a usage error (rc $rc)" '[ $rc -eq 2 ]'
check "it names the choices" 'grep -q "fp32, bf16x3, bf16 or int8" "$TMP/err"'
MODATTN_PRECISION=nope "$BIN" embed x > /dev/null 2>&1; rc=$?
check "an unknown \$MODATTN_PRECISION is a usage error" '[ $rc -eq 2 ]'

# whether this CPU must run precision $1 (bf16: AVX512_BF16, int8: AVX512_VNNI; both with
# AVX512BW and AVX512VL), from /proc/cpuinfo and MODATTN_CPU_DISABLE; prints what is missing
cpu_runs() {
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*://')
    masked=$(printf '%s' "${MODATTN_CPU_DISABLE:-}" | tr 'A-Z,' 'a-z ')
    case $1 in bf16) need="avx512_bf16 avx512bw avx512vl" ;; int8) need="avx512_vnni avx512bw avx512vl" ;; *) return 1 ;; esac
    missing=
    for f in $need; do
        gone=
        for m in $masked; do
            case $m in avx | avx512 | avx512f | "$f") gone=1 ;; esac
        done
        case " $flags " in *" $f "*) [ -z "$gone" ] || missing="$missing $f (masked)" ;; *) missing="$missing $f" ;; esac
    done
    [ -z "$missing" ] && return 0
    echo "this CPU lacks$missing"
    return 1
}

printf 'The cat sat on the mat.\n\nDogs bark loudly at night.\n' > "$TMP/d.txt"
if [ -n "$PREC" ]; then
    P=$PREC
    if ! why=$(cpu_runs "$P"); then
        "$BIN" --precision "$P" embed x > "$TMP/out" 2> "$TMP/err"; rc=$?
        check "$P without its instructions is refused (rc $rc: $(cat "$TMP/err"))" \
            '[ $rc -eq 1 ] && grep -q "cannot run in $P" "$TMP/err" && [ ! -s "$TMP/out" ]'
        if [ "$fail" -ne 0 ]; then
            echo "cli_precision_$P: $pass passed, $fail failed"
            exit 1
        fi
        echo "cli_precision_$P: not available here: $why (the refusal was checked: $(cat "$TMP/err"))"
        exit 77
    fi
    "$BIN" --precision "$P" embed x > /dev/null 2> "$TMP/why"; rc=$?
    check "$P runs on this CPU, which has the instructions (rc $rc: $(cat "$TMP/why"))" '[ $rc -eq 0 ]'
    # a store keeps its precision
    "$BIN" --precision $P index --db "$TMP/s.db" "$TMP/d.txt" > /dev/null 2> "$TMP/err"; rc=$?
    check "index in $P exits 0 ($(cat "$TMP/err"))" '[ $rc -eq 0 ]'
    "$BIN" search --db "$TMP/s.db" cat > /dev/null 2> "$TMP/err"; rc=$?
    check "searching a $P store in fp32 is refused (rc $rc)" '[ $rc -eq 1 ]'
    check "the refusal says which precision to use" 'grep -q "holds $P embeddings" "$TMP/err" && grep -q -- "--precision $P" "$TMP/err"'
    "$BIN" --precision $P search --db "$TMP/s.db" cat > "$TMP/out" 2> "$TMP/err"; rc=$?
    check "searching it in $P works ($(cat "$TMP/err"))" '[ $rc -eq 0 ] && grep -q "cat" "$TMP/out"'
    "$BIN" index --db "$TMP/s.db" "$TMP/d.txt" > /dev/null 2>&1; rc=$?
    check "indexing into it in fp32 is refused" '[ $rc -eq 1 ]'
    "$BIN" stats --db "$TMP/s.db" --json > "$TMP/stats" 2>&1
    check "stats --json shows the precision" 'grep -q "\"precision\": \"$P\"" "$TMP/stats"'
    "$BIN" --precision $P search --db "$TMP/s.db" --json cat > "$TMP/a.json" 2>&1
    "$BIN" --precision $P search --db "$TMP/s.db" --json cat > "$TMP/b.json" 2>&1
    check "a $P search gives the same scores twice" 'cmp -s "$TMP/a.json" "$TMP/b.json"'
    # an fp32 store refuses a low-precision query, naming fp32
    "$BIN" index --db "$TMP/f.db" "$TMP/d.txt" > /dev/null 2>&1
    "$BIN" --precision $P search --db "$TMP/f.db" cat > /dev/null 2> "$TMP/err"; rc=$?
    check "a $P query on an fp32 store is refused, naming fp32" '[ $rc -eq 1 ] && grep -q "holds fp32 embeddings" "$TMP/err"'
    echo "cli_precision_$P: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
fi

# refused where the instructions are missing (masked here), with the reason, nothing on stdout
for p in bf16 int8 bf16x3; do
    MODATTN_CPU_DISABLE=avx512_bf16,avx512_vnni "$BIN" --precision $p embed x > "$TMP/out" 2> "$TMP/err"; rc=$?
    check "$p without its instructions exits 1 (rc $rc)" '[ $rc -eq 1 ]'
    check "$p: the error names the instruction set ($(cat "$TMP/err"))" \
        'grep -q "cannot run in $p" "$TMP/err" && grep -Eq "AVX512_(BF16|VNNI)|AMX-BF16|oneDNN|x86" "$TMP/err"'
    check "$p: nothing on stdout" '[ ! -s "$TMP/out" ]'
done
MODATTN_CPU_DISABLE=avx512_bf16 "$BIN" explain --model "$MODEL" > "$TMP/explain" 2>&1
check "explain --model says bf16 is refused and why" \
    'grep -q "linear_bf16.*--precision bf16 is refused" "$TMP/explain"'
"$BIN" devices > "$TMP/devices" 2>&1
check "devices lists linear_bf16 and linear_int8" 'grep -q linear_bf16 "$TMP/devices" && grep -q linear_int8 "$TMP/devices"'

# an fp32 store shows its precision (the bf16 and int8 stores: cli_precision_bf16, _int8)
"$BIN" index --db "$TMP/f.db" "$TMP/d.txt" > /dev/null 2>&1
"$BIN" stats --db "$TMP/f.db" > "$TMP/stats" 2>&1
check "stats shows fp32" 'grep -q "precision fp32" "$TMP/stats"'
echo "cli_precision: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
